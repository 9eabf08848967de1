"""Figures drawn at the phone's pixel ratio (issue 42 §6): the phone drawing is a PNG of
style.PHONE_DENSITY image pixels per CSS pixel (220 dpi, the same inches), made compact
(style.compact_png), and the page serves each drawing at its CSS size (booktools.picture: ``srcset`` with
its density, ``width``/``height`` in CSS pixels). The rule a page's markup is held to,
``picture.claim_problems``, is fed a 1× PNG claimed 2× and a 2× PNG without its size, and reports both.

Measured on 12 of the book's phone figures: matplotlib's RGBA PNG at 220 dpi is 2.2× the bytes of the one
at 110 dpi (1,116 KB against 517 KB); the 256-colour palette brings the 220 dpi set to 391 KB, below the
110 dpi RGBA one.
"""
from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from PIL import Image  # noqa: E402

from batchlab.ui import convergence, style  # noqa: E402
from booktools import picture  # noqa: E402
from booktools.layout import text_points  # noqa: E402

style.setup()


def _info(png: bytes) -> tuple[int, int, float, str]:
    with Image.open(io.BytesIO(png)) as image:
        return image.width, image.height, image.info["dpi"][0], image.mode


def _curve(layout: str) -> plt.Figure:
    return convergence.plot_loss_curve([3.0, 2.5, 2.2, 2.0], 1.5, batch_size=32, layout=layout)


def test_the_phone_drawing_is_twice_the_pixels_of_the_same_inches():
    """At PHONE_DENSITY the phone PNG has twice the pixels each way of the 1× one (± the padding to an
    even size), records 220 dpi, and its CSS size (what the page shows) is the 1× size: the same column
    and the same text size on the page."""
    fig = _curve("phone")
    one, two = style.figure_png(fig, "phone"), style.figure_png(fig, "phone", style.PHONE_DENSITY)
    plt.close(fig)
    w1, h1, dpi1, _ = _info(one)
    w2, h2, dpi2, mode = _info(two)
    assert dpi1 == pytest.approx(style.DPI, abs=0.01) and dpi2 == pytest.approx(2 * style.DPI, abs=0.02)
    assert abs(w2 - 2 * w1) <= 2 and abs(h2 - 2 * h1) <= 2, (w1, h1, w2, h2)
    assert w2 % 2 == 0 and h2 % 2 == 0 and mode == "P"
    css_w, _ = picture.css_size(*picture.png_size(two))
    assert css_w <= style.PHONE_PX and abs(css_w - w1) <= 1
    # an 8.5 pt label, shown at the CSS width: the same on the page at either density
    assert text_points(8.5, dpi2, w2, css_w) == pytest.approx(text_points(8.5, dpi1, w1, w1), rel=0.01)
    # a contrary case: the 2× PNG shown at its pixels (no density) has its text twice as tall
    assert text_points(8.5, dpi2, w2, w2) > 1.9 * text_points(8.5, dpi1, w1, w1)


def test_figure_png_refuses_a_density_that_is_not_a_whole_number():
    fig = _curve("desk")
    for bad in (0, 1.5, -2, "2"):
        with pytest.raises(ValueError, match="像素密度"):
            style.figure_png(fig, "desk", bad)
    plt.close(fig)


@settings(max_examples=30, deadline=None)
@given(width=st.integers(1, 40), height=st.integers(1, 40), density=st.integers(1, 3),
       colours=st.lists(st.tuples(*[st.integers(0, 255)] * 3), min_size=1, max_size=6))
def test_compact_png_keeps_every_pixel_and_pads_to_the_density(width, height, density, colours):
    """A picture of few colours comes back pixel for pixel (the palette holds them all), white padding
    on the right and bottom to a multiple of ``density``, its dpi kept."""
    source = Image.new("RGB", (width, height))
    source.putdata([colours[(x * 7 + y * 3) % len(colours)] for y in range(height) for x in range(width)])
    raw = io.BytesIO()
    source.save(raw, format="png", dpi=(110 * density, 110 * density))
    with Image.open(io.BytesIO(style.compact_png(raw.getvalue(), density))) as out:
        assert out.mode == "P" and out.info["dpi"][0] == pytest.approx(110 * density, abs=0.02)
        assert out.width % density == 0 and out.height % density == 0
        assert width <= out.width < width + density and height <= out.height < height + density
        rgb = out.convert("RGB")
    assert rgb.crop((0, 0, width, height)).tobytes() == source.tobytes()
    padding = [rgb.getpixel((x, y)) for x in range(out.width) for y in range(out.height) if x >= width or y >= height]
    assert set(padding) <= {(255, 255, 255)}


def test_compact_png_is_smaller_and_looks_the_same():
    """The palette PNG of a real figure: within 6/255 of every pixel of matplotlib's, and fewer bytes."""
    fig = _curve("phone")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=2 * fig.dpi, bbox_inches="tight", pad_inches=style.PHONE_PAD,
                facecolor="white")
    plt.close(fig)
    small = style.compact_png(buffer.getvalue(), 2)
    assert len(small) < 0.6 * len(buffer.getvalue()), (len(small), len(buffer.getvalue()))
    with Image.open(buffer) as original, Image.open(io.BytesIO(small)) as compact:
        a, b = original.convert("RGB"), compact.convert("RGB").crop((0, 0, original.width, original.height))
        worst = max(abs(p - q) for p, q in zip(a.tobytes(), b.tobytes()))
    assert worst <= 6, worst


# ── the markup the page serves, and the rule it is held to ──────────────────────────────────────────
def _png(width: int, height: int, dpi: float | None) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="png", **({"dpi": (dpi, dpi)} if dpi else {}))
    return buffer.getvalue()


def _attrs(markup: str, tag: str) -> dict[str, str]:
    element = re.search(rf"<{tag}\b([^>]*)>", markup).group(1)
    return dict(re.findall(r'(\w+)="([^"]*)"', element))


def test_png_size_reads_the_density_from_the_dpi():
    assert picture.png_size(_png(686, 664, 220)) == (686, 664, 2)
    assert picture.png_size(_png(343, 332, 110)) == (343, 332, 1)
    assert picture.png_size(_png(343, 332, None)) == (343, 332, 1)  # no pHYs: one pixel per CSS pixel
    assert picture.png_size(_png(900, 300, 330)) == (900, 300, 3)


def test_the_picture_markup_serves_each_drawing_at_its_css_size():
    phone, desk = _png(686, 664, 220), _png(665, 342, 110)
    markup = (picture.picture_start("p.png", *picture.png_size(phone))
              + picture.desk_img("d.png", *picture.png_size(desk), alt="图") + picture.PICTURE_END)
    source, img = _attrs(markup, "source"), _attrs(markup, "img")
    assert source["srcset"] == "p.png 2x" and (source["width"], source["height"]) == ("343", "332")
    assert source["media"] == picture.PHONE_MEDIA
    assert "srcset" not in img and (img["width"], img["height"]) == ("665", "342")
    assert img["decoding"] == "async" and img["alt"] == "图"
    assert picture.claim_problems("phone", phone, source["srcset"], source["width"], source["height"]) == []
    assert picture.claim_problems("desk", desk, img.get("srcset"), img["width"], img["height"]) == []
    # a desk drawing at 2× would be served the same way: srcset with its density, CSS size
    dense = _attrs(picture.desk_img("d.png", 1330, 684, 2), "img")
    assert dense["srcset"] == "d.png 2x" and (dense["width"], dense["height"]) == ("665", "342")
    # a 1× PNG keeps the plain markup it had (a frozen explorer's phone drawing)
    assert _attrs(picture.picture_start("p.png", 343, 332), "source")["srcset"] == "p.png"


def test_the_claim_rule_catches_a_1x_png_claimed_2x_and_a_2x_png_without_its_size():
    one, two = _png(343, 332, 110), _png(686, 664, 220)
    claimed = picture.claim_problems("phone.png", one, "phone.png 2x", "172", "166")
    assert "声称每个 CSS 像素 2 个" in claimed[0] and "记录的是 1" in claimed[0], claimed
    unsized = picture.claim_problems("phone.png", two, "phone.png 2x", None, None)
    assert len(unsized) == 1 and "343×332" in unsized[0], unsized
    plain = picture.claim_problems("phone.png", two, "phone.png", "686", "664")  # served as 1×
    assert any("声称" in p for p in plain) and any("343×332" in p for p in plain), plain
    assert picture.claim_problems("phone.png", two, "phone.png 2x", "343", "332") == []
    assert picture.claim_problems("phone.png", one, "phone.png", "343", "332") == []
    assert "不是" in picture.claim_problems("phone.png", two, "phone.png 2x, big.png 3x", "343", "332")[0]
