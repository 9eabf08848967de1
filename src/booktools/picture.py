"""A phone's own drawing of every chapter figure (registered in _config.yml, `sphinx: extra_extensions`).

A chapter shows a figure with `batchlab.ui.style.show_figure`: ONE notebook output whose `image/png` is
the figure drawn for the desk column and whose output metadata carries, under
`style.PHONE_METADATA`, the same figure drawn for a phone's column (stacked panels, fewer ticks,
shorter labels). Jupyter shows the desk PNG; nbval does not compare metadata.

This extension turns such an output into

    <picture><source media="screen and (max-width: 767.98px)" srcset="…/phone.png 2x"
                     width="343" height="703"><img src="…/desk.png" width="665" height="342" …></picture>

with the phone PNG written next to the desk one (`_images/`, named by its hash as myst-nb names the
desk one). A phone loads only its PNG (the browser picks one source); a desk and the printed PDF
(`screen and`: print never matches) load only the desk one. booktools.layout measures the PNG the page
chose (`currentSrc`) at 390 and 1280 px (tests/test_page_figures.py).

Sizes: the phone PNG is drawn at ``style.PHONE_DENSITY`` image pixels per CSS pixel (sharp on a 2–3×
phone screen); the density is read from the PNG's pHYs (its dpi ÷ ``style.DPI``), so a PNG drawn at one
pixel per CSS pixel (a notebook not yet re-executed) is still served at its right size. Each drawing
carries its CSS size (pixels ÷ density) as ``width``/``height`` and, when drawn denser than one pixel per
CSS pixel, the density in ``srcset`` (``2x``): the browser reserves the figure's box before the PNG
arrives (no layout shift) and shows it at that size. :func:`claim_problems` is the rule a built page's
markup is checked by (tests/test_page_figures.py). The desk ``<img>`` is written here, not by Sphinx:
Sphinx writes no size (and wraps an image given one in a link to the file); ``decoding="async"`` lets
the browser decode it off the main thread.

How: myst-nb renders an image output with `NbElementRenderer.render_image`; `setup()` wraps it, so an
output with a phone PNG becomes a `picture` node holding the desk `image` node and a `phone_image` node
(an `image` subclass: Sphinx's image collector copies it to `_images/` like any image). The HTML writer
emits `<picture>` and the phone's `<source>` for the one, and nothing for the other; the desk `<img>`
is Sphinx's own.
"""
from __future__ import annotations

import hashlib
import html
import io
import posixpath
import re
from binascii import a2b_base64
from urllib.parse import quote

from docutils import nodes

from batchlab.ui.style import DPI, PHONE_METADATA

PHONE_MEDIA = "screen and (max-width: 767.98px)"
"""Where the phone drawing is served: the theme's own phone breakpoint (below it the sidebars are
drawers and the column is the screen). `screen`: the PDF, printed from the same HTML, keeps the desk one."""


class picture(nodes.General, nodes.Element):  # noqa: N801 - docutils names nodes in lower case
    """A figure output drawn twice: its children are the desk `image` and the `phone_image`."""


class phone_image(nodes.image):  # noqa: N801
    """The phone PNG of a `picture`: collected and copied as an image, written as the `<source>`."""


def density_of(dpi: float | None) -> int:
    """Image pixels per CSS pixel of a figure drawn at ``dpi`` (its PNG's pHYs): ``dpi ÷ style.DPI`` to
    the nearest whole number, at least 1; 1 for a PNG that records none."""
    return max(1, round(dpi / DPI)) if dpi else 1


def png_size(data: bytes) -> tuple[int, int, int]:
    """Width and height of a PNG in pixels, and its density (:func:`density_of` its pHYs dpi)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.width, image.height, density_of((image.info.get("dpi") or (0,))[0])


def css_size(width: int, height: int, density: int) -> tuple[int, int]:
    """The CSS pixels an image of ``width`` × ``height`` pixels drawn at ``density`` is shown at."""
    return round(width / density), round(height / density)


def srcset(src: str, density: int) -> str:
    """A ``srcset`` that serves ``src`` at ``density`` image pixels per CSS pixel (plain at 1)."""
    return src if density == 1 else f"{src} {density}x"


_SRCSET = re.compile(r"^\s*(\S+?)(?:\s+(\d+(?:\.\d+)?)x)?\s*$")


def claim_problems(what: str, png: bytes, srcset_value: str | None, width: str | None, height: str | None) -> list[str]:
    """What is wrong with how a page serves the PNG ``png`` (named ``what`` in the message): the density
    its ``srcset_value`` claims (none: 1×; ``None`` for a plain ``<img src>``) must be the one its pHYs
    records, and its ``width``/``height`` attributes its CSS size. A 1× PNG claimed 2× is shown at half
    its size (its text half as tall); a PNG without its size makes the page jump when it arrives and a
    2× one is shown twice as large."""
    pixels_w, pixels_h, density = png_size(png)
    claimed = 1.0
    if srcset_value is not None:
        match = _SRCSET.match(srcset_value)
        if not match:
            return [f"{what}：srcset「{srcset_value}」不是「文件 密度x」的形式"]
        claimed = float(match.group(2) or 1)
    out = []
    if claimed != density:
        out.append(f"{what}：srcset 声称每个 CSS 像素 {claimed:g} 个图像像素，PNG 记录的是 {density}"
                   f"（{pixels_w}×{pixels_h} 像素，按 pHYs 的 dpi ÷ {DPI}）")
    want = css_size(pixels_w, pixels_h, density)
    if (width, height) != tuple(str(v) for v in want):
        out.append(f"{what}：width/height 应为 CSS 尺寸 {want[0]}×{want[1]}（{pixels_w}×{pixels_h} 像素 ÷ {density}），"
                   f"写的是 {width}×{height}")
    return out


def _wrap_render_image(render_image):
    """myst-nb's `render_image`, plus the phone PNG of an output that carries one."""
    def render(self, data):
        out = render_image(self, data)
        phone = (data.output_metadata.get(PHONE_METADATA) or {}).get(data.mime_type)
        if data.mime_type != "image/png" or not phone or len(out) != 1:
            return out
        raw = a2b_base64(phone)
        uri = self.write_file([f"{hashlib.sha256(raw).hexdigest()}.png"], raw, overwrite=False, exists_ok=True)
        # sizes under names of their own: an image with a width or height is wrapped by Sphinx in a link
        # to the full-size file (html_scaled_image_link)
        desk = dict(zip(("png_width", "png_height", "density"), png_size(a2b_base64(data.content))))
        width, height, density = png_size(raw)
        return [picture("", out[0], phone_image(uri=uri, png_width=width, png_height=height, density=density),
                        **desk)]
    render.__wrapped__ = render_image
    return render


def _src(translator, uri: str) -> str:
    """The URL an image `uri` has in the built page (Sphinx copies it to `_images/` under this name)."""
    images = translator.builder.images
    return posixpath.join(translator.builder.imgpath, quote(images[uri])) if uri in images else uri


def picture_start(phone_src: str, width: int, height: int, density: int = 1) -> str:
    """The start of a figure drawn twice, up to where its desk ``<img>`` goes: ``<picture>`` and the
    ``<source>`` that serves the phone PNG ``phone_src`` (``width`` × ``height`` pixels, ``density``
    pixels per CSS pixel) below :data:`PHONE_MEDIA`, at its CSS size. The one markup of both drawings,
    for a chapter figure (here) and a frozen explorer's (booktools.frozen); :data:`PICTURE_END` closes it."""
    css_w, css_h = css_size(width, height, density)
    return (f'<picture class="bl-picture"><source media="{PHONE_MEDIA}" '
            f'srcset="{html.escape(srcset(phone_src, density))}" width="{css_w}" height="{css_h}">')


def desk_img(src: str, width: int, height: int, density: int = 1, alt: str = "", classes: str = "") -> str:
    """The desk drawing's ``<img>``: the PNG ``src`` (``width`` × ``height`` pixels at ``density``) at its
    CSS size, decoded off the main thread."""
    dense = f' srcset="{html.escape(srcset(src, density))}"' if density != 1 else ""
    css_w, css_h = css_size(width, height, density)
    cls = f' class="{html.escape(classes)}"' if classes else ""
    return (f'<img src="{html.escape(src)}"{dense}{cls} alt="{html.escape(alt)}" width="{css_w}" '
            f'height="{css_h}" decoding="async">')


PICTURE_END = "</picture>"


def visit_picture_html(self, node: picture) -> None:
    """The whole ``<picture>``: the phone's ``<source>`` and the desk ``<img>``, each with its size."""
    phone = next(child for child in node.children if isinstance(child, phone_image))
    desk = next(child for child in node.children if not isinstance(child, phone_image))
    src = _src(self, desk["uri"])
    self.body.append(picture_start(_src(self, phone["uri"]), phone["png_width"], phone["png_height"],
                                   phone["density"])
                     + desk_img(src, node["png_width"], node["png_height"], node["density"],
                                alt=desk.get("alt", src), classes=" ".join(desk.get("classes", [])))
                     + PICTURE_END)
    raise nodes.SkipNode


def skip(self, node: nodes.Node) -> None:
    raise nodes.SkipNode


def visit_passthrough(self, node: nodes.Node) -> None:
    pass


def setup(app) -> dict:
    from myst_nb.core.render import NbElementRenderer

    if not hasattr(NbElementRenderer.render_image, "__wrapped__"):  # once per process (tests build twice)
        NbElementRenderer.render_image = _wrap_render_image(NbElementRenderer.render_image)
    app.add_node(picture, html=(visit_picture_html, None),
                 latex=(visit_passthrough, visit_passthrough), text=(visit_passthrough, visit_passthrough))
    app.add_node(phone_image, html=(skip, None), latex=(skip, None), text=(skip, None))
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
