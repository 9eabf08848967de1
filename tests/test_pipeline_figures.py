"""The timeline figure draws model chunks and weight gradients apart, and the four schedules side by side."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from batchlab.formulas.pipeline_schedules import Op, Timeline, bubble_fraction, pipeline_timeline  # noqa: E402
from batchlab.ui import pipeline  # noqa: E402


def _bars(fig):
    """(alpha, hatch) of every bar collection drawn on the figure's axes."""
    return {(c.get_alpha(), c.get_hatch() or "") for ax in fig.axes for c in ax.collections}


def test_chunks_are_hatched_and_weight_gradients_shaded_apart():
    fig = pipeline.plot_pipeline_timeline(pipeline_timeline("zero-bubble", 4, 4, virtual_stages=2))
    bars = _bars(fig)
    alphas = {pipeline.KIND_ALPHA[k] for k in "FBW"}
    assert {a for a, _ in bars} == alphas and len(alphas) == 3
    assert {h for _, h in bars} == {"", pipeline.CHUNK_HATCH[1]}
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["前向", "反向（输入梯度）", "权重梯度", "第 1 段模型",
                                                                 "第 2 段模型"]
    plt.close(fig)


def test_a_one_chunk_schedule_draws_no_hatch_and_no_key():
    # the check above can fail: 1F1B has one chunk and no W, so nothing is hatched and no key is drawn
    fig = pipeline.plot_pipeline_timeline(pipeline_timeline("1f1b", 4, 8))
    assert {h for _, h in _bars(fig)} == {""} and not fig.legends
    plt.close(fig)
    # a measured-looking timeline whose second chunk is labelled chunk 1 is hatched
    ops = (Op(0, 0, "F", 0, 1, chunk=0), Op(0, 0, "F", 1, 2, chunk=1), Op(0, 0, "B", 2, 4, chunk=1),
           Op(0, 0, "B", 4, 6, chunk=0))
    fig = pipeline.plot_pipeline_timeline(Timeline("interleaved-1f1b", 1, 1, ops, 2))
    assert pipeline.CHUNK_HATCH[1] in {h for _, h in _bars(fig)}
    plt.close(fig)


@pytest.mark.parametrize("layout", ["desk", "phone"])
def test_the_four_schedules_share_one_time_axis_and_say_their_bubble(layout):
    fig = pipeline.plot_schedule_comparison(4, 8, layout=layout)
    axes = fig.axes
    assert len(axes) == 4 and len({ax.get_xlim() for ax in axes}) == 1
    expected = [bubble_fraction(4, 8, s, v) for s, v in pipeline.COMPARED_SCHEDULES]
    assert [f"{b:.1%}" in ax.get_title().replace("\n", "") for ax, b in zip(axes, expected)] == [True] * 4
    assert expected == sorted(expected, reverse=True) and expected[1] > expected[2] > expected[3]
    plt.close(fig)
