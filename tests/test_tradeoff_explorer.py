"""The bubble-versus-matmul explorer of 4.4: every control changes what the reader sees."""
import contextlib
import io
from dataclasses import replace

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from batchlab.formulas.roofline import RateCurve  # noqa: E402
from batchlab.formulas.throughput import model_step  # noqa: E402
from batchlab.formulas.tune import tune  # noqa: E402
from batchlab.lecture.case import CASE_STUDY  # noqa: E402
from batchlab.ui import style  # noqa: E402
from batchlab.page.tradeoff import TradeoffExplorer  # noqa: E402
from batchlab.ui.explorer_widget import ExplorerWidget  # noqa: E402

CURVE = RateCurve((1024, 2048, 4096, 8192), (1e12, 3e12, 4e12, 4.2e12), "测试曲线")


@pytest.fixture(scope="module", autouse=True)
def chinese_font():
    style.setup()


def explorer(**kwargs):
    with contextlib.redirect_stdout(io.StringIO()):  # outside a kernel the Output widget prints
        return ExplorerWidget(TradeoffExplorer(CURVE, **kwargs))


def test_default_is_the_case_study_and_its_numbers_come_from_the_model():
    e = explorer()
    expect = model_step(CASE_STUDY.job, CURVE)
    assert (CASE_STUDY.job.global_batch, CASE_STUDY.job.micro_batch_size, CASE_STUDY.job.pipeline_stages,
            CASE_STUDY.job.data_parallel) == (64, 2, 4, 2)
    assert e.result.step == expect
    assert "m = <b>16</b>" in e.summary.value and "15.8%" in e.summary.value and e.png


@pytest.mark.parametrize("control, value", [("global_batch", 128), ("micro_batch_size", 4),
                                            ("pipeline_stages", 8), ("data_parallel", 4), ("schedule", "gpipe")])
def test_every_control_changes_the_output(control, value):
    e = explorer()
    before_png, before_summary = e.png, e.summary.value
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls[control].value = value
    assert e.png != before_png
    if control != "schedule":  # GPipe and 1F1B take the same modelled time; the timeline differs
        assert e.summary.value != before_summary


def test_best_micro_batch_and_memory_limits_are_marked():
    e = explorer()
    assert "模型下最快且放得下的微批次大小：<b>4</b>" in e.summary.value  # the steep curve favours 4
    tight = explorer(job=replace(CASE_STUDY.job, device_memory_gib=16.0))
    # what the explorer shows is tune() of the job its controls describe
    result = tune(replace(tight.explorer.job, **{c: w.value for c, w in tight.controls.items()}), CURVE)
    fits = {c["micro_batch_size"]: c["fits"] for c in result["candidates"]}
    assert fits[1] and not fits[8]  # micro 1 fits in 16 GiB (15.1), micro 8 does not (1F1B keeps m ≥ p: micro ≤ 8)
    with contextlib.redirect_stdout(io.StringIO()):
        tight.controls["micro_batch_size"].value = 8
    assert "放不下" in tight.summary.value


def test_1f1b_with_fewer_micro_batches_than_stages_is_not_offered():
    """Issue 29: a micro-batch box took any size and refused most; the slider offers the sizes that make a job."""
    e = explorer()
    assert e.controls["micro_batch_size"].options == (1, 2, 4, 8)  # m = 32 / b ≥ 4 stages under 1F1B
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["schedule"].value = "gpipe"
    assert e.controls["micro_batch_size"].options == (1, 2, 4, 8, 16, 32)
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["micro_batch_size"].value = 32
        assert e.result is not None and e.result.step.num_microbatches == 1
        e.controls["schedule"].value = "1f1b"  # m = 1 < 4 stages: the micro-batch follows, and the note says so
    assert e.result is not None and e.controls["micro_batch_size"].value == 8
    assert "微批次大小 32 → 8" in e.summary.value and "让配置仍然有效" in e.summary.value


def test_a_global_batch_that_no_longer_divides_moves_the_counts():
    e = explorer()
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["global_batch"].value = 63
    assert e.result is not None and e.result.job.global_batch == 63 and e.controls["data_parallel"].value == 1
    assert "全局批大小改为 63" in e.summary.value and "数据并行度 (DP) 2 → 1" in e.summary.value


def test_the_summary_says_which_attention_its_memory_verdict_assumes():
    # the fits / does-not-fit verdict rests on activations; with stored s×s scores they are ~3x fused attention's
    stored = explorer().summary.value
    fused = explorer(job=replace(CASE_STUDY.job, attention="fused")).summary.value
    assert "激活值按显式注意力" in stored and "激活值按融合注意力" in fused


def test_the_schedule_control_offers_all_four_and_virtual_stages_follow():
    """Issue 30: interleaved 1F1B and zero bubble in the explorer; v offers what the job takes (48 layers over
    4 stages cut into p · v chunks) and follows the schedule, with a note."""
    from batchlab.formulas.pipeline_schedules import SCHEDULES, bubble_fraction

    e = explorer()
    assert [v for _, v in e.controls["schedule"].options] == list(SCHEDULES)
    assert e.controls["virtual_stages"].options == (1, 2, 3, 4, 6, 12)  # what some schedule holds
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["schedule"].value = "interleaved-1f1b"
    assert e.controls["virtual_stages"].value == 2
    assert "虚拟阶段数 (v) 1 → 2" in e.summary.value and "交错式 1F1B（v = 2）：m = <b>16</b>" in e.summary.value
    job = replace(CASE_STUDY.job, schedule="interleaved-1f1b", virtual_stages=2)
    assert e.result.step == model_step(job, CURVE)
    assert e.result.step.bubble_fraction == bubble_fraction(4, 16, "interleaved-1f1b", 2) < 3 / 19
    png = e.png
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["virtual_stages"].value = 4
    assert e.png != png and e.result.step == model_step(replace(job, virtual_stages=4), CURVE)
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["schedule"].value = "zero-bubble"  # v = 4 is no zero-bubble schedule: the nearest, 2 (ZB-V)
    assert e.controls["virtual_stages"].value == 2
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["schedule"].value = "1f1b"
    assert e.controls["virtual_stages"].value == 1 and e.result.step == model_step(CASE_STUDY.job, CURVE)
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["virtual_stages"].value = 6  # a count 1F1B cannot hold: the schedule follows, and says so
    assert e.controls["schedule"].value == "interleaved-1f1b" and "流水线调度 1F1B → 交错式 1F1B" in e.summary.value


def test_the_summary_says_when_another_schedule_is_faster_and_why():
    e = explorer()
    # the case under 1F1B: interleaving shrinks the bubble at the same m, so the tuner's search names it
    assert "换调度更快：" in e.summary.value and e.result.tuned["schedule_reason"] in e.summary.value
    best = e.result.tuned["best_schedule"]
    with contextlib.redirect_stdout(io.StringIO()):
        e.controls["schedule"].value = best["schedule"]
        e.controls["virtual_stages"].value = best["virtual_stages"]
        e.controls["micro_batch_size"].value = best["micro_batch_size"]
    assert "换调度更快" not in e.summary.value  # the reader's choice is the fastest: nothing to add
