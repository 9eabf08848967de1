"""The job record: validated once when it is made, each rule's wording in one place, handed whole to
the formulas — which check nothing again (counted while tune runs on the lecture's case)."""
from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from batchlab.formulas import checks, partition
from batchlab.formulas.job import Job
from batchlab.formulas.presets import get_config
from batchlab.formulas.roofline import DEVICE_PRESETS, roofline_curve
from batchlab.formulas.tune import tune
from batchlab.lecture.case import CASE_STUDY
from booktools import ROOT

CASE = CASE_STUDY.job
CASE_STUDY_TUNED_JOB = replace(CASE, micro_batch_size=4)
XL = get_config("gpt2-xl")
LOW = DEVICE_PRESETS["ascend-910b"].curve(XL, "low")
HIGH = DEVICE_PRESETS["ascend-910b"].curve(XL, "high")


@pytest.mark.parametrize("changes, message", [
    (dict(seq_len=2048), "seq_len = 2048：必须在 1 到 gpt2-xl 的 n_positions = 1024 之间"),
    (dict(seq_len=0), "seq_len = 0：必须是 ≥ 1 的整数"),
    (dict(global_batch=63), "global_batch = 63 不能被 micro_batch_size × data_parallel = 2 × 2 = 4 整除"),
    (dict(micro_batch_size=16), "1F1B 要求微批次数 ≥ 流水线阶段数 pipeline_stages = 4"),
    (dict(pipeline_stages=49), "pipeline_stages = 49 超过了 gpt2-xl 的层数 n_layer = 48"),
    (dict(schedule="zb"), "schedule = 'zb'：只能取"),
    (dict(recompute=True), "recompute = True：只能取 'none', 'selective', 'full' 之一"),
    (dict(precision="fp8"), "precision = 'fp8'：只能取"),
    (dict(optimizer="lion"), "optimizer = 'lion'：只能取"),
    (dict(zero1="yes"), "zero1 = 'yes'：只能取"),
    (dict(attention="flash"), "attention = 'flash'：只能取"),
    (dict(device_memory_gib=0), "device_memory_gib = 0：必须在 0.001 到 1,000,000 之间"),
    (dict(device_memory_gib=1e-10), "device_memory_gib = 1e-10：必须在 0.001 到 1,000,000 之间"),
    (dict(global_batch=2**63), "global_batch = 9223372036854775808 超过了 上限 = 1048576"),
    (dict(model="gpt2-xl"), "model = 'gpt2-xl'：必须是 GPTConfig"),
])
def test_a_job_is_refused_with_the_rule_it_breaks(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replace(CASE, **changes)


def test_what_a_job_derives():
    assert (CASE.num_microbatches, CASE.devices, CASE.tokens_per_microbatch) == (16, 8, 2048)
    assert CASE.in_flight_microbatches == (4, 3, 2, 1)
    assert [s.num_layers for s in CASE.stages] == [12] * 4
    assert CASE.precision == "bf16-mixed" and Job(get_config("tiny"), 64, 8, 8).precision == "fp32"
    assert CASE.read_grad_accum(4).grad_accum_reading == "pipeline_fills"
    # a variant is a new record; equality is by the chosen fields only
    assert replace(CASE, micro_batch_size=4) == CASE_STUDY_TUNED_JOB and replace(CASE, micro_batch_size=4) != CASE



class CallCounter:
    """Counts calls of the argument checks and of the layer partition, and of ``Job.__post_init__``,
    telling apart the checks made while a job is being made from all others (sys.setprofile)."""

    def __init__(self) -> None:
        self.watched = {f.__code__: f.__name__ for f in (checks.whole, checks.positive, checks.nonnegative,
                                                         checks.fraction, checks.one_of, checks.at_most,
                                                         checks.divides, partition.partition_layers)}
        self.post_init = Job.__post_init__.__code__
        self.depth = 0
        self.jobs_made = 0
        self.inside: dict[str, int] = {}
        self.outside: dict[str, int] = {}

    def __call__(self, frame, event, arg):
        code = frame.f_code
        if code is self.post_init:
            if event == "call":
                self.depth += 1
                self.jobs_made += 1
            elif event == "return":
                self.depth -= 1
        elif event == "call" and code in self.watched:
            counts = self.inside if self.depth else self.outside
            counts[self.watched[code]] = counts.get(self.watched[code], 0) + 1

    def __enter__(self) -> "CallCounter":
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)


def test_tune_validates_each_job_once_and_the_formulas_check_nothing():
    """One tune() on the lecture's case: the case's job is not validated again (it was, once, when it
    was made); each candidate job — one per micro-batch size — is validated once, when replace() makes
    it; no formula re-checks a value or re-partitions the layers."""
    with CallCounter() as counter:
        result = tune(CASE, LOW)
    assert counter.outside == {}
    assert len(result["candidates"]) == 4
    # the schedule search (issue 30): each other schedule's candidates, and one job made to ask each other
    # (schedule, v) whether the layers cut into p · v chunks (v = 5, 7, 8 are refused: 48 layers, 4 stages)
    searched = [e for e in result["schedules"][1:]]
    probes = len(searched) + 3
    assert counter.jobs_made == sum(len(e["candidates"]) for e in result["schedules"]) + probes
    with CallCounter() as one:
        replace(CASE, micro_batch_size=1)
    assert one.jobs_made == 1 and one.inside["partition_layers"] == 1
    # everything checked during tune was checked while making those jobs, as many times as making each
    # alone checks it
    expected: dict[str, int] = {}

    def add(times: int, **changes) -> None:
        with CallCounter() as alone:
            try:
                replace(CASE, **changes)
            except ValueError:
                pass
        for name, n in alone.inside.items():
            expected[name] = expected.get(name, 0) + times * n

    for i, entry in enumerate(result["schedules"]):
        b = entry["candidates"][0]["micro_batch_size"]
        add(len(entry["candidates"]) + (i > 0), micro_batch_size=b, schedule=entry["schedule"],
            virtual_stages=entry["virtual_stages"])
    for v in (5, 7, 8):
        add(1, micro_batch_size=1, schedule="interleaved-1f1b", virtual_stages=v)
    assert counter.inside == expected


def test_the_counter_sees_a_formula_that_re_checks(monkeypatch):
    """The count above can fail: a memory model that re-validated its job would show up outside."""
    from batchlab.formulas import memory, tune as tune_module

    real = memory.stage_memory

    def revalidating(job):
        checks.one_of("schedule", job.schedule, ("gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"))
        return real(job)

    monkeypatch.setattr(tune_module, "stage_memory", revalidating)
    with CallCounter() as counter:
        result = tune(CASE, LOW)
    assert counter.outside == {"one_of": sum(len(e["candidates"]) for e in result["schedules"])}


# What tune() returned on the lecture's case before the job record (commit 163e578, the 910B preset's
# low and high ends as they were then, no dropout): (micro, m, bubble, peak memory fraction, fits, tokens/s,
# matmul efficiency). Issue 18 changed the inputs (dropout 0.1, re-sourced 910B figures), not the machinery:
# the old inputs must still give the old answer.
OLD_CASE = replace(CASE, dropout=0.0)
OLD_CURVES = {"low": roofline_curve(XL, 256e12, 0.4e12), "high": roofline_curve(XL, 376e12, 1.6e12)}
BEFORE = {
    "low": ([(1, 32, 0.085714, 0.178235, True, 142002.7, 0.888889), (2, 16, 0.157895, 0.251478, True, 147141.0, 1.0),
             (4, 8, 0.272727, 0.397963, True, 127076.3, 1.0), (8, 4, 0.428571, 0.690934, True, 99845.7, 1.0)], 2),
    "high": ([(1, 32, 0.085714, 0.178235, True, 234637.3, 1.0), (2, 16, 0.157895, 0.251478, True, 216113.3, 1.0),
              (4, 8, 0.272727, 0.397963, True, 186643.3, 1.0), (8, 4, 0.428571, 0.690934, True, 146648.3, 1.0)], 1),
}


@pytest.mark.parametrize("end", ["low", "high"])
def test_tune_returns_the_same_candidates_as_before(end):
    result = tune(OLD_CASE, OLD_CURVES[end])
    rows, recommended = BEFORE[end]
    got = [(c["micro_batch_size"], c["num_microbatches"], c["bubble_fraction"], c["peak_memory_fraction"], c["fits"],
            c["tokens_per_second"], c["matmul_efficiency"]) for c in result["candidates"]]
    assert [g[:2] + (g[4],) for g in got] == [r[:2] + (r[4],) for r in rows]
    for g, r in zip(got, rows):
        assert g[2:4] + g[5:] == pytest.approx(r[2:4] + r[5:], abs=1e-6, rel=1e-6)
    assert result["recommended"]["micro_batch_size"] == recommended


@pytest.mark.parametrize("gib, suggestion, change", [
    (8, "用 full 重计算后微批次大小 2 放得下", {"recompute": "full"}),
    (4, "用 full 重计算并把流水线阶段数从 4 增大到 12（设备数 24）后微批次大小 2 放得下",
     {"recompute": "full", "pipeline_stages": 12}),
    (2, "重计算和更多流水线阶段（到 n_layer = 48）都不够：需要更大的显存、ZeRO-1、更低的精度或更短的序列", None),
])
def test_tune_suggests_as_before_when_nothing_fits(gib, suggestion, change):
    result = tune(replace(CASE, device_memory_gib=gib), LOW)
    assert (result["recommended"], result["suggestion"], result["suggested_change"]) == (None, suggestion, change)


SRC = ROOT / "src" / "batchlab"


def _files_saying(text: str) -> list[str]:
    return sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if text in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("text, home", [
    ("的 n_positions = ", ["formulas/presets.py"]),                  # the sequence-length rule's wording
    ("cross_entropy(", ["measure/model.py"]),                        # one next-token loss
    ('"float32": 4', ["formulas/precision.py"]),                     # one bytes-per-element table
    ("BACKWARD_PER_FORWARD = ", ["formulas/pipeline_schedules.py"]),  # the backward/forward cost ratio
    ("tensor_parallel * pipeline_stages * data_parallel", ["formulas/batching.py"]),  # devices = t · p · d · cp
    ("* model_flops_per_token(", ["formulas/throughput.py"]),        # MFU
])
def test_each_rule_is_written_in_one_place(text, home):
    assert _files_saying(text) == home


def test_a_device_curve_is_one_call():
    """What the notebooks call for the 910B's roofline rate curve: the preset's own ends."""
    from batchlab.formulas.roofline import roofline_curve

    npu = DEVICE_PRESETS["ascend-910b"]
    for end, i in (("low", 0), ("high", 1)):
        by_hand = roofline_curve(XL, npu.peak_flops[i], npu.memory_bandwidth[i])
        curve = npu.curve(XL, end)
        assert (curve.rows, curve.flops_per_second) == (by_hand.rows, by_hand.flops_per_second)
    assert npu.curve(XL, "low").name == "Ascend 910B 屋顶线（低端）"
    import nbformat
    book = ROOT / "book"
    by_hand = [nb.name for nb in sorted(book.glob("*.ipynb"))
               if any("roofline_curve(" in c.source for c in nbformat.read(nb, as_version=4).cells)]
    assert by_hand == []  # the chapters call the preset, not the formula with its figures retyped
    with pytest.raises(ValueError, match="end = 'mid'"):
        npu.curve(XL, "mid")


def test_a_one_device_job_is_one_stage_one_replica_one_micro_batch():
    from batchlab.formulas.memory import stage_activation_bytes

    tiny = get_config("tiny")
    job = Job.one_device(tiny, 8, 32, recompute="selective")
    assert (job.pipeline_stages, job.data_parallel, job.num_microbatches) == (1, 1, 1)
    assert (job.global_batch, job.micro_batch_size, job.seq_len, job.recompute) == (8, 8, 32, "selective")
    assert job == Job(tiny, seq_len=32, global_batch=8, micro_batch_size=8, recompute="selective")
    # the first stage is the default stage, and one stage holds the whole model
    assert stage_activation_bytes(job) == stage_activation_bytes(job, job.stages[0])
    with pytest.raises(ValueError):
        Job.one_device(tiny, 0, 32)


# ── issue 30: the schedule's chunks and the tensor/sequence/context degrees ─────────────────────────

@pytest.mark.parametrize("changes, message", [
    (dict(virtual_stages=2), "virtual_stages = 2：1F1B 每张卡只放一段模型"),
    (dict(schedule="gpipe", virtual_stages=3), "virtual_stages = 3：GPipe 每张卡只放一段模型"),
    (dict(schedule="interleaved-1f1b"), "virtual_stages = 1：交错式 1F1B 要求每张卡放 ≥ 2 段模型"),
    (dict(schedule="zero-bubble", virtual_stages=3), "virtual_stages = 3：零气泡调度只有 ZB-H1"),
    # 40 / (2 · 2) = 10 micro-batches over 4 stages: not a multiple of p
    (dict(schedule="interleaved-1f1b", virtual_stages=2, global_batch=40),
     "num_microbatches = 10：交错式 1F1B 要求微批次数是流水线阶段数 pipeline_stages = 4 的整数倍"),
    (dict(schedule="interleaved-1f1b", virtual_stages=5), "gpt2-xl 的层数 n_layer = 48 不能被"),
    (dict(virtual_stages=0), "virtual_stages = 0：必须是 ≥ 1 的整数"),
    (dict(virtual_stages=65), "virtual_stages = 65 超过了 上限 = 64"),
    (dict(tensor_parallel=2), "gpt2-xl 的注意力头数 n_head = 25 不能被 tensor_parallel = 2 整除"),
    (dict(tensor_parallel=0), "tensor_parallel = 0：必须是 ≥ 1 的整数"),
    (dict(tensor_parallel=2.5), "tensor_parallel = 2.5：必须是 ≥ 1 的整数"),
    (dict(sequence_parallel=True), "sequence_parallel = True：序列并行切分的是张量并行组内的激活，需要 tensor_parallel > 1"),
    (dict(sequence_parallel="yes"), "sequence_parallel = 'yes'：只能取 True, False 之一"),
    (dict(context_parallel=3), "seq_len = 1024 不能被 2 × context_parallel = 6 整除"),
    (dict(context_parallel=2**11), "context_parallel = 2048 超过了 上限 = 1024"),
])
def test_a_parallel_job_is_refused_with_the_one_line_of_its_rule(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        replace(CASE, **changes)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("t, p, d, cp", [(1, 4, 2, 1), (5, 4, 2, 1), (5, 4, 1, 2), (25, 1, 1, 512), (1, 48, 2, 4)])
def test_devices_are_t_p_d_cp(t, p, d, cp):
    job = replace(CASE, tensor_parallel=t, pipeline_stages=p, data_parallel=d, context_parallel=cp,
                  global_batch=2 * 48 * d, micro_batch_size=1)
    assert job.devices == t * p * d * cp
    assert job.num_microbatches == job.global_batch // d  # t and cp split each micro-batch's work, not the batch


def test_replace_makes_each_schedule_and_parallel_variant():
    interleaved = replace(CASE, schedule="interleaved-1f1b", virtual_stages=2)
    assert (interleaved.schedule, interleaved.virtual_stages, interleaved.num_microbatches) == ("interleaved-1f1b", 2, 16)
    assert interleaved != CASE and replace(interleaved, schedule="1f1b", virtual_stages=1) == CASE
    zbv = replace(CASE, schedule="zero-bubble", virtual_stages=2)
    assert len(zbv.in_flight_chunks) == 4 and zbv.devices == CASE.devices
    tp = replace(CASE, tensor_parallel=5, sequence_parallel=True)
    assert tp.devices == 40 and tp.sequence_parallel and replace(tp, sequence_parallel=False).tensor_parallel == 5
    with pytest.raises(ValueError, match="需要 tensor_parallel > 1"):
        replace(tp, tensor_parallel=1)  # SP stays on: the variant is refused, not silently changed
    assert Job.from_record(interleaved.as_record()) == interleaved and Job.from_record(tp.as_record()) == tp
