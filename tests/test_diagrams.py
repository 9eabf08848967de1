"""The batch-anatomy diagram of 4.1: its numbers come from the plan it is given, its words are the
glossary's, and its smallest text stays legible at the book's column width."""
from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from batchlab.formulas.batching import plan_batch  # noqa: E402
from batchlab.lecture.case import CASE_STUDY  # noqa: E402
from batchlab.ui import style  # noqa: E402
from batchlab.ui.diagrams import draw_batch_anatomy, shown_indices  # noqa: E402

COLUMN_PX = 760
"""The book's text column, in CSS pixels; a wider figure is shrunk to fit it."""
CSS_DPI = 96
MIN_DISPLAYED_PT = 8
TERMS = ("全局批大小", "数据并行度", "微批次数", "微批次大小", "流水线阶段数", "逻辑批次", "微批次 0", "阶段 0",
         "副本 0", "全归约")

PLANS = {
    "case": CASE_STUDY.job,  # B_global 64, b 2, d 2, m 16, p 4
    "other": plan_batch(micro_batch_size=3, pipeline_stages=6, data_parallel=5, num_microbatches=7),
}


def _texts(fig) -> str:
    return "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)


@pytest.fixture(autouse=True)
def _style():
    style.setup()
    yield
    plt.close("all")


@pytest.mark.parametrize("name", PLANS)
def test_the_diagram_shows_the_plans_numbers_and_the_books_terms(name):
    given = PLANS[name]
    plan = getattr(given, "plan", given)
    fig = draw_batch_anatomy(given)
    text = _texts(fig)
    B, b, d, m, p = (plan.global_batch, plan.micro_batch_size, plan.data_parallel, plan.num_microbatches,
                     plan.pipeline_stages)
    assert f"$B_\\mathrm{{global}}$ = {B}" in text  # batchlab.page.symbols.mathtext("B_global")
    assert f"$d$ = {d}" in text and f"$m$ = {m}" in text and f"$b$ = {b}" in text and f"$p$ = {p}" in text
    assert f"$b \\times m$ = {b * m}" in text            # the logical batch of one replica
    assert f"= {b} × {d} × {m} = {B}" in text              # the formula, with the plan's numbers
    assert f"$d \\times p$ = {d * p} 张卡" in text
    assert f"微批次 {m - 1}" in text and f"阶段 {p - 1}" in text  # the last micro-batch and stage are drawn
    for term in TERMS:
        assert term in text, term


def test_a_job_and_its_plan_draw_the_same_diagram():
    job = CASE_STUDY.job
    assert _texts(draw_batch_anatomy(job)) == _texts(draw_batch_anatomy(job.plan))
    with pytest.raises(TypeError, match="BatchPlan 或 Job"):
        draw_batch_anatomy(CASE_STUDY)


def test_large_counts_are_drawn_with_an_ellipsis():
    assert shown_indices(4) == [0, 1, 2, 3]
    assert shown_indices(16) == [0, 1, None, 15]
    assert shown_indices(8, most=3) == [0, None, 7]
    plan = plan_batch(micro_batch_size=1, pipeline_stages=32, data_parallel=64, num_microbatches=512)
    text = _texts(draw_batch_anatomy(plan))
    assert "微批次 511" in text and "微批次 2" not in text
    assert "阶段 31" in text and "阶段 2" not in text
    assert "副本 63" in text and "副本 1\n" not in text


@pytest.mark.parametrize("name", PLANS)
def test_the_smallest_text_is_legible_at_the_column_width(name):
    """Displayed size of the smallest text, in CSS points, for a figure drawn at 96 dpi (one figure inch
    per CSS inch) and at the book's own dpi (a wider PNG, which the page then shrinks to the column)."""
    fig = draw_batch_anatomy(PLANS[name])
    width_in = fig.get_size_inches()[0]
    smallest = min(t.get_fontsize() for ax in fig.axes for t in ax.texts)
    for dpi in (CSS_DPI, fig.dpi):
        scale = min(1.0, COLUMN_PX / (width_in * dpi))     # the page shrinks a wider image to the column
        displayed_pt = smallest * dpi / CSS_DPI * scale     # image pixels shown as CSS pixels
        assert displayed_pt >= MIN_DISPLAYED_PT, (smallest, dpi, displayed_pt)


@pytest.mark.parametrize("name", PLANS)
def test_the_diagram_draws_without_missing_glyphs(name):
    fig = draw_batch_anatomy(PLANS[name])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph … missing from font" is a UserWarning
        fig.canvas.draw()


def test_the_diagram_draws_into_a_given_axes():
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    assert draw_batch_anatomy(CASE_STUDY.job, ax=right) is fig
    assert not left.texts and right.texts
