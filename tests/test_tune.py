"""Choosing the micro-batch size: every candidate against model_step and stage_memory computed directly,
the recommendation, the suggestion when nothing fits, and the `tune` / `plan --tokens-per-second` CLI."""
import json
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from batchlab.apps.cli import main
from batchlab.formulas.job import Job
from batchlab.formulas.memory import stage_memory
from batchlab.formulas.presets import get_config
from batchlab.lecture.case import CASE_STUDY
from batchlab.formulas.roofline import (DEVICE_PRESETS, ROOFLINE_ROWS, RateCurve, arithmetic_intensity,
                                        roofline_curve, roofline_flops)
from batchlab.formulas.throughput import model_step
from batchlab.formulas.tune import tune
from booktools import ROOT

XL = get_config("gpt2-xl")
NPU = DEVICE_PRESETS["ascend-910b"]
LOW = roofline_curve(XL, NPU.peak_flops[0], NPU.memory_bandwidth[0])
CASE = dict(seq_len=CASE_STUDY.job.seq_len, global_batch=CASE_STUDY.job.global_batch,
            pipeline_stages=CASE_STUDY.job.pipeline_stages, data_parallel=CASE_STUDY.job.data_parallel)
CASE_JOB = CASE_STUDY.job  # gpt2-xl, s = 1024, global batch 64, micro-batch 2, 4 stages × 2 replicas


def test_roofline_curve_is_the_mlp_matmuls_roofline():
    assert ROOFLINE_ROWS[0] == 256 and ROOFLINE_ROWS[-1] == 65536 and len(ROOFLINE_ROWS) == 9
    h = XL.d_model
    peak, bandwidth = NPU.peak_flops[0], NPU.memory_bandwidth[0]
    for m, rate in zip(LOW.rows, LOW.flops_per_second):
        assert rate == roofline_flops(arithmetic_intensity(m, h, 4 * h, 2), peak, bandwidth)
    # the 910B's low roofs (295 TFLOPS, 1.64 TB/s): bf16 is compute-bound from M = 256 on
    assert LOW.best == peak and LOW.rate(256) == pytest.approx(peak) == LOW.rate(2048)
    fp32 = roofline_curve(XL, peak, bandwidth, dtype="float32", name="fp32")
    assert fp32.name == "fp32" and fp32.rate(256) < LOW.rate(256)  # twice the bytes, half the intensity
    with pytest.raises(ValueError, match="bandwidth = 0"):
        roofline_curve(XL, 256e12, 0)


@pytest.mark.parametrize("schedule, recompute", [("1f1b", "none"), ("gpipe", "selective"), ("1f1b", "full")])
def test_candidates_match_model_step_and_stage_memory(schedule, recompute):
    job = replace(CASE_JOB, schedule=schedule, recompute=recompute)
    out = tune(job, LOW)
    sizes = [c["micro_batch_size"] for c in out["candidates"]]
    assert sizes == ([1, 2, 4, 8] if schedule == "1f1b" else [1, 2, 4, 8, 16, 32])
    for c in out["candidates"]:
        b, m = c["micro_batch_size"], c["num_microbatches"]
        assert b * CASE["data_parallel"] * m == CASE["global_batch"]
        candidate = replace(job, micro_batch_size=b)
        assert candidate.num_microbatches == m
        step = model_step(candidate, LOW)
        memory = stage_memory(candidate)
        assert c["tokens_per_second"] == step.tokens_per_second
        assert c["matmul_efficiency"] == step.matmul_efficiency
        assert c["bubble_fraction"] == step.bubble_fraction == 3 / (m + 3)
        assert c["peak_memory_fraction"] == memory.peak_memory_fraction and c["fits"] == memory.fits


@pytest.mark.parametrize("memory_gib", [64, 20, 16])
def test_recommendation_fits_and_is_fastest_among_fitting(memory_gib):
    out = tune(replace(CASE_JOB, device_memory_gib=memory_gib), LOW)
    fitting = [c for c in out["candidates"] if c["fits"]]
    assert fitting and out["suggestion"] is None and out["suggested_change"] is None
    best = out["recommended"]
    assert best["fits"] and best in fitting
    assert best["tokens_per_second"] == max(c["tokens_per_second"] for c in fitting)
    if memory_gib == 64:  # compute-bound from M = 1024 on: no matmul gain, the bubble decides
        assert best["micro_batch_size"] == 1 and len(fitting) == 3
    if memory_gib == 16:  # only micro-batch 1 fits (15.1 GiB on the first stage, dropout 0.1)
        assert best["micro_batch_size"] == 1 and len(fitting) == 1


def test_a_flat_curve_recommends_the_smallest_micro_batch():
    flat = RateCurve((1, 100_000), (1e12, 1e12))
    assert tune(CASE_JOB, flat)["recommended"]["micro_batch_size"] == 1


def test_1f1b_excludes_micro_batches_with_fewer_micro_batches_than_stages():
    job = Job(XL, seq_len=1024, global_batch=64, micro_batch_size=1, pipeline_stages=8, data_parallel=1)
    one = tune(job, LOW)
    assert [c["micro_batch_size"] for c in one["candidates"]] == [1, 2, 4, 8]
    assert all(c["num_microbatches"] >= 8 for c in one["candidates"])
    gpipe = tune(replace(job, schedule="gpipe"), LOW)
    assert [c["micro_batch_size"] for c in gpipe["candidates"]] == [1, 2, 4, 8, 16, 32, 64]


@pytest.mark.parametrize("stages, memory_gib", [(1, 8), (4, 8), (1, 4), (1, 16)])
def test_nothing_fits_suggests_a_change_that_works(stages, memory_gib):
    # micro-batch 1: the job stays runnable (m = 32 ≥ p) whatever number of stages the change suggests
    job = Job(XL, seq_len=1024, global_batch=64, micro_batch_size=1, pipeline_stages=stages, data_parallel=2,
              device_memory_gib=memory_gib)
    out = tune(job, LOW)
    assert not any(c["fits"] for c in out["candidates"])
    assert out["recommended"] is None and out["suggestion"]
    change = out["suggested_change"]
    assert change, out["suggestion"]
    if "recompute" in change:
        assert f"用 {change['recompute']} 重计算" in out["suggestion"]
    if "pipeline_stages" in change:
        assert f"增大到 {change['pipeline_stages']}" in out["suggestion"]
        assert XL.n_layer % change["pipeline_stages"] == 0 and change["pipeline_stages"] > stages
    after = tune(replace(job, **change), LOW)
    assert after["recommended"] is not None and after["suggestion"] is None
    assert f"微批次大小 {max(c['micro_batch_size'] for c in after['candidates'] if c['fits'])} 放得下" in out["suggestion"]


def test_model_states_alone_too_big_suggests_more_stages():
    # 1.56 B parameters × 16 bytes ≈ 23 GiB of model states on one stage: recomputation alone cannot help
    job = Job(XL, seq_len=1024, global_batch=64, micro_batch_size=1, pipeline_stages=1, data_parallel=2,
              device_memory_gib=8)
    out = tune(job, LOW)
    assert out["suggested_change"]["pipeline_stages"] > 1 and "把流水线阶段数从 1 增大到" in out["suggestion"]
    assert not any(c["fits"] for c in tune(replace(job, recompute="full"), LOW)["candidates"])


def test_hopeless_case_says_so():
    out = tune(Job(XL, seq_len=1024, global_batch=64, micro_batch_size=1, pipeline_stages=1, data_parallel=2,
                   device_memory_gib=1), LOW)
    assert out["recommended"] is None and out["suggested_change"] is None and "都不够" in out["suggestion"]


@pytest.mark.parametrize("kwargs, reason", [
    (dict(global_batch=63), "global_batch = 63 不能被 micro_batch_size × data_parallel = 1 × 2 = 2 整除"),
    # 128 sequences: 1F1B's m ≥ p holds at micro-batch 1, so the stages-versus-layers rule is the one broken
    (dict(pipeline_stages=64, global_batch=128), "pipeline_stages = 64 超过了"),
    (dict(seq_len=2048), "seq_len = 2048：必须在 1 到 gpt2-xl 的 n_positions = 1024 之间"),
    # 4 / 2 = 2 sequences per replica: even micro-batch 1 (the most micro-batches) gives m = 2 < p = 4,
    # so no micro-batch size makes a 1F1B job (tune's old "没有可运行的微批次大小")
    (dict(global_batch=4), "num_microbatches = 2：1F1B 要求微批次数 ≥ 流水线阶段数 pipeline_stages = 4"),
    (dict(data_parallel=0), "data_parallel = 0：必须是 ≥ 1 的整数"),
    (dict(schedule="zb"), "schedule = 'zb'"),
    (dict(recompute="partial"), "recompute = 'partial'"),
    (dict(device_memory_gib=0), "device_memory_gib = 0"),
    (dict(curve=[1, 2]), "curve = [1, 2]：必须是 RateCurve"),
])
def test_invalid_input_is_refused_in_chinese(kwargs, reason):
    # The job refuses its own bad values when it is made; tune refuses a curve that is not a RateCurve.
    fields = {**CASE, "micro_batch_size": 1, **{k: v for k, v in kwargs.items() if k != "curve"}}
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace("[", r"\[")):
        tune(Job(XL, **fields), kwargs.get("curve", LOW))


def test_candidates_keep_the_jobs_precision_and_ignore_its_micro_batch():
    job = replace(CASE_JOB, precision="fp32", micro_batch_size=8)  # the job's own b is one candidate among all
    fp32 = tune(job, LOW)
    expect = stage_memory(replace(job, micro_batch_size=2))
    assert fp32["candidates"][1]["micro_batch_size"] == 2
    assert fp32["candidates"][1]["peak_memory_fraction"] == expect.peak_memory_fraction
    assert fp32["candidates"] == tune(replace(job, micro_batch_size=1), LOW)["candidates"]


# ── CLI ──────────────────────────────────────────────────────────────────────────────────────────

TUNE = ["tune", "--model", CASE_STUDY.job.model.name, "--seq-len", str(CASE_STUDY.job.seq_len),
        "--global-batch", str(CASE_STUDY.job.global_batch), "--pipeline-stages", str(CASE_STUDY.job.pipeline_stages),
        "--data-parallel", str(CASE_STUDY.job.data_parallel)]


def run_json(args, capsys):
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_tune_case_study(capsys):
    out = run_json(TUNE + ["--json"], capsys)
    for key in ("candidates", "recommended", "suggestion", "model", "seq_len", "global_batch", "pipeline_stages",
                "data_parallel", "schedule", "recompute", "curve"):
        assert key in out
    assert out["curve"]["peak_flops"] == NPU.peak_flops[0] and out["curve"]["bandwidth"] == NPU.memory_bandwidth[0]
    assert out["curve"]["flops_per_second"] == list(LOW.flops_per_second)
    assert out["candidates"] == tune(CASE_JOB, LOW)["candidates"]
    assert out["recommended"]["micro_batch_size"] == 1 and out["suggestion"] is None  # compute-bound: the bubble decides
    fast = run_json(TUNE + ["--peak-tflops", "376", "--bandwidth-tbs", "1.6", "--json"], capsys)
    assert fast["curve"]["peak_flops"] == 376e12 and fast["curve"]["bandwidth"] == 1.6e12
    assert fast["candidates"][0]["tokens_per_second"] > out["candidates"][0]["tokens_per_second"]
    small = run_json(TUNE + ["--device-memory-gib", "8", "--json"], capsys)
    assert small["recommended"] is None and small["suggestion"]


def test_cli_tune_text_is_a_table(capsys):
    assert main(TUNE) == 0
    text = capsys.readouterr().out
    assert "tokens/s" in text and "← 推荐" in text and "Ascend 910B（低端）：295 TFLOP/s，1.64 TB/s" in text
    header = next(line for line in text.splitlines() if line.startswith("微批次大小"))
    assert header.split() == ["微批次大小", "m", "气泡", "显存", "放得下", "矩阵乘法效率", "tokens/s"]
    with pytest.raises(SystemExit) as exit_:
        main(["tune", "--help"])
    assert exit_.value.code == 0 and "默认取 Ascend 910B 预设的低端" in capsys.readouterr().out


@pytest.mark.parametrize("args, reason", [
    (["--global-batch", "63", "--data-parallel", "2"],
     "global_batch = 63 不能被 micro_batch_size × data_parallel = 1 × 2 = 2 整除"),
    (["--global-batch", "64", "--peak-tflops", "0"], "peak_tflops = 0.0：必须是有限的正数"),
    (["--global-batch", "64", "--pipeline-stages", "64"], "pipeline_stages = 64 超过了"),
])
def test_cli_tune_bad_input_exits_2_with_one_line(args, reason):
    proc = subprocess.run([sys.executable, "-m", "batchlab", "tune", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and reason in proc.stderr and "Traceback" not in proc.stderr


PLAN = ["plan", "--model", "gpt2-xl", "--seq-len", "1024", "--global-batch", "64", "--micro-batch", "2",
        "--pipeline-stages", "4", "--data-parallel", "2", "--json"]


def test_plan_reports_mfu(capsys):
    l, h, s, v = 48, 1600, 1024, 50257
    flops = 72 * l * h**2 * (1 + s / (6 * h) + v / (12 * l * h))  # Narayanan et al. 2021
    out = run_json(PLAN + ["--tokens-per-second", "3200"], capsys)
    assert out["model_flops_per_token"] == pytest.approx(flops)
    assert out["mfu"] == pytest.approx(3200 * flops / (8 * NPU.peak_flops[0]))
    none = run_json(PLAN, capsys)
    assert none["mfu"] is None and none["model_flops_per_token"] == pytest.approx(flops)
    full = run_json(PLAN + ["--recompute", "full", "--tokens-per-second", "3200", "--peak-tflops", "376"], capsys)
    full_flops = 96 * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h))
    assert full["mfu"] == pytest.approx(3200 * full_flops / (8 * 376e12))
    assert main(PLAN[:-1] + ["--tokens-per-second", "3200"]) == 0
    assert "MFU           1.4% = 3,200 tokens/s × 每 token 的 FLOPs /（8 × 295 TFLOP/s）" in capsys.readouterr().out
    assert main(PLAN + ["--tokens-per-second", "-1"]) == 2
    assert "tokens_per_second = -1.0" in capsys.readouterr().err


def test_plan_and_tune_report_the_device_figures_they_assume(capsys):
    """What an answer rests on travels with it: the preset end it names, or 自定义 for the reader's own figures."""
    from batchlab.formulas.roofline import DEVICE_PRESETS

    npu = DEVICE_PRESETS["ascend-910b"]
    out = run_json(TUNE + ["--json"], capsys)
    assert out["device"] == {"name": "Ascend 910B（低端）", "peak_flops": npu.peak_flops[0],
                             "memory_bandwidth": npu.memory_bandwidth[0], "memory_bytes": 64 * 2**30}
    high = run_json(TUNE + ["--peak-tflops", f"{npu.peak_flops[1] / 1e12!r}",
                            "--bandwidth-tbs", f"{npu.memory_bandwidth[1] / 1e12!r}", "--json"], capsys)
    assert high["device"]["name"] == "Ascend 910B（高端）"
    own = run_json(TUNE + ["--peak-tflops", "123", "--device-memory-gib", "32", "--json"], capsys)
    assert own["device"]["name"] == "自定义" and own["device"]["memory_bytes"] == 32 * 2**30
    plan = run_json(["plan", "--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4",
                     "--data-parallel", "2", "--json"], capsys)
    assert plan["device"] == {"name": "Ascend 910B（低端）", "peak_flops": npu.peak_flops[0], "memory_bytes": 64 * 2**30}


def test_the_readme_shows_the_device_figures_tune_reports(capsys):
    """README.md quotes `tune --json`'s device block for the case: it must be what the command prints."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("`tune --json` says:", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert json.loads("{" + block + "}")["device"] == run_json(TUNE + ["--json"], capsys)["device"]


# ── issue 30: the schedule search ────────────────────────────────────────────────────────────────

def test_tune_searches_every_schedule_and_v_the_case_takes():
    from batchlab.formulas.pipeline_schedules import schedule_label

    out = tune(CASE_JOB, LOW)
    pairs = [(e["schedule"], e["virtual_stages"]) for e in out["schedules"]]
    # 48 layers over 4 stages: interleaving with v chunks of 12/v layers (v ≤ 8), ZB-H1 and ZB-V
    assert pairs == [("1f1b", 1), ("gpipe", 1), ("interleaved-1f1b", 2), ("interleaved-1f1b", 3),
                     ("interleaved-1f1b", 4), ("interleaved-1f1b", 6), ("zero-bubble", 1), ("zero-bubble", 2)]
    assert out["schedules"][0]["candidates"] == out["candidates"]  # the job's own schedule comes first
    for entry in out["schedules"]:
        assert entry["label"] == schedule_label(entry["schedule"], entry["virtual_stages"])
        for row in entry["candidates"]:  # each row is the model's answer for that job, as tune's own rows are
            job = replace(CASE_JOB, micro_batch_size=row["micro_batch_size"], schedule=entry["schedule"],
                          virtual_stages=entry["virtual_stages"])
            assert row["tokens_per_second"] == model_step(job, LOW).tokens_per_second
            assert row["peak_memory_fraction"] == stage_memory(job).peak_memory_fraction
        fitting = [r for r in entry["candidates"] if r["fits"]]
        assert entry["recommended"] == (max(fitting, key=lambda r: r["tokens_per_second"]) if fitting else None)
    assert out["schedules_not_searched"] == []


def test_interleaving_wins_the_case_and_tune_says_why():
    """The lecture's case on the 910B's low roofline: compute-bound, so the bubble decides, and interleaving
    shrinks it at the same m; the sentence gives both bubbles."""
    out = tune(CASE_JOB, LOW)
    best = out["best_schedule"]
    assert best["schedule"] in ("interleaved-1f1b", "zero-bubble") and best["virtual_stages"] > 1
    winner = next(e for e in out["schedules"] if (e["schedule"], e["virtual_stages"]) ==
                  (best["schedule"], best["virtual_stages"]))
    fitting = [e["recommended"] for e in out["schedules"] if e["recommended"]]
    assert best["tokens_per_second"] == max(r["tokens_per_second"] for r in fitting) > out["recommended"]["tokens_per_second"]
    same = next(r for r in out["candidates"] if r["micro_batch_size"] == best["micro_batch_size"])
    assert best["bubble_fraction"] < same["bubble_fraction"]
    reason = out["schedule_reason"]
    assert winner["label"] in reason and f"{same['bubble_fraction']:.1%} 降到 {best['bubble_fraction']:.1%}" in reason
    assert f"m = {best['num_microbatches']}" in reason


def test_memory_can_rule_a_faster_schedule_out_and_the_reason_says_so():
    tight = replace(CASE_JOB, device_memory_gib=16, schedule="interleaved-1f1b", virtual_stages=2)
    out = tune(tight, LOW)
    best = out["best_schedule"]
    assert out["recommended"] is None and best is not None  # nothing fits under v = 2; another schedule does
    assert out["schedule_reason"].startswith("交错式 1F1B（v = 2）下没有放得下的微批次大小")
    unfit = [e for e in out["schedules"] if not e["fastest"]["fits"]
             and e["fastest"]["tokens_per_second"] > best["tokens_per_second"]]
    assert ("显存放不下" in out["schedule_reason"]) == bool(unfit)



def _entry(schedule, v, *rows):
    rows = [dict(micro_batch_size=b, num_microbatches=32 // b, bubble_fraction=bubble, peak_memory_fraction=memory,
                 fits=memory <= 1, tokens_per_second=speed) for b, bubble, memory, speed in rows]
    fitting = [r for r in rows if r["fits"]]
    return {"schedule": schedule, "virtual_stages": v, "candidates": rows,
            "recommended": max(fitting, key=lambda r: r["tokens_per_second"]) if fitting else None,
            "fastest": max(rows, key=lambda r: r["tokens_per_second"])}


def test_the_reason_names_the_bubble_or_the_memory_that_decided():
    from batchlab.formulas.tune import schedule_reason

    own = _entry("1f1b", 1, (1, 0.086, 0.5, 100.0), (2, 0.158, 0.9, 90.0))
    interleaved = _entry("interleaved-1f1b", 2, (1, 0.045, 0.6, 110.0))
    zbv = _entry("zero-bubble", 2, (1, 0.015, 1.3, 120.0))
    said = schedule_reason(own, interleaved, zbv)
    assert said == ("同样 m = 32 个微批次（微批次大小 1），交错式 1F1B（v = 2）把气泡从 8.6% 降到 4.5%，模型估计吞吐高 10.0%"
                    "（模型不计点对点通信：v = 2 时每步的点对点消息是 1F1B 的 2 倍，要实测再定）；零气泡（ZB-V）用微批次大小 1 的模型吞吐更高，但显存放不下（最满的阶段占 130%）")
    # nothing ruled out: no memory clause, only what the model leaves out of interleaving
    assert schedule_reason(own, interleaved, None).endswith("高 10.0%（模型不计点对点通信：v = 2 时每步的点对点消息是 1F1B 的 2 倍，要实测再定）")
    assert schedule_reason(own, _entry("zero-bubble", 1, (1, 0.03, 0.5, 105.0)), None).endswith("（模型不计拆分反向的额外开销：B 与 W 分两次算，要实测再定）")
    assert schedule_reason(own, own, None) == "1F1B 已是模型下最快且放得下的调度（微批次大小 1）"
    assert schedule_reason(own, None, None) is None
    other_size = _entry("interleaved-1f1b", 2, (4, 0.1, 0.6, 105.0))
    assert schedule_reason(own, other_size, None).startswith("各取最好的微批次：1F1B 是 1（气泡 8.6%），交错式 1F1B（v = 2）是 4")
    nothing = _entry("gpipe", 1, (1, 0.086, 1.7, 100.0))
    assert schedule_reason(nothing, interleaved, None).startswith("GPipe 下没有放得下的微批次大小；交错式 1F1B（v = 2）用")


def test_when_the_jobs_own_schedule_is_fastest_tune_says_so():
    # one stage has no bubble: every schedule takes the same time, and the job's own wins the tie
    one = Job(XL, seq_len=1024, global_batch=8, micro_batch_size=1, pipeline_stages=1)
    out = tune(one, LOW)
    assert (out["best_schedule"]["schedule"], out["best_schedule"]["virtual_stages"]) == ("1f1b", 1)
    assert out["schedule_reason"].startswith("1F1B 已是模型下最快且放得下的调度")
    # and the broken contrary: an interleaved job whose own schedule is the fastest says so of itself
    out = tune(replace(CASE_JOB, schedule="interleaved-1f1b", virtual_stages=6), LOW)
    won = (out["best_schedule"]["schedule"], out["best_schedule"]["virtual_stages"])
    own_is_best = won == ("interleaved-1f1b", 6)
    assert out["schedule_reason"].startswith("交错式 1F1B（v = 6）已是") == own_is_best


def test_the_search_is_bounded_and_names_what_it_left_out():
    from batchlab.formulas.tune import SEARCH_OPS, TUNED_VIRTUAL_STAGES

    tiny = get_config("tiny", n_layer=1024, d_model=4)
    job = Job(tiny, seq_len=64, global_batch=720720, micro_batch_size=1, pipeline_stages=64)
    out = tune(job, roofline_curve(tiny, 3e14, 1.6e12))
    assert all(e["virtual_stages"] <= TUNED_VIRTUAL_STAGES for e in out["schedules"])
    assert out["schedules_not_searched"], "p = 64 over 240 micro-batch sizes: ZB-V's memory is past the budget"
    searched = {e["label"] for e in out["schedules"]}
    assert not searched & set(out["schedules_not_searched"]) and SEARCH_OPS > 0


def test_cli_tune_prints_the_schedule_search(capsys):
    out = run_json(TUNE + ["--json"], capsys)
    assert out["best_schedule"] == tune(CASE_JOB, LOW)["best_schedule"]
    assert out["schedule_reason"] and out["virtual_stages"] == 1 and out["tensor_parallel"] == 1
    assert main(TUNE) == 0
    text = capsys.readouterr().out
    assert "调度搜索  同一个作业换成每种调度" in text and "← 最佳" in text
    assert "最佳调度  零气泡（ZB-V），微批次大小 1：" in text
    assert (out["best_schedule"]["schedule"], out["best_schedule"]["virtual_stages"]) == ("zero-bubble", 2)
    assert out["schedule_reason"] in text


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("zero-bubble", 1),
                                         ("zero-bubble", 2)])
def test_cli_tune_takes_each_schedule(schedule, v, capsys):
    out = run_json(TUNE + ["--schedule", schedule, "--virtual-stages", str(v), "--json"], capsys)
    job = replace(CASE_JOB, schedule=schedule, virtual_stages=v)
    assert (out["schedule"], out["virtual_stages"]) == (schedule, v)
    assert out["candidates"] == tune(job, LOW)["candidates"]
    assert (out["schedules"][0]["schedule"], out["schedules"][0]["virtual_stages"]) == (schedule, v)


def test_cli_tune_with_tensor_parallelism_needs_a_link_bandwidth(capsys):
    assert main(TUNE + ["--tensor-parallel", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--link-gbs" in err and "tensor_parallel = 5" in err
    out = run_json(TUNE + ["--tensor-parallel", "5", "--sequence-parallel", "--link-gbs", "56", "--json"], capsys)
    assert out["devices"] == 40 and out["curve"]["tensor_parallel"] == 5 and out["curve"]["link_bandwidth"] == 56e9
    curve = roofline_curve(XL, NPU.peak_flops[0], NPU.memory_bandwidth[0], tensor_parallel=5, link_bandwidth=56e9)
    job = replace(CASE_JOB, tensor_parallel=5, sequence_parallel=True, micro_batch_size=1)
    assert out["candidates"] == tune(job, curve)["candidates"]


# ── issue 43: ties and the model's resolution ────────────────────────────────────────────────────

def test_an_exact_tie_goes_to_less_memory_then_fewer_messages():
    """The case on the 910B's low roofline: interleaving at v = 6 and ZB-V model the same tokens/s to the last
    digit; ZB-V holds less memory (and sends 384 messages a step, not 1,472), so it wins, and the reason names
    the schedule it tied with."""
    from batchlab.formulas.comm import p2p_messages

    out = tune(CASE_JOB, LOW)
    entry = {(e["schedule"], e["virtual_stages"]): e["recommended"] for e in out["schedules"]}
    zbv, v6 = entry[("zero-bubble", 2)], entry[("interleaved-1f1b", 6)]
    assert zbv["tokens_per_second"] == v6["tokens_per_second"]  # the tie the rule decides
    assert zbv["peak_memory_fraction"] < v6["peak_memory_fraction"]
    assert p2p_messages(4, 32, 2, "zero-bubble") < p2p_messages(4, 32, 6, "interleaved-1f1b")
    assert (out["best_schedule"]["schedule"], out["best_schedule"]["virtual_stages"]) == ("zero-bubble", 2)
    assert "交错式 1F1B（v = 6）的模型吞吐与它相差不到 0.1%（模型的分辨率）" in out["schedule_reason"]


def test_preferred_breaks_ties_by_memory_then_messages_and_never_below_the_resolution():
    from batchlab.formulas.tune import RESOLUTION, preferred

    def row(speed, memory):
        return {"tokens_per_second": speed, "peak_memory_fraction": memory}

    a, b = row(100.0, 0.5), row(100.0, 0.4)
    assert preferred([a, b]) is b  # same speed: less memory
    c, d = row(100.0, 0.4), row(100.0, 0.4)
    assert preferred([c, d], messages=lambda r: 2 if r is c else 1) is d  # same memory: fewer messages
    assert preferred([c, d], messages=lambda r: 1 if r is c else 2) is c  # the contrary flips the verdict
    below, above = row(100.0 * (1 + RESOLUTION / 2), 0.9), row(100.0 * (1 + 2 * RESOLUTION), 0.9)
    assert preferred([a, below]) is a  # a gain below the resolution is no gain: less memory wins
    assert preferred([a, above]) is above  # a gain above it wins whatever the memory
    assert preferred([]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 1e6), st.floats(0.0, 2.0), st.integers(0, 100)), min_size=1, max_size=8))
def test_preferred_is_the_least_memory_among_the_speeds_the_model_cannot_tell_apart(rows):
    from batchlab.formulas.tune import preferred, same_speed

    items = [{"tokens_per_second": s, "peak_memory_fraction": m, "messages": n} for s, m, n in rows]
    chosen = preferred(items, messages=lambda r: r["messages"])
    top = max(r["tokens_per_second"] for r in items)
    assert same_speed(chosen["tokens_per_second"], top)
    for other in items:
        if same_speed(other["tokens_per_second"], top):
            assert (chosen["peak_memory_fraction"], chosen["messages"]) <= (other["peak_memory_fraction"], other["messages"])


def test_no_switch_is_recommended_for_a_gain_below_the_resolution():
    """At 4,096 micro-batches over 2 stages 1F1B's bubble is 0.02%: the other schedules gain less than the model's
    0.1%, so the job keeps its own and the reason says why; at the case's 32 micro-batches the gain is 7.7%."""
    from batchlab.formulas.tune import RESOLUTION

    long = Job(XL, seq_len=1024, global_batch=4096, micro_batch_size=1, pipeline_stages=2)
    out = tune(long, LOW)
    fastest = max(e["recommended"]["tokens_per_second"] for e in out["schedules"] if e["recommended"])
    own = out["recommended"]["tokens_per_second"]
    assert own < fastest < own * (1 + RESOLUTION)  # another schedule is faster, by less than the resolution
    assert (out["best_schedule"]["schedule"], out["best_schedule"]["virtual_stages"]) == ("1f1b", 1)
    assert out["schedule_reason"].startswith("1F1B 已是模型下最快且放得下的调度")
    assert "相差不到 0.1%（模型的分辨率），算作一样快：不换调度" in out["schedule_reason"]
    short = tune(replace(long, global_batch=64), LOW)  # the contrary: a gain the model resolves is a switch
    assert short["best_schedule"]["schedule"] != "1f1b" and "模型估计吞吐高" in short["schedule_reason"]
