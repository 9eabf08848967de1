"""Every figure the book shows is legible at the size the page shows it, and every explorer tells a
reader of the static page how to make it move.

The rule (``min_text_points`` below): the smallest text a figure draws, scaled to the width the page
gives its PNG (its own pixel width, or the 760 px content column when wider), is at least
``style.MIN_TEXT_PT`` points. Each figure function of ``batchlab.ui`` is drawn here with small
synthetic inputs, as pyplot figures are shown in a notebook (cut to their drawn area); each explorer
at its default state, as the frozen HTML shows it.

In the built book the page decides the size: tests/test_page_layout.py reads, in Chromium at 1280 and
390 px, the width every figure is displayed at and checks that ``SMALLEST_FONT_PT`` (the smallest
text any figure of the book draws, checked here) is still ``MIN_TEXT_PT`` there.
"""
import ast
import contextlib
import io
import json
import math
from dataclasses import replace
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from batchlab.formulas.memory import stage_memory  # noqa: E402
from batchlab.formulas.pipeline_schedules import pipeline_timeline  # noqa: E402
from batchlab.formulas.roofline import RateCurve  # noqa: E402
from batchlab.formulas.tune import tune  # noqa: E402
from batchlab.lecture.case import CASE_STUDY  # noqa: E402
from batchlab.ui import (convergence, diagrams, efficiency, memory, misconceptions, noise, pipeline,  # noqa: E402
                         precision, schedules, style)
from booktools import ROOT  # noqa: E402

SMALLEST_FONT_PT = 8.5
"""Points, at the figure's own size, of the smallest text any figure of the book draws (ui figures,
explorers, the batch diagram, plain pyplot with the book's rcParams): the font size the page test
scales by each figure's displayed width."""
CURVE = RateCurve((1024, 2048, 4096, 8192), (1e12, 2e12, 2.5e12, 2.6e12), "测试曲线")
SIZES = [1, 2, 4, 8, 16, 32, 64, 128]
PHONE_PX = 358  # the content column on a 390 px phone, in CSS pixels


# ----------------------------------------------------------------------------- the rule, measured
def drawn_text_sizes(fig: plt.Figure) -> list[tuple[str, float]]:
    """Every text ``fig`` draws (titles, labels, tick labels, legends, annotations), as (text, size in
    points at the figure's own size): the figure is drawn once on its Agg canvas and each text the
    renderer receives is recorded, so hidden and off-axes texts do not count."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    seen: list[tuple[str, float]] = []
    original = renderer.draw_text

    def record(gc, x, y, s, prop, angle, ismath=False, mtext=None):  # noqa: ANN001 - matplotlib's signature
        if str(s).strip():
            seen.append((str(s), prop.get_size_in_points()))
        return original(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = record
    try:
        fig.draw(renderer)
    finally:
        del renderer.draw_text  # the instance attribute: the class method is back
    return seen


def displayed_scale(fig: plt.Figure, column_px: float = style.COLUMN_PX, tight: bool = False) -> float:
    """How many displayed points one point of ``fig`` becomes in a content column ``column_px`` CSS
    pixels wide: the PNG is ``width × dpi`` pixels, shown at that many CSS pixels (1/96 inch) or scaled
    down to the column. ``tight``: the PNG is cut to the drawn area plus 0.1 inch, as Jupyter's inline
    backend saves a pyplot figure (explorers show the whole canvas)."""
    width_in = fig.get_figwidth()
    if tight:
        width_in = fig.get_tightbbox(fig.canvas.get_renderer()).width + 2 * 0.1
    shown_px = min(width_in * fig.dpi, column_px)
    return (shown_px / 96) / width_in


def min_text_points(fig: plt.Figure, column_px: float = style.COLUMN_PX, tight: bool = False) -> float:
    """The smallest text ``fig`` draws, in points at the size the page shows it in a ``column_px``
    column (see :func:`displayed_scale`); the book's rule is ≥ ``style.MIN_TEXT_PT`` at ``style.COLUMN_PX``."""
    sizes = [size for _, size in drawn_text_sizes(fig)]
    if not sizes:
        raise ValueError("the figure draws no text")
    return min(sizes) * displayed_scale(fig, column_px, tight)


@pytest.fixture(scope="module", autouse=True)
def book_style():
    with matplotlib.rc_context():
        style.setup()
        yield


def noise_data(n: int = 256) -> tuple[SimpleNamespace, SimpleNamespace]:
    """A gradient cloud and error statistics shaped like :mod:`batchlab.measure.noise`'s records
    (``GradientCloud``, ``MinibatchError``), without torch."""
    rng = np.random.default_rng(0)
    center = np.array([1.0, 0.0])
    shrink = [math.sqrt((n - b) / (n - 1) / b) for b in SIZES]
    cloud = SimpleNamespace(batch_sizes=SIZES, center=center,
                            points=[center + rng.normal(size=(200, 2)) * np.array([0.3, 1.0]) * f for f in shrink])
    stats = SimpleNamespace(batch_sizes=SIZES, rel_error=[1.02 * f for f in shrink], rel_error_theory=shrink,
                            cosine=[1 / math.sqrt(1 + f * f) for f in shrink], sq_error=[1.01 * f * f for f in shrink],
                            sq_error_theory=[f * f for f in shrink], sq_error_iid=[1.0 / b for b in SIZES])
    return cloud, stats


def histories(batch_sizes=(8, 32, 128, 512), budget: int = 2048) -> list:
    """Objects with the fields of :class:`batchlab.measure.train.History` the figures read."""
    out = []
    for b in batch_sizes:
        steps = list(range(0, budget // b + 1, max(1, 128 // b)))
        out.append(SimpleNamespace(eval_step=steps, eval_samples=[s * b for s in steps],
                                   eval_loss=[1.5 + 2.5 * math.exp(-s * b / (300 + b)) for s in steps]))
    return out


def ramp_histories() -> list:
    """Runs shaped like :class:`batchlab.measure.train.History` under a constant batch and three ramps (4.6)."""
    out = []
    for batches in ([8] * 512, [8 * (1 + min(7, n // 36)) for n in range(128)], [8] * 32 + [32] * 8 + [64] * 56,
                    [8] * 16 + [16] * 16 + [64] * 58):
        seen = [sum(batches[:i + 1]) for i in range(len(batches))]
        steps = list(range(0, len(batches) + 1, 2))
        out.append(SimpleNamespace(samples_seen=seen, batch_sizes=batches, eval_step=steps,
                                   eval_samples=[seen[s - 1] if s else 0 for s in steps],
                                   eval_loss=[1.5 + 2.5 * math.exp(-(seen[s - 1] if s else 0) / 400) for s in steps]))
    return out


def matmul_reports() -> list[SimpleNamespace]:
    """Reports shaped like :class:`batchlab.measure.matmul.MatmulBench` (the fields the figure reads), without torch."""
    ms = [1, 4, 16, 64, 256, 1024, 4096]
    return [SimpleNamespace(dtype=d, device="cpu", results=[SimpleNamespace(m=m, k=1024, n=4096, tflops=f * m / (m + 64))
                                                            for m in ms]) for d, f in (("float32", 0.5), ("bfloat16", 1.1))]


def _ratios() -> dict:
    return {"微批次 ×2": {"steps_to_target": 1.0, "peak_memory_gib": 1.6, "matmul_efficiency": 1.0,
                         "bubble_fraction": 1.9, "p2p_messages": 0.5, "allreduce_mib_per_sample": 1.0},
            "全局批次 ×2": {"steps_to_target": 0.55, "peak_memory_gib": 1.0, "matmul_efficiency": 1.0,
                          "bubble_fraction": 0.52, "p2p_messages": 2.0, "allreduce_mib_per_sample": 0.5}}


def _estimate_stats() -> SimpleNamespace:
    _, stats = noise_data()
    return SimpleNamespace(**{**vars(stats), "batch_sizes": [*SIZES, 256], "rel_error": [*stats.rel_error, 0.0],
                              "rel_error_theory": [*stats.rel_error_theory, 0.0], "cosine": [*stats.cosine, 1.0]})


# Each figure function of batchlab.ui, as a chapter calls it (the notebooks' stacked figures included), in
# the layout it is given (style.LAYOUTS: the desk column or a phone's).
FIGURES = {
    "memory.plot_stage_memory": lambda layout: memory.plot_stage_memory(
        stage_memory(replace(CASE_STUDY.job, device_memory_gib=16.0, recompute="full")),
        measured=[2e10, None, None, 1e10], layout=layout),
    "memory.plot_schedule_memory": lambda layout: memory.plot_schedule_memory(
        {s: stage_memory(replace(CASE_STUDY.job, schedule=s)) for s in ("gpipe", "1f1b")}, layout=layout),
    "memory.plot_memory_by_batch": lambda layout: memory.plot_memory_by_batch(
        [1, 2, 4, 8, 16], [3e6] * 5, [b * 1.2e6 for b in (1, 2, 4, 8, 16)], 64, layout=layout),
    "memory.plot_memory_audit": lambda layout: memory.plot_memory_audit(
        {i: 0.3 + 0.006 * i for i in range(96)}, {i: 0.35 + 0.008 * i for i in range(96)}, (0.92, 0.85),
        "调整前（微批次 2）最满阶段的显存占比", "调整后（微批次 4）", layout=layout),
    "misconceptions.plot_what_moves": lambda layout: misconceptions.plot_what_moves(_ratios(), layout=layout),
    "misconceptions.plot_early_late": lambda layout: misconceptions.plot_early_late(
        histories(), ["B=8，恒定学习率", "B=64，恒定学习率", "B=8，余弦衰减", "B=8，2048 条后增大到 32"], 1024, 1.5,
        layout=layout),
    "misconceptions.plot_ramp": lambda layout: misconceptions.plot_ramp(
        ramp_histories(), ["恒定 B=8", "线性爬升，学习率不变", "线性爬升，平方根", "噪声驱动，平方根"], target=1.52,
        layout=layout),
    "misconceptions.plot_lr_sweep": lambda layout: misconceptions.plot_lr_sweep(
        {8: {10.0: 1.8, 30.0: 1.7, 90.0: 1.75, 270.0: 9.0}, 64: {30.0: 1.9, 90.0: 1.72, 270.0: 1.7, 810.0: 12.0}},
        floor=1.5, layout=layout),
    "noise.plot_estimate_error": lambda layout: noise.plot_estimate_error(_estimate_stats(), layout=layout),
    "noise.plot_gradient_cloud": lambda layout: noise.plot_gradient_cloud(noise_data()[0], 4, layout=layout),
    "noise.plot_variance_curve": lambda layout: noise.plot_variance_curve(noise_data()[1], 32, layout=layout),
    "precision.plot_accumulation_error": lambda layout: precision.plot_accumulation_error(
        {"fp32": {m: 1e-8 * m for m in (1, 2, 4, 8, 16, 32, 64)},
         "bf16": {m: 2.2e-3 * m ** 0.45 for m in (1, 2, 4, 8, 16, 32, 64)},
         "bf16-kahan": {m: 2.2e-3 for m in (1, 2, 4, 8, 16, 32, 64)},
         "bf16-fp32-main": {m: 2.2e-3 / m ** 0.3 for m in (1, 2, 4, 8, 16, 32, 64)}}, layout=layout),
    "noise.plot_noise_growth": lambda layout: noise.plot_noise_growth(SimpleNamespace(
        samples_seen=(0, 256, 512, 1024, 2048, 4096), loss=(4.17, 3.82, 3.53, 3.0, 2.27, 1.72), subset_size=128,
        b_simple=((20.9, 18.8, 17.4, 18.4), (19.2, 20.0, 18.6, 18.9), (27.0, 24.8, 27.0, 26.3), (42.4, 40.2, 40.7, 38.5),
                  (51.8, 49.1, 43.1, 50.3), (60.2, 64.9, 68.9, 81.2))), layout=layout),
    "pipeline.plot_pipeline_timeline": lambda layout: pipeline.plot_pipeline_timeline(
        pipeline_timeline("1f1b", 4, 8), layout=layout),
    "pipeline.plot_pipeline_timelines": lambda layout: pipeline.plot_pipeline_timelines(
        [pipeline_timeline(s, 4, 8) for s in ("gpipe", "1f1b")], layout=layout),
    "pipeline.plot_schedule_comparison": lambda layout: pipeline.plot_schedule_comparison(4, 8, layout=layout),
    "schedules.plot_schedule_runs": lambda layout: schedules.plot_schedule_runs(
        [pipeline_timeline(s, 4, 8, 1 / v, 2 / v, virtual_stages=v) for s, v in (("interleaved-1f1b", 2),
                                                                                 ("zero-bubble", 1))],
        ["交错式 1F1B（v = 2），多进程实测：气泡占比 28.9%", "零气泡（ZB-H1），多进程实测：气泡占比 18.6%"], ["秒"] * 2,
        layout=layout),
    "pipeline.plot_tradeoff": lambda layout: pipeline.plot_tradeoff(
        tune(CASE_STUDY.job, CURVE)["candidates"], 2, layout=layout),
    "efficiency.plot_matmul_rates": lambda layout: efficiency.plot_matmul_rates(matmul_reports(), layout=layout),
    "efficiency.plot_roofline": lambda layout: efficiency.plot_roofline(
        2e12, 1e11, [(m, 1024, 4096, 1e12 * m / (m + 64)) for m in (1, 4, 16, 64, 256, 1024)], layout=layout),
    "convergence.plot_loss_curve": lambda layout: convergence.plot_loss_curve(
        [3.0 * 0.98 ** s + 1.5 for s in range(100)], 1.47, 32, layout=layout),
    "convergence.plot_training_curves": lambda layout: convergence.plot_training_curves(
        histories(), ["B = 8", "B = 32", "B = 128", "B = 512"], floor=1.5, layout=layout),
    "convergence.plot_steps_samples": lambda layout: convergence.plot_steps_samples(
        [8, 32, 128, 512], [200, 60, 25, 12], {"e_min": 1200, "s_min": 8, "b_noise": 150}, layout=layout),
    "diagrams.draw_batch_anatomy": lambda layout: diagrams.draw_batch_anatomy(CASE_STUDY.job, layout=layout),
}


def quiet(build):
    with contextlib.redirect_stdout(io.StringIO()):  # outside a kernel an Output widget prints its image
        return build()


def explorers() -> dict:
    from batchlab.page.batch import BatchExplorer
    from batchlab.page.memory import MemoryExplorer
    from batchlab.page.noise import NoiseExplorer
    from batchlab.page.tradeoff import TradeoffExplorer
    from batchlab.ui.explorer_widget import ExplorerWidget

    return {"BatchExplorer": lambda: ExplorerWidget(BatchExplorer()),
            "MemoryExplorer": lambda: ExplorerWidget(MemoryExplorer()),
            "NoiseExplorer": lambda: ExplorerWidget(NoiseExplorer(*noise_data(), batch_size=4, lr_rule="sqrt")),
            "TradeoffExplorer": lambda: ExplorerWidget(TradeoffExplorer(CURVE))}


def test_every_figure_function_of_ui_is_checked_here():
    import importlib
    import pkgutil

    import batchlab.ui

    modules = [importlib.import_module(f"batchlab.ui.{m.name}") for m in pkgutil.iter_modules(batchlab.ui.__path__)]
    functions = {f"{module.__name__.rsplit('.', 1)[1]}.{name}" for module in modules
                 for name in vars(module) if name.startswith("plot_") and callable(getattr(module, name))
                 and getattr(getattr(module, name), "__module__", None) == module.__name__}  # defined there
    functions.add("diagrams.draw_batch_anatomy")
    assert functions == set(FIGURES), "a figure function without a legibility check (or a stale one)"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_text_is_at_least_8_pt_in_the_column(name):
    fig = FIGURES[name]("desk")
    points = min_text_points(fig, tight=True)
    width_px = fig.get_tightbbox(fig.canvas.get_renderer()).width * fig.dpi
    plt.close(fig)
    assert points >= style.MIN_TEXT_PT, f"{name}: smallest text {points:.1f} pt on the page"
    assert width_px <= style.COLUMN_PX * 1.1, f"{name}: {width_px:.0f} px, far wider than the column"


def phone_png_points(fig: plt.Figure) -> tuple[int, float]:
    """The phone PNG ``style.figure_png`` saves of ``fig`` (at ``style.PHONE_DENSITY``): the CSS width
    the page gives it (pixels ÷ the density its dpi records, booktools.picture), and its smallest text in
    points as a 390 px phone shows it (at that width when it fits the column, else scaled down to it)."""
    from booktools.picture import css_size, png_size

    png = style.figure_png(fig, "phone", style.PHONE_DENSITY)
    pixels, height, density = png_size(png)
    width = css_size(pixels, height, density)[0]
    smallest = min(size for _, size in drawn_text_sizes(fig))
    return width, layout_points(smallest, fig.dpi * density, pixels, min(width, style.PHONE_PX))


def layout_points(font_pt: float, dpi: float, natural: float, shown: float) -> float:
    from booktools.layout import text_points

    return text_points(font_pt, dpi, natural, shown)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_phone_drawing_fits_the_phone_column_and_stays_legible(name):
    """The phone drawing of every figure: at most style.PHONE_PX CSS pixels wide, so the page shows it
    unscaled (no sideways scroll, nothing cut), and its smallest text ≥ 8 pt there."""
    fig = FIGURES[name]("phone")
    width, points = phone_png_points(fig)
    plt.close(fig)
    assert width <= style.PHONE_PX, f"{name}: phone PNG {width} px, the column {style.PHONE_PX} px"
    assert points >= style.MIN_TEXT_PT, f"{name}: smallest text {points:.1f} pt on a phone"


def test_the_phone_rule_fails_a_desk_figure_and_small_text():
    """A desk-width figure saved as the phone drawing is too wide; a 5 pt label too small."""
    wide, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 3))
    ax.set_xlabel("批大小")
    assert phone_png_points(wide)[0] > style.PHONE_PX
    small, ax = plt.subplots(figsize=(style.PHONE_WIDTH, 3))
    ax.set_xlabel("批大小", fontsize=5)
    width, points = phone_png_points(small)
    assert width <= style.PHONE_PX and points < style.MIN_TEXT_PT
    plt.close("all")


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_figure_function_refuses_an_unknown_layout(name):
    with pytest.raises(ValueError, match="desk"):
        FIGURES[name]("tablet")
    plt.close("all")


def test_show_figure_shows_one_output_with_the_phone_drawing_in_its_metadata(monkeypatch):
    """One display output: the desk PNG as its image (what Jupyter and the PDF show), the phone PNG
    under style.PHONE_METADATA (what booktools.picture serves to a phone); both figures closed."""
    import base64
    import io

    import IPython.display
    from PIL import Image

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: shown.append((a, kw)))
    before = set(plt.get_fignums())
    style.show_figure(convergence.plot_loss_curve, [3.0, 2.5, 2.2, 2.0], 1.5, batch_size=32)
    assert set(plt.get_fignums()) == before, "show_figure left a figure open: the inline backend shows it again"
    (args, kwargs), = shown
    data, metadata = args[0], kwargs["metadata"]
    assert kwargs["raw"] and data["text/plain"].startswith("<Figure size")
    sizes = {}
    for layout, b64, density in (("desk", data["image/png"], 1),
                                 ("phone", metadata[style.PHONE_METADATA]["image/png"], style.PHONE_DENSITY)):
        with Image.open(io.BytesIO(base64.b64decode(b64))) as image:
            sizes[layout] = image.width / density  # CSS pixels
            # pHYs: the page reads the density and the text size from it; the phone's is 2× (220 dpi)
            assert image.info["dpi"][0] == pytest.approx(style.DPI * density, abs=0.02), layout
    assert sizes["phone"] <= style.PHONE_PX < sizes["desk"]


@pytest.mark.parametrize("name", ["MemoryExplorer", "NoiseExplorer", "TradeoffExplorer"])
def test_explorer_figures_are_legible_and_as_wide_as_the_column(name):
    explorer = quiet(explorers()[name])
    assert explorer.figure.get_figwidth() * explorer.figure.dpi <= style.COLUMN_PX
    points = min_text_points(explorer.figure)
    assert points >= style.MIN_TEXT_PT, f"{name}: smallest text {points:.1f} pt on the page"


def test_the_rule_fails_small_text_and_figures_wider_than_the_column():
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.set_xlabel("批大小")
    assert min_text_points(fig) >= style.MIN_TEXT_PT
    ax.set_title("4 pt 的标题", fontsize=4)
    assert min_text_points(fig) == pytest.approx(4 * style.DPI / 96)  # shown unscaled: 110/96 of it
    assert min_text_points(fig) < style.MIN_TEXT_PT
    wide, ax = plt.subplots(figsize=(14, 3))  # 1540 px in a 760 px column: halved
    ax.set_xlabel("批大小", fontsize=10)
    assert min_text_points(wide) < style.MIN_TEXT_PT
    assert displayed_scale(wide) == pytest.approx(760 / 96 / 14)
    assert displayed_scale(wide, column_px=PHONE_PX) == pytest.approx(358 / 96 / 14)
    with pytest.raises(ValueError, match="no text"):
        min_text_points(plt.figure())
    plt.close("all")


def _smallest_drawn(fig) -> float:
    smallest = min(size for _, size in drawn_text_sizes(fig))
    plt.close(fig)  # measured: dozens of open figures would only hold memory
    return smallest


def test_no_figure_of_the_book_draws_text_below_the_smallest_font():
    """SMALLEST_FONT_PT bounds every figure the pages show, desk and phone drawings: what the browser
    test scales holds."""
    drawn = {f"{name} ({layout})": lambda build=build, layout=layout: build(layout)
             for name, build in FIGURES.items() for layout in style.LAYOUTS}
    for name, build in explorers().items():
        if name != "BatchExplorer":  # draws no figure
            drawn[name] = lambda build=build: quiet(build).figure
    fig, ax = plt.subplots()  # a chapter's plain pyplot figure (4.1's loss curve), the rcParams alone
    ax.plot([1, 2], [2, 1], label="训练损失")
    ax.set(xlabel="更新步数", ylabel="交叉熵", title="训练损失")
    ax.legend()
    drawn["pyplot with style.setup()"] = lambda: fig
    smallest = {name: _smallest_drawn(build()) for name, build in drawn.items()}
    plt.close("all")
    low = {name: size for name, size in smallest.items() if size < SMALLEST_FONT_PT}
    assert not low, f"text below SMALLEST_FONT_PT = {SMALLEST_FONT_PT} pt: {low}"
    assert min(smallest.values()) == pytest.approx(SMALLEST_FONT_PT), "SMALLEST_FONT_PT is no longer the floor"


def test_chapters_set_no_font_size_of_their_own():
    """A chapter's figure text comes from batchlab.ui or the book's rcParams, which the test above
    bounds: no notebook sets a font size itself."""
    import re

    setting = re.compile(r"fontsize|font_?size|labelsize|set_size\(|\bsize\s*=\s*\d|rcParams\[.font")
    found = [(path.stem, line.strip()) for path in sorted((ROOT / "book").glob("*.ipynb"))
             for cell in json.loads(path.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if setting.search(line)]
    assert not found, found


def test_hidden_text_does_not_count():
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.set_xlabel("批大小")
    ax.text(0.5, 0.5, "hidden", fontsize=3, visible=False)
    assert all(text != "hidden" for text, _ in drawn_text_sizes(fig))
    assert min_text_points(fig) >= style.MIN_TEXT_PT
    plt.close(fig)


def test_inline_figures_with_the_book_defaults_are_legible():
    """What a chapter draws inline with plain pyplot calls (4.1's loss curve): the rcParams of
    style.setup() alone keep it legible, at the default size and at the chapter's own."""
    for size in (None, (6.5, 3)):
        fig, ax = plt.subplots(figsize=size)
        ax.plot([1, 2, 3], [3.0, 2.0, 1.5], label="训练损失（B = 32）")
        ax.axhline(1.4, color="k", ls="--", label="熵率：损失下限")
        ax.set(xlabel="更新步数", ylabel="交叉熵（nats/token）", title="训练损失")
        ax.legend()
        assert min_text_points(fig, tight=True) >= style.MIN_TEXT_PT
        assert fig.get_figwidth() * fig.dpi <= style.COLUMN_PX
        plt.close(fig)


# ── explorers in the static book ─────────────────────────────────────────────────────────────────
@pytest.mark.parametrize("name", ["BatchExplorer", "MemoryExplorer", "NoiseExplorer", "TradeoffExplorer"])
def test_each_explorer_first_says_how_to_make_it_move(name):
    import ipywidgets as widgets

    first = quiet(explorers()[name]).children[0]
    assert isinstance(first, widgets.HTML)
    for needed in ("运行中的 Python 内核", "Binder", "Colab", "pip install -e ."):
        assert needed in first.value, needed


def _text_px(text: str) -> float:
    """Rough width in CSS pixels at the widgets' 13 px font: a CJK character is square, Latin ~0.6 em."""
    return sum(13.0 if ord(ch) >= 0x2E80 else 7.8 for ch in text)


def _px(width: str) -> float:
    assert width.endswith("px"), width
    return float(width[:-2])


@pytest.mark.parametrize("name", ["BatchExplorer", "MemoryExplorer", "NoiseExplorer", "TradeoffExplorer"])
def test_no_control_cuts_off_its_label_or_value(name):
    """A frozen control cannot be scrolled: its description must fit its description width and a
    dropdown's longest option the box (less ~36 px for the arrow and padding)."""
    import ipywidgets as widgets

    explorer = quiet(explorers()[name])
    for key, control in explorer.controls.items():
        described = control.style.description_width
        if described:
            assert _text_px(control.description) <= _px(described), (key, control.description)
        if isinstance(control, widgets.Dropdown) and control.layout.width:
            room = _px(control.layout.width) - _px(described or "0px") - 36
            longest = max(control._options_labels, key=_text_px)
            assert _text_px(longest) <= room, (key, longest, room)


@pytest.mark.parametrize("name", ["BatchExplorer", "MemoryExplorer", "NoiseExplorer", "TradeoffExplorer"])
def test_each_row_of_controls_fits_the_column(name):
    import ipywidgets as widgets

    explorer = quiet(explorers()[name])
    for row in explorer.children:
        widths = [child.layout.width for child in row.children] if isinstance(row, widgets.HBox) else [row.layout.width]
        assert sum(_px(w) for w in widths if w) <= style.COLUMN_PX, [getattr(c, "description", c) for c in
                                                                     getattr(row, "children", [row])]


def test_the_rule_on_controls_can_fail():
    """The estimate flags the precision dropdown as it was (460 px with a 150 px description)."""
    from batchlab.formulas.precision import PRECISIONS

    assert _text_px(max(PRECISIONS.values(), key=_text_px)) > 460 - 150 - 36


def _called(node: ast.AST) -> str | None:
    """The name a call calls, bare or through the package (``NoiseExplorer(…)`` and ``bl.NoiseExplorer(…)``)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _explorer_calls() -> list[tuple[str, str, str]]:
    """(chapter, explorer class, its call's arguments as source) for each cell that ends in an explorer
    (``ExplorerWidget(MemoryExplorer(...))``: the declaration's call inside)."""
    calls = []
    for path in sorted((ROOT / "book").glob("4.*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            try:
                body = ast.parse(source).body
            except SyntaxError:
                continue
            last = body[-1] if body else None
            if isinstance(last, ast.Expr) and _called(last.value) == "ExplorerWidget":
                last = ast.Expr(last.value.args[0]) if last.value.args else None
            if isinstance(last, ast.Expr) and (_called(last.value) or "").endswith("Explorer"):
                call = last.value
                args = [ast.unparse(a) for a in call.args] + sorted(ast.unparse(k) for k in call.keywords)
                calls.append((path.stem, _called(call), ", ".join(args)))
    return calls


def test_no_two_pages_show_the_same_explorer_state():
    calls = _explorer_calls()
    assert {name for _, name, _ in calls} >= {"MemoryExplorer", "NoiseExplorer", "TradeoffExplorer"}
    seen: dict[tuple[str, str], str] = {}
    for chapter, name, args in calls:
        assert (name, args) not in seen, f"{chapter} shows {name}({args}) as {seen[(name, args)]} does"
        seen[(name, args)] = chapter


def test_the_two_tradeoff_pages_start_from_different_jobs():
    from batchlab.lecture.case import CASE_STUDY_TUNED
    from batchlab.page.tradeoff import TradeoffExplorer
    from batchlab.ui.explorer_widget import ExplorerWidget

    values = [{k: c.value for k, c in quiet(lambda: ExplorerWidget(TradeoffExplorer(CURVE, job=job))).controls.items()}
              for job in (CASE_STUDY.job, CASE_STUDY_TUNED.job)]
    assert values[0] != values[1]
