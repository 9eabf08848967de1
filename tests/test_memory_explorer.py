import warnings
from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import same_color  # noqa: E402

from batchlab.formulas.job import DEVICE_MEMORY_GIB, GIB, RECOMPUTE_MODES, Job  # noqa: E402
from batchlab.formulas.memory import stage_memory  # noqa: E402
from batchlab.page.colours import OVERFLOW_COLOUR  # noqa: E402
from batchlab.formulas.pipeline_schedules import SCHEDULES  # noqa: E402
from batchlab.formulas.precision import PRECISIONS, default_precision  # noqa: E402
from batchlab.formulas.presets import get_config  # noqa: E402
from batchlab.lecture.case import CASE_STUDY  # noqa: E402
from batchlab.ui import memory as memory_ui, style  # noqa: E402
from batchlab.page.memory import MemoryExplorer  # noqa: E402
from batchlab.ui.explorer_widget import ExplorerWidget  # noqa: E402
from batchlab.ui.memory import plot_stage_memory  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def book_style():
    # The book's fonts (as every chapter sets them), undone after this module.
    with matplotlib.rc_context():
        style.setup()
        yield


def widget(*args, **kwargs) -> ExplorerWidget:
    """The memory explorer as the chapter shows it."""
    return ExplorerWidget(MemoryExplorer(*args, **kwargs))


def case_report(**changes):
    """The case study's report computed directly, without the widget."""
    c = dict(model=CASE_STUDY.job.model.name, micro_batch_size=CASE_STUDY.job.micro_batch_size, seq_len=CASE_STUDY.job.seq_len,
             global_batch=CASE_STUDY.job.global_batch, pipeline_stages=CASE_STUDY.job.pipeline_stages,
             data_parallel=CASE_STUDY.job.data_parallel, schedule="1f1b", recompute="none", precision=None,
             dropout=None, device_memory_gib=DEVICE_MEMORY_GIB)
    c.update(changes)
    c["model"] = get_config(c["model"])  # precision None: the model's default
    return stage_memory(Job(**c))


def red_texts(ax):
    return [t.get_text() for t in ax.texts if same_color(t.get_color(), OVERFLOW_COLOUR)]


def test_default_is_the_case_study():
    explorer = widget()
    values = {name: c.value for name, c in explorer.controls.items()}
    assert values == dict(model="gpt2-xl", micro_batch_size=2, seq_len=1024, schedule="1f1b", recompute="none",
                          precision="bf16-mixed", dropout=0.1, pipeline_stages=4, global_batch=64, data_parallel=2,
                          device_memory_gib=DEVICE_MEMORY_GIB, virtual_stages=1, tensor_parallel=1,
                          sequence_parallel=False)
    assert explorer.result.report == case_report()
    assert explorer.result.report.job.plan.num_microbatches == 16
    assert explorer.png.startswith(b"\x89PNG")
    summary = explorer.summary.value
    assert "最满的是阶段 0" in summary and "m = <b>16</b>" in summary and "4、3、2、1" in summary
    assert f"{explorer.result.report.peak_memory_fraction:.1%}" in summary and "放得下" in summary


# Every control, moved to a value that changes both the picture and the report.
MOVES = [
    ("model", "gpt2-large"), ("micro_batch_size", 4), ("seq_len", 512), ("schedule", "gpipe"),
    ("recompute", "selective"), ("recompute", "full"), ("precision", "fp32"), ("dropout", 0.0), ("pipeline_stages", 8),
    # 16 = 2 × 2 × 4: m = 4 = p, the fewest micro-batches a 1F1B job takes (m = 2 is refused, see below)
    ("global_batch", 16), ("data_parallel", 4), ("device_memory_gib", 16.0), ("tensor_parallel", 5),
]
# Controls whose move takes another with it (the note says so): the schedule that needs v ≥ 2 moves v, sequence
# parallelism moves t off 1; the virtual stages move once the schedule holds several chunks.
FOLLOWING = [
    ("schedule", "interleaved-1f1b", {}, dict(schedule="interleaved-1f1b", virtual_stages=2), "虚拟阶段数 (v) 1 → 2"),
    ("sequence_parallel", True, {}, dict(sequence_parallel=True, tensor_parallel=5), "张量并行度 (TP) 1 → 5"),
    ("virtual_stages", 3, {}, dict(schedule="interleaved-1f1b", virtual_stages=3), "流水线调度 1F1B → 交错式 1F1B"),
    ("virtual_stages", 4, {"schedule": "interleaved-1f1b"}, dict(schedule="interleaved-1f1b", virtual_stages=4), None),
    ("virtual_stages", 2, {"schedule": "zero-bubble"}, dict(schedule="zero-bubble", virtual_stages=2), None),
]


def test_the_moves_cover_every_control_and_option():
    assert {name for name, _ in MOVES} | {name for name, *_ in FOLLOWING} == set(widget().controls)
    explorer = widget()
    assert [v for _, v in explorer.controls["schedule"].options] == list(SCHEDULES)
    assert [v for _, v in explorer.controls["recompute"].options] == list(RECOMPUTE_MODES)
    assert [v for _, v in explorer.controls["precision"].options] == list(PRECISIONS)
    # Labels come from the math modules' tables, not retyped.
    assert [label for label, _ in explorer.controls["recompute"].options] == list(RECOMPUTE_MODES.values())


@pytest.mark.parametrize("control, value", MOVES)
def test_every_control_changes_the_figure_and_the_report(control, value):
    explorer = widget()
    png, report = explorer.png, explorer.result.report
    explorer.controls[control].value = value
    assert explorer.error is None, explorer.summary.value
    assert explorer.png != png
    assert explorer.result.report != report
    expected = {"model": dict(model=value, precision="bf16-mixed")}.get(control, {control: value})
    assert explorer.result.report == case_report(**expected)


@pytest.mark.parametrize("control, value, first, expected, said", FOLLOWING)
def test_a_control_that_needs_another_moves_it_and_says_so(control, value, first, expected, said):
    explorer = widget()
    for name, before in first.items():
        explorer.controls[name].value = before
    png, report = explorer.png, explorer.result.report
    explorer.controls[control].value = value
    assert explorer.error is None, explorer.summary.value
    assert explorer.png != png and explorer.result.report != report
    assert explorer.result.report == case_report(**expected)
    if said:  # the other control moved: the note names it, old → new
        note = explorer.summary.value.split("</div>")[0]
        assert 'class="bl-note"' in note and said in note, note


def test_the_parallel_controls_offer_what_the_job_takes():
    """t divides gpt2-xl's 25 heads; v cuts 48 layers over 4 stages into p · v chunks (interleaved, v ≥ 2)
    or is 1 and 2 (zero bubble); the summary names chunks, not micro-batches, when a device holds several."""
    explorer = widget()
    assert explorer.controls["tensor_parallel"].options == (1, 5, 25)
    # every count some schedule holds: 1 (GPipe, 1F1B, ZB-H1), 2 (ZB-V), and 2, 3, 4, 6, 12 interleaved
    assert explorer.controls["virtual_stages"].options == (1, 2, 3, 4, 6, 12)
    explorer.controls["schedule"].value = "interleaved-1f1b"
    assert explorer.controls["virtual_stages"].value == 2
    assert "交错式 1F1B（v = 2）下各卡同时保存的模型段（每段 6 层）激活数" in explorer.summary.value
    explorer.controls["schedule"].value = "zero-bubble"
    assert explorer.controls["virtual_stages"].value == 2
    explorer.controls["sequence_parallel"].value = True
    assert explorer.controls["tensor_parallel"].options == (5, 25)  # SP needs t > 1: 1 is not offered
    title = explorer.result.title
    assert "张量并行 t = 5 + 序列并行" in title and "零气泡（ZB-V）" in title
    assert explorer.result.report == case_report(schedule="zero-bubble", virtual_stages=2, tensor_parallel=5,
                                                 sequence_parallel=True)
    explorer.controls["model"].value = "gpt2"  # 12 heads: t = 5 no longer divides them; t follows
    assert explorer.error is None and explorer.controls["tensor_parallel"].value in (4, 6)


def test_a_new_model_resets_precision_and_sequence_lengths():
    explorer = widget()
    explorer.controls["precision"].value = "fp32"
    explorer.controls["model"].value = "gpt2-large"
    assert explorer.controls["precision"].value == "bf16-mixed" == default_precision(get_config("gpt2-large"))
    explorer.controls["model"].value = "tiny"
    assert explorer.controls["precision"].value == "fp32" == default_precision(get_config("tiny"))
    assert explorer.controls["dropout"].value == 0.0 == get_config("tiny").dropout
    assert explorer.controls["seq_len"].options == (1, 2, 4, 8, 16, 32, 64)
    assert explorer.controls["seq_len"].value == 64  # the longest the tiny model takes
    # tiny has 2 layers, the case study 4 stages: the stages follow, and the figure with them
    assert explorer.controls["pipeline_stages"].options == (1, 2) and explorer.controls["pipeline_stages"].value == 2
    assert explorer.result.report == case_report(model="tiny", seq_len=64, pipeline_stages=2, precision="fp32")
    explorer.controls["model"].value = "gpt2"
    assert explorer.controls["seq_len"].options[-1] == 1024 and explorer.controls["seq_len"].value == 1024
    assert explorer.controls["precision"].value == "bf16-mixed"


def test_a_change_of_model_says_what_else_changed_and_returning_restores_the_chapters_values():
    """Issue 29: tiny silently set 64 / fp32 / 0, and gpt2-xl kept 64 (7.08 GiB instead of 23.43)."""
    explorer = widget()
    explorer.controls["model"].value = "tiny"
    note = explorer.summary.value.split("</div>")[0]
    assert 'class="bl-note"' in note and "模型改为 tiny" in note
    for said in ("序列长度 1024 → 64", "精度 16 位混合精度", "→ fp32 全精度", "dropout 概率 0.1 → 0",
                 "流水线阶段数 (PP) 4 → 2"):
        assert said in note, note
    explorer.controls["model"].value = "gpt2-xl"
    note = explorer.summary.value.split("</div>")[0]
    assert "序列长度 64 → 1024" in note and "回到本章的设置" in note
    assert explorer.result.report == case_report()
    assert f"{max(case_report().peak_bytes_per_stage) / GIB:.2f} GiB" in explorer.summary.value  # 23.43
    explorer.controls["recompute"].value = "full"  # nothing else moves: no note
    assert "bl-note" not in explorer.summary.value


def _valid(job, **change) -> bool:
    try:
        replace(job, **change)
    except ValueError:
        return False
    return True


STATES = [{}, {"global_batch": 48}, {"global_batch": 3}, {"schedule": "gpipe"}, {"model": "tiny"},
          {"pipeline_stages": 16}, {"global_batch": 1_048_576}, {"data_parallel": 8}]


@pytest.mark.parametrize("state", STATES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "case")
def test_the_count_sliders_offer_exactly_the_values_that_make_a_valid_job(state):
    """Issue 29: only 4 of the micro-batch slider's 64 positions (1, 2, 4, 8) made a job; now each count
    offers exactly those values (checked here against the job itself over 1 … 64 and the layers), and
    every position of every slider answers a panel (the declaration's, which the widget draws)."""
    explorer = widget()
    for name, value in state.items():
        explorer.controls[name].value = value
    assert explorer.error is None, explorer.error
    job = explorer.result.report.job
    for name, tried in (("micro_batch_size", range(1, 65)), ("data_parallel", range(1, 65)),
                        ("pipeline_stages", range(1, job.model.n_layer + 1))):
        offered = set(explorer.controls[name].options)
        assert {v for v in tried if _valid(job, **{name: v})} == {v for v in offered if v <= max(tried)}, name
        assert all(_valid(job, **{name: v}) for v in offered), name
    declared, values = explorer.explorer, explorer.values()
    for name in ("micro_batch_size", "data_parallel", "pipeline_stages", "seq_len"):
        for value in explorer.controls[name].options:
            assert declared.compute({**values, name: value}).error is None, (name, value)


def test_the_case_offers_the_micro_batch_sizes_a_1f1b_job_takes():
    """The case (G = 64, DP 2, 4 stages, 1F1B) takes b = 1, 2, 4, 8: m = 32 / b ≥ 4 stages."""
    assert widget().controls["micro_batch_size"].options == (1, 2, 4, 8)


def test_a_new_global_batch_moves_what_it_must_and_says_so():
    explorer = widget()
    explorer.controls["global_batch"].value = 63  # odd: DP 2 no longer divides it
    assert explorer.error is None and explorer.result.report.job.global_batch == 63
    assert explorer.controls["data_parallel"].value == 1 and explorer.controls["micro_batch_size"].value in (1, 3)
    note = explorer.summary.value.split("</div>")[0]
    assert "全局批大小改为 63" in note and "数据并行度 (DP) 2 → 1" in note and "让配置仍然有效" in note
    assert set(explorer.controls["micro_batch_size"].options) == {b for b in (1, 3, 7, 9, 21, 63) if 63 // b >= 4}
    explorer.controls["global_batch"].value = 64
    assert explorer.error is None and explorer.controls["micro_batch_size"].options == (1, 2, 4, 8, 16)


def test_more_stages_than_layers_are_not_offered():
    explorer = widget(replace(CASE_STUDY.job, model=get_config("gpt2")))  # 12 layers
    assert max(explorer.controls["pipeline_stages"].options) == 12
    explorer.controls["schedule"].value = "gpipe"
    assert explorer.controls["pipeline_stages"].options == tuple(range(1, 13))
    with pytest.raises(ValueError, match="seq_len = 2048：必须在 1 到 gpt2-xl 的 n_positions = 1024 之间"):
        widget(replace(CASE_STUDY.job, seq_len=2048))


def test_overflow_is_marked_in_red():
    fits = case_report()
    fig = plot_stage_memory(fits)
    ax = fig.axes[0]
    assert fits.fits and red_texts(ax) == []
    assert len(ax.texts) == 4 and ax.texts[0].get_text() == f"{fits.stages[0].peak_bytes / fits.device_memory_bytes:.1%}"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "设备显存 64 GiB" and {"参数", "梯度", "优化器状态", "激活值"} <= set(labels)
    assert "重计算工作区" not in labels and "超出显存的部分" not in labels
    plt.close(fig)

    tight = case_report(device_memory_gib=16.0)  # stages 0 and 1 (23.4, 18.0 GiB) do not fit
    fig = plot_stage_memory(tight)
    ax = fig.axes[0]
    over = [i for i, st in enumerate(tight.stages) if st.peak_bytes > tight.device_memory_bytes]
    assert over == [0, 1]
    assert red_texts(ax) == [f"{tight.stages[i].peak_bytes / tight.device_memory_bytes:.1%}" for i in over]
    hatched = [p for p in ax.patches if p.get_hatch() and same_color(p.get_edgecolor(), OVERFLOW_COLOUR)]
    assert len(hatched) == 2
    assert hatched[0].get_y() == pytest.approx(16.0) and hatched[0].get_height() == pytest.approx(
        (tight.stages[0].peak_bytes - tight.device_memory_bytes) / GIB)
    assert "超出显存的部分" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)


def test_bars_stack_to_the_peak_and_recompute_adds_its_working_set():
    report = case_report(recompute="full")
    fig = plot_stage_memory(report)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "重计算工作区" in labels
    tops = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0.0), patch.get_y() + patch.get_height())
    assert [tops[i] for i in range(4)] == pytest.approx([b / GIB for b in report.peak_bytes_per_stage])
    plt.close(fig)


def test_measured_markers_are_drawn():
    report = case_report()
    measured = [report.stages[0].peak_bytes * 1.01, None, report.stages[2].peak_bytes, None]
    fig = plot_stage_memory(report, measured=measured)
    ax = fig.axes[0]
    (markers,) = [line for line in ax.lines if line.get_label() == "实测峰值"]
    assert list(markers.get_xdata()) == [0, 2]
    assert list(markers.get_ydata()) == pytest.approx([measured[0] / GIB, measured[2] / GIB])
    assert same_color(markers.get_color(), "black")
    plt.close(fig)
    fig = plot_stage_memory(report)
    assert not [line for line in fig.axes[0].lines if line.get_label() == "实测峰值"]
    plt.close(fig)
    with pytest.raises(ValueError, match="measured has 2 values but the report has 4 stages"):
        plot_stage_memory(report, measured=[1, 2])


def test_tiny_models_are_drawn_in_mib():
    report = case_report(model="tiny", seq_len=64, pipeline_stages=2, precision="fp32", device_memory_gib=0.5)
    fig = plot_stage_memory(report)
    assert fig.axes[0].get_ylabel() == "峰值显存 (MiB)"
    assert "设备显存 512 MiB" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)


def test_explorer_draws_measured_points_when_the_state_matches():
    key = ("tiny", 4, 32, "none")
    job = replace(CASE_STUDY.job, model=get_config("tiny"), micro_batch_size=4, seq_len=32, pipeline_stages=2,
                  global_batch=16, device_memory_gib=0.01, precision=None)
    explorer = widget(job, measured={key: [1_000_000, 900_000]})

    def marker_lines():
        return [line for line in explorer.figure.axes[0].lines if line.get_label() == "实测峰值"]

    assert len(marker_lines()) == 1
    explorer.controls["micro_batch_size"].value = 2  # no measurement for this state
    assert marker_lines() == []
    explorer.controls["micro_batch_size"].value = 4
    assert len(marker_lines()) == 1
    explorer.controls["pipeline_stages"].value = 1  # one value per stage needed: two given, so none drawn
    assert marker_lines() == [] and explorer.result is not None


def test_explorer_leaks_no_figures_and_draws_every_glyph():
    open_before = plt.get_fignums()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph … missing from font" is a UserWarning
        explorer = widget()
        explorer.controls["recompute"].value = "full"
        explorer.controls["device_memory_gib"].value = 8.0
        explorer.controls["pipeline_stages"].value = 16
    assert plt.get_fignums() == open_before
    assert len(explorer.figure.axes) == 1


def test_every_move_redraws():
    """Each control moved, then moved back: a new report, summary and picture each time (how long a redraw
    takes is benchmarks/bench.py's widget budget, not a pass criterion here)."""
    explorer = widget()
    moves = [("micro_batch_size", 4), ("seq_len", 512), ("schedule", "gpipe"), ("recompute", "full"),
             ("precision", "fp32"), ("dropout", 0.0), ("pipeline_stages", 8), ("global_batch", 128), ("data_parallel", 1),
             ("device_memory_gib", 32.0), ("model", "gpt2-large")]
    redrawn = 0
    for control, value in moves + [(c, explorer.controls[c].value) for c, _ in moves]:
        if explorer.controls[control].value == value:  # already there (the model's change reset it): no event
            continue
        before = (explorer.result.report, explorer.summary.value, explorer.png)
        explorer.controls[control].value = value
        assert explorer.error is None, (control, value, explorer.error)
        after = (explorer.result.report, explorer.summary.value, explorer.png)
        assert all(a != b for a, b in zip(after, before)), (control, value)
        redrawn += 1
    assert redrawn >= 19  # returning to the chapter's model restores its settings: one move back is no event


def test_the_controls_take_their_bounds_from_the_job_record():
    from batchlab.formulas.job import LIMITS

    c = widget().controls
    for name in ("global_batch", "device_memory_gib"):
        assert (c[name].min, c[name].max) == pytest.approx(LIMITS[name] if name == "device_memory_gib"
                                                           else (1, LIMITS[name][1]))
    c["device_memory_gib"].value = 0.0  # a bounded box clamps to the record's minimum: still an answer
    assert c["device_memory_gib"].value == LIMITS["device_memory_gib"][0]


def test_count_candidates_hold_every_valid_tensor_and_chunk_count():
    """The explorers try only divisors for v and t (trying 1 … 64 made each change build ~200 jobs and pause
    for a full garbage collection past the 300 ms widget budget): no valid count may be left out of them."""
    from batchlab.formulas.partition import check_virtual_stages
    from batchlab.formulas.presets import PRESETS, check_tensor_parallel
    from batchlab.page.valid import candidates

    def accepted(check, *args) -> bool:
        try:
            check(*args)
        except ValueError:
            return False
        return True

    for name, model in PRESETS.items():
        tried = candidates("tensor_parallel", {"model": name}, model.n_layer)
        assert [t for t in range(1, 1025) if accepted(check_tensor_parallel, model, t)] == tried
        for p in range(1, model.n_layer + 1):
            chunks = candidates("virtual_stages", {}, model.n_layer)
            assert {v for v in range(1, 65) if accepted(check_virtual_stages, model, p, v)} <= set(chunks)
    assert candidates("tensor_parallel", {"model": "no-such-model"}, 4) == list(range(1, 65))  # unknown: all tried
