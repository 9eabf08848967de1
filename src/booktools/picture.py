"""A phone's own drawing of every chapter figure (registered in _config.yml, `sphinx: extra_extensions`).

A chapter shows a figure with `batchlab.ui.style.show_figure`: ONE notebook output whose `image/png` is
the figure drawn for the desk column and whose output metadata carries, under
`style.PHONE_METADATA`, the same figure drawn for a phone's column (stacked panels, fewer ticks,
shorter labels). Jupyter shows the desk PNG; nbval does not compare metadata.

This extension turns such an output into

    <picture><source media="screen and (max-width: 767.98px)" srcset="…/phone.png"
                     width="343" height="703"><img src="…/desk.png" …></picture>

with the phone PNG written next to the desk one (`_images/`, named by its hash as myst-nb names the
desk one). A phone loads only its PNG (the browser picks one source); a desk and the printed PDF
(`screen and`: print never matches) load only the desk one. booktools.layout measures the PNG the page
chose (`currentSrc`) at 390 and 1280 px (tests/test_page_figures.py).

How: myst-nb renders an image output with `NbElementRenderer.render_image`; `setup()` wraps it, so an
output with a phone PNG becomes a `picture` node holding the desk `image` node and a `phone_image` node
(an `image` subclass: Sphinx's image collector copies it to `_images/` like any image). The HTML writer
emits `<picture>` and the phone's `<source>` for the one, and nothing for the other; the desk `<img>`
is Sphinx's own.
"""
from __future__ import annotations

import hashlib
import html
import posixpath
from binascii import a2b_base64
from urllib.parse import quote

from docutils import nodes

from batchlab.ui.style import PHONE_METADATA

PHONE_MEDIA = "screen and (max-width: 767.98px)"
"""Where the phone drawing is served: the theme's own phone breakpoint (below it the sidebars are
drawers and the column is the screen). `screen`: the PDF, printed from the same HTML, keeps the desk one."""


class picture(nodes.General, nodes.Element):  # noqa: N801 - docutils names nodes in lower case
    """A figure output drawn twice: its children are the desk `image` and the `phone_image`."""


class phone_image(nodes.image):  # noqa: N801
    """The phone PNG of a `picture`: collected and copied as an image, written as the `<source>`."""


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG from its IHDR chunk (bytes 16–24)."""
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _wrap_render_image(render_image):
    """myst-nb's `render_image`, plus the phone PNG of an output that carries one."""
    def render(self, data):
        out = render_image(self, data)
        phone = (data.output_metadata.get(PHONE_METADATA) or {}).get(data.mime_type)
        if data.mime_type != "image/png" or not phone or len(out) != 1:
            return out
        raw = a2b_base64(phone)
        uri = self.write_file([f"{hashlib.sha256(raw).hexdigest()}.png"], raw, overwrite=False, exists_ok=True)
        width, height = _png_size(raw)
        # its size under names of its own: an image with a width or height is wrapped by Sphinx in a link
        # to the full-size file (html_scaled_image_link)
        return [picture("", out[0], phone_image(uri=uri, png_width=width, png_height=height))]
    render.__wrapped__ = render_image
    return render


def _src(translator, uri: str) -> str:
    """The URL an image `uri` has in the built page (Sphinx copies it to `_images/` under this name)."""
    images = translator.builder.images
    return posixpath.join(translator.builder.imgpath, quote(images[uri])) if uri in images else uri


def picture_start(phone_src: str, width: int, height: int) -> str:
    """The start of a figure drawn twice, up to where its desk ``<img>`` goes: ``<picture>`` and the
    ``<source>`` that serves the phone PNG ``phone_src`` (``width`` × ``height`` pixels) below
    :data:`PHONE_MEDIA`. The one markup of both drawings, for a chapter figure (here) and a frozen
    explorer's (booktools.frozen); :data:`PICTURE_END` closes it."""
    return (f'<picture class="bl-picture"><source media="{PHONE_MEDIA}" srcset="{html.escape(phone_src)}" '
            f'width="{width}" height="{height}">')


PICTURE_END = "</picture>"


def visit_picture_html(self, node: picture) -> None:
    phone = next(child for child in node.children if isinstance(child, phone_image))
    self.body.append(picture_start(_src(self, phone["uri"]), phone["png_width"], phone["png_height"]))


def depart_picture_html(self, node: picture) -> None:
    self.body.append(PICTURE_END)


def skip(self, node: nodes.Node) -> None:
    raise nodes.SkipNode


def visit_passthrough(self, node: nodes.Node) -> None:
    pass


def setup(app) -> dict:
    from myst_nb.core.render import NbElementRenderer

    if not hasattr(NbElementRenderer.render_image, "__wrapped__"):  # once per process (tests build twice)
        NbElementRenderer.render_image = _wrap_render_image(NbElementRenderer.render_image)
    app.add_node(picture, html=(visit_picture_html, depart_picture_html),
                 latex=(visit_passthrough, visit_passthrough), text=(visit_passthrough, visit_passthrough))
    app.add_node(phone_image, html=(skip, None), latex=(skip, None), text=(skip, None))
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
