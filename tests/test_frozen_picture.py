"""The frozen explorer's figure on a phone (issue 29): an explorer's first drawing — the one the notebook
saves and booktools.frozen freezes into the page — carries a phone drawing in its output's metadata, as
style.show_figure's chapter figures do, and the frozen page serves it to a narrow screen in the same
<picture> as a chapter figure (booktools.picture.picture_start). Before: the desk PNG (771 px) squeezed
into a 358 px phone column, its smallest text 4.6 pt."""
from __future__ import annotations

import base64
import io
import re

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from batchlab.ui import style
from booktools import frozen, picture
from tests.test_figures_legible import book_style, explorers, phone_png_points, quiet  # noqa: F401 (book_style: autouse)

DRAWN = ["MemoryExplorer", "NoiseExplorer", "TradeoffExplorer"]
MOVE = {"MemoryExplorer": ("micro_batch_size", 4), "NoiseExplorer": ("batch_size", 8),
        "TradeoffExplorer": ("micro_batch_size", 4)}
"""A control of each explorer and a value it can move to."""


@pytest.mark.parametrize("name", DRAWN)
def test_explorer_phone_drawing_fits_the_phone_column_and_stays_legible(name):
    """The phone drawing of an explorer's figure, as its first render draws it: at most style.PHONE_PX
    wide (shown unscaled at 390 px) with its smallest text ≥ 8 pt there, and the dpi recorded (pHYs)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from batchlab.ui.explorer_widget import drawing_of

    widget = quiet(explorers()[name])
    fig = Figure()
    FigureCanvasAgg(fig)
    drawing_of(widget.explorer)(fig, widget.result, layout="phone")
    width, points = phone_png_points(fig)
    assert width <= style.PHONE_PX, f"{name}: phone PNG {width} px, the column {style.PHONE_PX} px"
    assert points >= style.MIN_TEXT_PT, f"{name}: smallest text {points:.1f} pt on a phone"
    # the saved drawing is the one measured: PHONE_DENSITY pixels per CSS pixel, its dpi recorded (pHYs)
    assert picture.css_size(*picture.png_size(widget.phone_png))[0] == width
    with Image.open(io.BytesIO(widget.phone_png)) as image:
        assert image.info["dpi"][0] == pytest.approx(style.DPI * style.PHONE_DENSITY, abs=0.02)
    with pytest.raises(ValueError, match="desk"):
        drawing_of(widget.explorer)(Figure(), widget.result, layout="tablet")
    plt.close("all")


@pytest.mark.parametrize("name", DRAWN)
def test_only_the_first_drawing_carries_a_phone_drawing(name, monkeypatch):
    """The first render shows the desk PNG with the phone PNG in its metadata (what the notebook saves);
    a moved control redraws the desk figure only (a live kernel stays as fast as before)."""
    shown = []
    monkeypatch.setattr(style, "display_drawings", lambda desk, phone=None, text="": shown.append((desk, phone)))
    widget = quiet(explorers()[name])
    (desk, phone), = shown
    assert desk == widget.png and phone == widget.phone_png and phone
    control, value = MOVE[name]
    widget.controls[control].value = value
    assert widget.error is None and len(shown) == 2
    assert shown[1] == (widget.png, None) and widget.png != desk


def test_display_drawings_is_one_output_with_the_phone_png_in_its_metadata(monkeypatch):
    import IPython.display

    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: calls.append((a, kw)))
    style.display_drawings(b"desk", b"phone")
    style.display_drawings(b"desk")
    (with_phone, kw1), (without, kw2) = calls
    assert with_phone[0] == {"image/png": base64.b64encode(b"desk").decode()} and kw1["raw"]
    assert kw1["metadata"] == {style.PHONE_METADATA: {"image/png": base64.b64encode(b"phone").decode()}}
    assert kw2["metadata"] == {}


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _state(metadata: dict) -> dict:
    output = {"output_type": "display_data", "metadata": metadata,
              "data": {"image/png": base64.b64encode(_png(771, 400)).decode()}}
    return {"o": {"model_name": "OutputModel", "state": {"outputs": [output]}}}


def test_frozen_figure_serves_its_phone_drawing_in_the_chapter_figures_picture():
    """An output with a phone PNG becomes picture.picture_start's <picture> around the desk <img>, both
    PNGs written; one without (the broken fixture: what every explorer saved before) stays a bare <img>."""
    phone = base64.b64encode(_png(343, 600)).decode()
    images: list[frozen.FrozenImage] = []
    out = frozen.frozen_html(_state({style.PHONE_METADATA: {"image/png": phone}}), "o", images, "../_images/")
    desk_image, phone_image = images
    assert (desk_image.width, phone_image.width, phone_image.height) == (771, 343, 600)
    start = picture.picture_start(f"../_images/{phone_image.name}", 343, 600)
    assert out == (f'<div class="bl-frozen-output">{start}<img class="bl-frozen-figure" '
                   f'src="../_images/{desk_image.name}" width="771" height="400" decoding="async" '
                   f'alt="探索器默认状态的图">{picture.PICTURE_END}</div>')
    assert f'media="{picture.PHONE_MEDIA}"' in start
    images = []
    bare = frozen.frozen_html(_state({}), "o", images, "../_images/")
    assert "<picture" not in bare and len(images) == 1
    assert re.fullmatch(r'<div class="bl-frozen-output"><img [^>]*></div>', bare)
