import json
import subprocess
import sys

import pytest

from batchlab.apps.cli import main
from batchlab.formulas.presets import PUBLISHED_PARAMS, get_config
from batchlab.lecture.case import CASE_STUDY

CASE = ["plan", "--model", CASE_STUDY.job.model.name, "--seq-len", str(CASE_STUDY.job.seq_len),
        "--global-batch", str(CASE_STUDY.job.global_batch), "--pipeline-stages", str(CASE_STUDY.job.pipeline_stages),
        "--data-parallel", str(CASE_STUDY.job.data_parallel), "--json"]


def run_json(args, capsys):
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("micro, m, bubble", [(2, 16, 3 / 19), (4, 8, 3 / 11)])
def test_case_study_numbers(micro, m, bubble, capsys):
    out = run_json(CASE + ["--micro-batch", str(micro)], capsys)
    assert out["num_microbatches"] == m and isinstance(out["num_microbatches"], int)
    assert out["bubble_fraction"] == bubble  # exact: JSON keeps every digit of a float
    assert out["params"] == 1_557_611_200 and out["tokens_per_step"] == 65536
    assert out["layers_per_stage"] == [12, 12, 12, 12]


@pytest.mark.parametrize("model", list(PUBLISHED_PARAMS))
def test_params_exact_for_every_gpt2(model, capsys):
    out = run_json(["plan", "--model", model, "--global-batch", "8", "--micro-batch", "1", "--json"], capsys)
    assert out["params"] == PUBLISHED_PARAMS[model]


def test_grad_accum_is_checked(capsys):
    out = run_json(CASE + ["--micro-batch", "2", "--grad-accum", "4"], capsys)
    assert out["grad_accum_reading"] == "pipeline_fills" and out["pipeline_fills"] == 4
    out = run_json(CASE + ["--micro-batch", "2", "--grad-accum", "16"], capsys)
    assert out["grad_accum_reading"] == "num_microbatches"
    assert main(CASE + ["--micro-batch", "2", "--grad-accum", "5"]) == 2
    assert "梯度累积步数 = 5 两种读法都不成立" in capsys.readouterr().err


@pytest.mark.parametrize("args, reason", [
    (["--global-batch", "63"], "global_batch = 63 不能被 micro_batch_size × data_parallel = 2 × 2 = 4 整除"),
    (["--global-batch", "64", "--pipeline-stages", "64"], "pipeline_stages = 64 超过了 gpt2-xl 的层数 n_layer = 48"),
    (["--global-batch", "64", "--seq-len", "2048"], "seq_len = 2048：必须在 1 到 gpt2-xl 的 n_positions = 1024 之间"),
    (["--global-batch", "abc"], "--global-batch 的值 'abc' 不是整数"),
])
def test_invalid_input_exits_2_with_one_line(args, reason):
    base = ["plan", "--micro-batch", "2", "--data-parallel", "2", "--pipeline-stages", "4"]
    proc = subprocess.run([sys.executable, "-m", "batchlab", *base, *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and reason in proc.stderr and "Traceback" not in proc.stderr


def test_text_output_and_help(capsys):
    assert main(["plan", "--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4",
                 "--data-parallel", "2"]) == 0
    text = capsys.readouterr().out
    assert "微批次数      16，每个副本每步" in text and "气泡占比      0.158 = (p-1)/(m+p-1)" in text
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--help"])
    help_text = capsys.readouterr().out
    assert exit_.value.code == 0 and "--pipeline-stages" in help_text and help_text.startswith("用法：")
    assert "流水线并行度 p（默认 1）" in help_text and "显示这段帮助并退出" in help_text


def test_device_command_reports_cpu(capsys):
    out = run_json(["device", "--device", "cpu", "--json"], capsys)
    assert out["device"] == "cpu" and out["memory"]["total"] > 0
    assert main(["device", "--device", "tpu"]) == 2
    assert "tpu" in capsys.readouterr().err


def test_device_text_output_reads_memory_in_gib(capsys):
    assert main(["device", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("设备") and "（整个进程的常驻内存，measures = process_rss）" in out and "，峰值 " in out
    assert "，可用 " in out and " GiB / 共 " in out


def test_seq_len_defaults_to_the_models_context(capsys):
    out = run_json(["plan", "--model", "tiny", "--global-batch", "8", "--micro-batch", "2", "--json"], capsys)
    assert out["seq_len"] == 64 and out["tokens_per_step"] == 512


def test_plan_reports_memory_per_stage(capsys):
    from batchlab.formulas.job import Job
    from batchlab.formulas.memory import stage_memory

    out = run_json(CASE + ["--micro-batch", "2"], capsys)
    expect = stage_memory(Job(CASE_STUDY.job.model, seq_len=1024, global_batch=64, micro_batch_size=2,
                              pipeline_stages=4, data_parallel=2, schedule="1f1b"))
    assert expect.job.num_microbatches == 16
    assert out["schedule"] == "1f1b" and out["recompute"] == "none" and out["precision"] == "bf16-mixed"
    assert out["model_state_bytes_per_stage"] == [s.states.total for s in expect.stages]
    assert out["activation_bytes_per_stage"] == [s.activation_bytes for s in expect.stages]
    assert out["peak_bytes_per_stage"] == expect.peak_bytes_per_stage
    assert out["peak_memory_fraction"] == expect.peak_memory_fraction
    assert all(isinstance(v, int) for v in out["activation_bytes_per_stage"])


def test_memory_flags_change_the_answer(capsys):
    base = run_json(CASE + ["--micro-batch", "2"], capsys)
    gpipe = run_json(CASE + ["--micro-batch", "2", "--schedule", "gpipe"], capsys)
    full = run_json(CASE + ["--micro-batch", "2", "--recompute", "full"], capsys)
    zero = run_json(CASE + ["--micro-batch", "2", "--zero1"], capsys)
    fp32 = run_json(CASE + ["--micro-batch", "2", "--precision", "fp32", "--dropout", "0"], capsys)
    no_dropout = run_json(CASE + ["--micro-batch", "2", "--dropout", "0"], capsys)
    fused = run_json(CASE + ["--micro-batch", "2", "--attention", "fused"], capsys)
    small = run_json(CASE + ["--micro-batch", "2", "--device-memory-gib", "16"], capsys)
    assert gpipe["in_flight_microbatches"] == [16] * 4 and base["in_flight_microbatches"] == [4, 3, 2, 1]
    assert gpipe["peak_memory_fraction"] > base["peak_memory_fraction"] > full["peak_memory_fraction"]
    assert zero["model_state_bytes_per_stage"][1] < base["model_state_bytes_per_stage"][1]
    assert fp32["activation_bytes_per_stage"][1] == 2 * no_dropout["activation_bytes_per_stage"][1]  # masks are 1 B
    # dropout 0.1 (GPT-2's): Korthikanti's 34·sbh + 5·as²b per layer; without it 32·sbh + 2·as²b (no two 1-byte
    # masks, no score mask nor dropped scores), on stage 1's 12 layers
    s, b, h, a = 1024, 2, 1600, 25
    assert base["dropout"] == 0.1 and no_dropout["dropout"] == 0.0
    assert base["activation_bytes_per_stage"][1] - no_dropout["activation_bytes_per_stage"][1] == 3 * 12 * (
        2 * s * b * h + 3 * a * s * s * b)   # three in flight on stage 1
    assert fused["attention"] == "fused" and fused["peak_memory_fraction"] < base["peak_memory_fraction"]
    assert small["peak_memory_fraction"] == pytest.approx(4 * base["peak_memory_fraction"])
    assert run_json(["plan", "--model", "tiny", "--global-batch", "8", "--micro-batch", "2", "--json"],
                    capsys)["precision"] == "fp32"


@pytest.mark.parametrize("args, reason", [
    (["--recompute", "partial"], "--recompute = 'partial'：只能取 'none', 'selective', 'full' 之一"),
    (["--schedule", "zb"], "--schedule = 'zb'：只能取"),
    (["--device-memory-gib", "0"], "device_memory_gib = 0.0：必须在 0.001 到 1,000,000 之间"),
    (["--device-memory-gib", "1e308"], "device_memory_gib = 1e+308：必须在 0.001 到 1,000,000 之间"),
    (["--global-batch", str(2**63)], "global_batch = 9223372036854775808 超过了 上限 = 1048576"),
    (["--precision", "fp8"], "--precision = 'fp8'：只能取"),
])
def test_bad_memory_flags_exit_2(args, reason):
    base = ["plan", "--global-batch", "64", "--micro-batch", "2", "--data-parallel", "2", "--pipeline-stages", "4"]
    proc = subprocess.run([sys.executable, "-m", "batchlab", *base, *args], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and reason in proc.stderr


def test_pipeline_simulates_by_default(capsys):
    out = run_json(["pipeline", "--schedule", "1f1b", "--global-batch", "8", "--micro-batch", "1",
                    "--pipeline-stages", "4", "--json"], capsys)
    assert out["run"] == "simulated" and out["bubble_fraction"] == pytest.approx(3 / 11)
    assert out["bubble_fraction_formula"] == 3 / 11 and out["peak_in_flight"] == [4, 3, 2, 1]
    assert out["step_time"] == (8 + 4 - 1) * 3  # m + p − 1 slots of forward 1 + backward 2
    gpipe = run_json(["pipeline", "--schedule", "gpipe", "--global-batch", "2", "--micro-batch", "1",
                      "--pipeline-stages", "4", "--json"], capsys)
    assert gpipe["peak_in_flight"] == [2, 2, 2, 2]


def test_pipeline_takes_the_case_as_plan_does(capsys):
    """The same command line, `plan` or `pipeline`: one job, the same micro-batch count and bubble."""
    argv = CASE[1:-1] + ["--micro-batch", "2", "--json"]
    plan, pipeline = run_json(["plan", *argv], capsys), run_json(["pipeline", *argv], capsys)
    assert pipeline["num_microbatches"] == plan["num_microbatches"] == CASE_STUDY.job.num_microbatches
    assert pipeline["bubble_fraction_formula"] == plan["bubble_fraction"] == CASE_STUDY.job.plan.bubble_fraction


def test_plan_tune_and_pipeline_spell_the_job_flags_alike():
    """Every command that takes a job names each job field with one flag, the same everywhere (issue 27);
    the server launcher (torchrun) uses the same spellings for the fields it takes."""
    from batchlab.apps.cli import build_parser
    from batchlab.apps.job_commands import JOB_FLAGS
    from batchlab.measure.pipeline_torchrun import _parser as torchrun_parser

    commands = build_parser()._subparsers._group_actions[0].choices

    def job_flags(parser):  # {flag: the attribute it sets}, for the flags of job fields
        return {option: action.dest for action in parser._actions for option in action.option_strings
                if option in JOB_FLAGS.values()}

    plan = job_flags(commands["plan"])
    assert set(plan) == set(JOB_FLAGS.values())
    assert job_flags(commands["pipeline"]) == plan == job_flags(commands["tune"])
    torchrun = job_flags(torchrun_parser())
    assert {"--model", "--seq-len", "--global-batch", "--micro-batch", "--pipeline-stages", "--schedule"} <= set(torchrun)
    assert all(plan[flag] == dest for flag, dest in torchrun.items())
    old = {"--stages", "--micro-batches", "--micro-batch-size"}
    for parser in (*commands.values(), torchrun_parser()):
        assert not old & {o for action in parser._actions for o in action.option_strings}, parser.prog


def test_pipeline_runs_locally(capsys):
    out = run_json(["pipeline", "--model", "tiny", "--n-layer", "2", "--d-model", "64", "--global-batch", "16",
                    "--micro-batch", "4", "--pipeline-stages", "2", "--run", "local", "--json"], capsys)
    assert out["run"] == "local" and out["step_time_unit"] == "seconds" and out["step_time"] > 0
    assert out["peak_in_flight"] == [2, 1] and 0 < out["bubble_fraction"] < 1
    assert (out["num_microbatches"], out["seq_len"], out["d_model"]) == (4, 64, 64)


def test_pipeline_run_answers_with_the_simulator_what_it_cannot_measure(capsys):
    """The runs compute in fp32 with the attention written out and no dropout: a job that says otherwise is
    answered by the simulator, marked 模型推算 with why, decided before torch loads (issue 43: it used to be a
    refusal seconds later); the same job as the runs compute it is measured."""
    tiny = ["pipeline", "--model", "tiny", "--global-batch", "4", "--micro-batch", "2", "--pipeline-stages", "2",
            "--run", "local", "--json"]
    for extra, why in ((["--dropout", "0.1"], "dropout = 0.1"), (["--precision", "bf16-mixed"], "precision = 'bf16-mixed'"),
                       (["--attention", "fused"], "attention = 'fused'")):
        out = run_json([*tiny, *extra], capsys)
        assert out["run"] == "simulated" and out["modelled"].startswith("模型推算：" + why)
        assert "实测运行用 fp32、显式注意力、不带 dropout 计算" in out["modelled"]
    assert run_json(tiny, capsys)["run"] == "local"  # the contrary: tiny's own fp32 without dropout is measured


def test_pipeline_rejects_1f1b_with_too_few_micro_batches():
    proc = subprocess.run([sys.executable, "-m", "batchlab", "pipeline", "--schedule", "1f1b", "--pipeline-stages", "4",
                           "--global-batch", "2", "--micro-batch", "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "1F1B 要求微批次数 ≥ 流水线阶段数 pipeline_stages = 4" in proc.stderr


@pytest.mark.parametrize("absent", ["nbclient", "zmq"])
def test_grade_without_its_extra_is_refused_in_one_line(absent, tmp_path, monkeypatch, capsys):
    """A student's `pip install batchlab` has no nbclient/jupyter_client/...: grade names the extra to install
    instead of failing with an ImportError's traceback halfway through a class."""
    monkeypatch.setitem(sys.modules, absent, None)  # find_spec answers None, as if it were not installed
    (tmp_path / "alice.ipynb").write_text("{}", encoding="utf-8")
    assert main(["grade", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and absent in err and "pip install batchlab[grade]" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["plan", "tune"])
def test_text_reports_name_the_attention_their_activations_assume(command, capsys):
    # the case's 16.7 GiB on stage 0 keeps the s×s scores; the text must say so, and say the other kind when asked
    from batchlab.formulas.memory import activation_basis

    args = [command, *CASE[1:-1]] + (["--micro-batch", "2"] if command == "plan" else [])
    assert main(args) == 0
    stored = capsys.readouterr().out
    assert activation_basis("materialized") in stored and "显式注意力" in stored
    assert main(args + ["--attention", "fused"]) == 0
    fused = capsys.readouterr().out
    assert activation_basis("fused") in fused and "显式注意力" not in fused


def test_plan_text_says_the_72_form_is_derived_not_eq_3(capsys):
    assert main(["plan", *CASE[1:-1], "--micro-batch", "2"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("模型 FLOPs"))
    assert "每个 token 1.03×10¹⁰" in line and "不重计算" in line and "不是式 3 的 4 遍" in line
    assert main(["plan", *CASE[1:-1], "--micro-batch", "2", "--recompute", "full"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("模型 FLOPs"))
    assert "式 3：完全重计算" in line


def test_the_readmes_measured_run_fits_the_run_budget(capsys):
    """The README's `pipeline … --run local|distributed` example runs, both ways, with the steps each kind takes
    (a warm-up and two timed): a change to those steps or to the budget must keep the reader's first run."""
    import re

    from batchlab.apps.cli import RUN_STEPS
    from batchlab.formulas.budget import RUN_BUDGET, over_budget, run_cost
    from batchlab.formulas.presets import get_config
    from batchlab.formulas.job import Job

    from booktools import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.search(r"batchlab pipeline (--model tiny [^#]*?)--run local", readme, re.S)  # or local|distributed
    assert command, "README 里找不到 --run local|distributed 的示例"
    flags = command.group(1).replace("\\", " ").split()
    assert flags == ["--model", "tiny", "--n-layer", "4", "--d-model", "128", "--seq-len", "64",
                     "--global-batch", "32", "--micro-batch", "4", "--pipeline-stages", "4"]
    job = Job(get_config("tiny", n_layer=4, d_model=128), seq_len=64, global_batch=32, micro_batch_size=4,
              pipeline_stages=4, precision="fp32")
    for kind, processes in (("local", 1), ("distributed", 4)):
        assert not over_budget(run_cost(job, RUN_STEPS[kind], processes), RUN_BUDGET), kind
    out = run_json(["pipeline", *flags, "--run", "local", "--json"], capsys)
    assert out["run"] == "local" and 0 < out["bubble_fraction"] < 1


# ── issue 30: schedules, virtual stages, tensor/sequence/context parallelism ───────────────────────

PARALLEL = ["--schedule", "interleaved-1f1b", "--virtual-stages", "2", "--tensor-parallel", "5", "--sequence-parallel",
            "--context-parallel", "2"]


@pytest.mark.parametrize("command", ["plan", "pipeline"])
def test_the_new_flags_reach_the_job_and_its_json(command, capsys):
    from batchlab.formulas.pipeline_schedules import bubble_fraction

    out = run_json([command, *CASE[1:-1], "--micro-batch", "2", *PARALLEL, "--json"], capsys)
    assert (out["schedule"], out["virtual_stages"], out["tensor_parallel"], out["sequence_parallel"],
            out["context_parallel"]) == ("interleaved-1f1b", 2, 5, True, 2)
    assert out["num_microbatches"] == 16
    formula = bubble_fraction(4, 16, "interleaved-1f1b", 2)
    if command == "plan":
        assert out["devices"] == 5 * 4 * 2 * 2 and out["bubble_fraction"] == formula
    else:
        assert out["bubble_fraction_formula"] == formula and out["bubble_fraction"] == pytest.approx(formula)


def test_the_printed_job_shows_the_new_fields(capsys):
    assert main(["plan", *CASE[1:-1], "--micro-batch", "2", *PARALLEL]) == 0
    text = capsys.readouterr().out
    assert "设备数        80 = 5 路张量并行 × 4 个流水线阶段 × 2 路数据并行 × 2 路上下文并行（序列并行）" in text
    assert "交错式 1F1B（v = 2），重计算 none" in text
    assert "气泡占比      0.086（交错式 1F1B（v = 2）：模拟器验证过的闭式解）" in text
    assert main(["plan", *CASE[1:-1], "--micro-batch", "2"]) == 0  # the lecture's job reads as before
    text = capsys.readouterr().out
    assert "设备数        8 = 4 个流水线阶段 × 2 路数据并行\n" in text and "= (p-1)/(m+p-1)" in text


def test_plan_text_names_the_chunks_in_flight_the_json_counts(capsys):
    """With v > 1 chunks the text says how many chunks each stage holds, as the JSON and `pipeline` count them
    (issue 43: it printed the micro-batch counts [6, 5, 4, 3] as chunks where the chunks are [11, 9, 7, 5])."""
    argv = ["plan", *CASE[1:-1], "--micro-batch", "2", "--schedule", "interleaved-1f1b", "--virtual-stages", "2"]
    out = run_json([*argv, "--json"], capsys)
    assert out["in_flight_chunks"] == [11, 9, 7, 5] and out["in_flight_microbatches"] == [6, 5, 4, 3]
    pipeline = run_json(["pipeline", *argv[1:], "--json"], capsys)
    assert pipeline["peak_in_flight"] == out["in_flight_chunks"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "同时在途 [11, 9, 7, 5] 个模型块（每块 6 层）" in text and "[6, 5, 4, 3]" not in text
    assert main(argv[:-4]) == 0  # the contrary: v = 1 counts micro-batches
    assert "同时在途 [4, 3, 2, 1] 个微批次" in capsys.readouterr().out


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("interleaved-1f1b", 4),
                                         ("zero-bubble", 1), ("zero-bubble", 2)])
def test_pipeline_simulates_every_schedule_beside_its_closed_form(schedule, v, capsys):
    from batchlab.formulas.job import Job
    from batchlab.formulas.pipeline_schedules import bubble_fraction, pipeline_timeline

    out = run_json(["pipeline", "--schedule", schedule, "--virtual-stages", str(v), "--global-batch", "8",
                    "--micro-batch", "1", "--pipeline-stages", "4", "--model", "tiny", "--n-layer", "16", "--json"], capsys)
    assert out["run"] == "simulated" and out["modelled"] is None
    timeline = pipeline_timeline(schedule, 4, 8, 1 / v, 2 / v, virtual_stages=v)
    assert out["bubble_fraction"] == timeline.idle_fraction == pytest.approx(bubble_fraction(4, 8, schedule, v))
    assert out["step_time"] == pytest.approx(8 * 3 / (1 - out["bubble_fraction"]))  # every stage busy 3m
    job = Job(get_config("tiny", n_layer=16), 64, 8, 1, pipeline_stages=4, schedule=schedule, virtual_stages=v)
    assert out["peak_in_flight"] == timeline.peak_in_flight() == list(job.in_flight_chunks)
    assert out["peak_in_flight_unit"] == ("micro-batches" if v == 1 else f"chunks of {16 // (4 * v)} layer{'s' * (v == 2)}")


def test_pipeline_beyond_the_simulator_answers_with_the_closed_form(capsys):
    from batchlab.formulas.pipeline_schedules import bubble_fraction

    out = run_json(["pipeline", "--schedule", "interleaved-1f1b", "--virtual-stages", "8", "--pipeline-stages", "16",
                    "--n-layer", "1024", "--model", "tiny", "--global-batch", "4096", "--micro-batch", "1", "--json"],
                   capsys)
    assert out["run"] == "formula" and out["bubble_fraction"] == bubble_fraction(16, 4096, "interleaved-1f1b", 8)
    assert out["step_time"] == pytest.approx(4096 * 3 / (1 - out["bubble_fraction"]))


@pytest.mark.parametrize("extra, why", [
    (["--schedule", "interleaved-1f1b", "--virtual-stages", "2"], "单进程实测（--run local）只重放 GPipe 和 1F1B"),
    (["--schedule", "zero-bubble"], "单进程实测（--run local）只重放 GPipe 和 1F1B"),
    (["--tensor-parallel", "2"], "tensor_parallel = 2：实测运行只切流水线阶段"),
    (["--context-parallel", "2"], "context_parallel = 2：实测运行只切流水线阶段"),
])
def test_a_run_that_cannot_be_made_shows_the_simulator_marked_modelled(extra, why, capsys):
    """No torch run starts: the simulator's answer, marked 模型推算, with why in one line."""
    base = ["pipeline", "--model", "tiny", "--n-layer", "4", "--global-batch", "8", "--micro-batch", "2",
            "--pipeline-stages", "2", "--run", "local"]
    out = run_json([*base, *extra, "--json"], capsys)
    assert out["run"] == "simulated" and out["modelled"].startswith("模型推算：") and why in out["modelled"]
    assert out["estimated_cost"] is None
    assert main([*base, *extra]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"说明          {out['modelled']}\n") and "（模拟器，模型推算）" in text


def test_the_cli_and_the_local_run_agree_on_what_runs_locally():
    from batchlab.apps.cli import LOCAL_SCHEDULES
    from batchlab.measure import pipeline_local

    assert LOCAL_SCHEDULES == pipeline_local.LOCAL_SCHEDULES


@pytest.mark.parametrize("args, reason", [
    (["--schedule", "interleaved-1f1b"], "virtual_stages = 1：交错式 1F1B 要求每张卡放 ≥ 2 段模型"),
    (["--schedule", "interleaved-1f1b", "--virtual-stages", "2", "--global-batch", "40"],
     "num_microbatches = 10：交错式 1F1B 要求微批次数是流水线阶段数 pipeline_stages = 4 的整数倍"),
    (["--schedule", "interleaved-1f1b", "--virtual-stages", "5"], "的层数 n_layer = 48 不能被"),
    (["--virtual-stages", "2"], "virtual_stages = 2：1F1B 每张卡只放一段模型"),
    (["--schedule", "zero-bubble", "--virtual-stages", "3"], "virtual_stages = 3：零气泡调度只有 ZB-H1"),
    (["--sequence-parallel"], "sequence_parallel = True：序列并行切分的是张量并行组内的激活，需要 tensor_parallel > 1"),
    (["--tensor-parallel", "2"], "注意力头数 n_head = 25 不能被 tensor_parallel = 2 整除"),
    (["--tensor-parallel", "0"], "tensor_parallel = 0：必须是 ≥ 1 的整数"),
    (["--tensor-parallel", str(10**30)], "tensor_parallel = 1000000000000000000000000000000 超过了 上限 = 1024"),
    (["--context-parallel", "-1"], "context_parallel = -1：必须是 ≥ 1 的整数"),
    (["--context-parallel", "3"], "seq_len = 1024 不能被 2 × context_parallel = 6 整除"),
    (["--virtual-stages", "nan"], "--virtual-stages 的值 'nan' 不是整数"),
    (["--schedule", "zb-v"], "--schedule = 'zb-v'：只能取"),
])
@pytest.mark.parametrize("command", ["plan", "tune", "pipeline"])
def test_hostile_schedule_and_parallel_flags_are_refused_in_one_line(command, args, reason):
    base = ["--global-batch", "64", "--micro-batch", "2", "--data-parallel", "2", "--pipeline-stages", "4"]
    proc = subprocess.run([sys.executable, "-m", "batchlab", command, *base, *args], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and reason in proc.stderr and "Traceback" not in proc.stderr


def test_pipeline_runs_interleaved_1f1b_on_processes(capsys):
    """The multi-process run takes every schedule: interleaved 1F1B with two chunks per rank, measured."""
    out = run_json(["pipeline", "--model", "tiny", "--n-layer", "4", "--d-model", "64", "--seq-len", "32",
                    "--global-batch", "8", "--micro-batch", "2", "--pipeline-stages", "2", "--schedule",
                    "interleaved-1f1b", "--virtual-stages", "2", "--dropout", "0", "--run", "distributed", "--json"],
                   capsys)
    assert out["run"] == "distributed" and out["modelled"] is None and out["step_time_unit"] == "seconds"
    assert len(out["peak_in_flight"]) == 2 and out["peak_in_flight_unit"] == "chunks of 1 layer"
    assert 0 < out["bubble_fraction"] < 1 and out["estimated_cost"] is not None


RAMP = ["plan", "--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4", "--data-parallel", "2"]


def test_plan_lists_the_ramp_stages_the_formula_lists(capsys):
    """``--rampup-batch-size`` prints the ramp of :func:`batchlab.formulas.rampup.ramp_stages` under the job the
    other flags describe: the lecture's case ramps 16 → 64 and its 1F1B bubble falls 42.9% → 15.8%."""
    from batchlab.apps.cli import build_parser
    from batchlab.apps.job_commands import job_from_args
    from batchlab.formulas.rampup import Rampup, ramp_stages

    out = run_json([*RAMP, "--rampup-batch-size", "16", "16", "6000", "--json"], capsys)
    expected = ramp_stages(job_from_args(build_parser().parse_args(RAMP)), Rampup(16, 16, 6000, 64))
    assert out["rampup"]["stages"] == [stage.to_dict() for stage in expected]
    assert [s["num_microbatches"] for s in out["rampup"]["stages"]] == [4, 8, 12, 16]
    assert out["bubble_fraction"] == out["rampup"]["stages"][-1]["bubble_fraction"]  # the target is the plan
    assert main(RAMP + ["--rampup-batch-size", "16", "16", "6000"]) == 0
    text = capsys.readouterr().out
    assert "批大小爬升  --rampup-batch-size 16 16 6000：4 个阶段，每次增加间隔 2,000 个样本" in text
    rows = [line.split() for line in text.splitlines()[-4:]]
    assert rows[0] == ["16", "0", "2,000", "125", "4", "42.9%"]
    assert rows[-1] == ["64", "6,000", "（其余）", "16", "15.8%"]
    assert main(RAMP + ["--rampup-batch-size", "4", "2", "6000"]) == 0  # a stage the job refuses: its own line
    text = capsys.readouterr().out
    assert any(line.split()[:5] == ["8", "400", "200", "25", "2"] and "不能运行：num_microbatches = 2：1F1B 要求" in line
               for line in text.splitlines())
    assert "global_batch = 6 不能被 micro_batch_size × data_parallel = 2 × 2 = 4 整除" in text
    assert "rampup" not in run_json([*RAMP, "--json"], capsys)  # without the flag, no ramp


@pytest.mark.parametrize("values, reason", [
    (["100", "16", "6000"], "rampup_start = 100：爬升的起始批次必须小于目标 global_batch = 64"),
    (["64", "16", "6000"], "rampup_start = 64：爬升的起始批次必须小于目标 global_batch = 64"),
    (["16", "7", "6000"], "global_batch − rampup_start = 48 不能被 rampup_increment = 7 整除"),
    (["0", "16", "6000"], "rampup_start = 0：必须是 ≥ 1 的整数"),
    (["16", "-1", "6000"], "rampup_increment = -1：必须是 ≥ 1 的整数"),
    (["16", "16", "0"], "rampup_samples = 0：必须是 ≥ 1 的整数"),
    (["16", "16", str(10**30)], "rampup_samples = 1000000000000000000000000000000 超过了 上限 = 9007199254740992"),
    (["16", "16", "nan"], "--rampup-batch-size 的值 'nan' 不是整数"),
    (["16", "abc", "6000"], "--rampup-batch-size 的值 'abc' 不是整数"),
    (["16", "16"], "--rampup-batch-size 需要 3 个值"),
    (["16", "16", "6000", "1"], "不认识的参数 1"),
])
def test_a_hostile_ramp_is_refused_in_one_line(values, reason):
    proc = subprocess.run([sys.executable, "-m", "batchlab", *RAMP, "--rampup-batch-size", *values],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and reason in proc.stderr and "Traceback" not in proc.stderr


def test_a_ramp_of_too_many_stages_is_refused_in_one_line(capsys):
    argv = ["plan", "--global-batch", "1048576", "--micro-batch", "1", "--rampup-batch-size", "1", "1", "1000"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "爬升阶段数 (global_batch − rampup_start) / rampup_increment + 1 = 1048576 超过了 上限 = 1024" in err


# ── issue 40: --n-head, the 32-head variant of gpt2-xl that tensor parallelism splits ────────────

VARIANT = [*CASE[1:-1], "--micro-batch", "2", "--n-head", "32", "--tensor-parallel", "2", "--data-parallel", "1"]
"""Chapter 4.5's re-plan: the case on its 8 cards with t = 2 taken out of the data parallelism, on gpt2-xl with
32 heads of 50 dims (its 25 heads refuse t = 2)."""


def test_n_head_plans_the_32_head_variant_with_tensor_parallel_2(capsys):
    from dataclasses import replace

    from batchlab.apps.job_commands import plan_report
    from batchlab.lecture.replan import REPLAN_MODEL, replanned

    out = run_json(["plan", *VARIANT, "--json"], capsys)
    assert (out["model"], out["n_layer"], out["d_model"], out["n_head"]) == ("gpt2-xl", 48, 1600, 32)
    assert out["tensor_parallel"] == 2 and out["data_parallel"] == 1 and out["devices"] == 8
    assert out["params"] == PUBLISHED_PARAMS["gpt2-xl"]  # the heads cut h, the weights stay h × h
    expected = plan_report(replanned(replace(CASE_STUDY.job, model=REPLAN_MODEL, micro_batch_size=2), 2))
    assert out == json.loads(json.dumps(expected))  # the chapter's job, field by field
    assert main(["plan", *VARIANT]) == 0
    assert "gpt2-xl（48 层，宽度 1600，32 个注意力头；1,557,611,200 个参数）" in capsys.readouterr().out
    assert run_json([*CASE, "--micro-batch", "2"], capsys)["n_head"] == 25  # the preset's own, in the JSON too
    # without --n-head the same line is gpt2-xl's 25 heads, which t = 2 cannot split
    assert main(["plan", *[a for a in VARIANT if a not in ("--n-head", "32")]]) == 2
    assert "gpt2-xl 的注意力头数 n_head = 25 不能被 tensor_parallel = 2 整除" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["tune", "pipeline"])
def test_tune_and_pipeline_take_n_head_and_report_it(command, capsys):
    extra = ["--link-gbs", "200"] if command == "tune" else []
    out = run_json([command, *VARIANT, *extra, "--json"], capsys)
    assert out["n_head"] == 32 and out["tensor_parallel"] == 2
    assert main([command, *VARIANT, *extra]) == 0
    assert "gpt2-xl（48 层，宽度 1600，32 个注意力头）" in capsys.readouterr().out


def test_n_head_lets_a_width_the_presets_heads_do_not_divide(capsys):
    """--d-model 1024 is no width for 25 heads; with --n-head 16 it is (gpt2-medium's shape, 48 layers)."""
    base = ["plan", "--global-batch", "8", "--micro-batch", "1", "--d-model", "1024"]
    assert main(base) == 2
    assert "d_model = 1024 不能被 n_head = 25 整除" in capsys.readouterr().err
    out = run_json([*base, "--n-head", "16", "--json"], capsys)
    assert (out["d_model"], out["n_head"]) == (1024, 16)


@pytest.mark.parametrize("args, reason", [
    (["--n-head", "0"], "n_head = 0：必须是 ≥ 1 的整数"),
    (["--n-head", "-1"], "n_head = -1：必须是 ≥ 1 的整数"),
    (["--n-head", "x"], "--n-head 的值 'x' 不是整数"),
    (["--n-head", "1.5"], "--n-head 的值 '1.5' 不是整数"),
    (["--n-head", "7"], "d_model = 1600 不能被 n_head = 7 整除"),
    (["--n-head", str(2**63)], "d_model = 1600 不能被 n_head = 9223372036854775808 整除"),
    (["--n-head", "32", "--tensor-parallel", "3"], "gpt2-xl 的注意力头数 n_head = 32 不能被 tensor_parallel = 3 整除"),
    (["--n-head", "32", "--d-model", "1000"], "d_model = 1000 不能被 n_head = 32 整除"),
    (["--n-head"], "--n-head 需要一个值"),
])
def test_a_bad_n_head_is_refused_in_one_line(args, reason):
    base = ["plan", "--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4"]
    proc = subprocess.run([sys.executable, "-m", "batchlab", *base, *args], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and reason in proc.stderr and "Traceback" not in proc.stderr


def test_help_names_n_head_and_the_ramps_status(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per flag: argparse wraps at the terminal, hyphens included
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith("--n-head N_HEAD") and "注意力头数" in line for line in lines)
    ramp = lines[next(i for i, line in enumerate(lines) if line.strip().startswith("--rampup-batch-size")) + 1]
    assert "在 PR #4411 之前的算法" in ramp  # not a working Megatron-LM flag: ignored there since #4411
    assert "如今的 Megatron-LM 忽略这个参数，改用 --step-batch-size-schedule" in ramp


def test_the_readmes_n_head_example_plans_t_2(capsys):
    """The README's --n-head line is the variant above, and it runs."""
    import re

    from booktools import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.search(r"batchlab plan (--model gpt2-xl --n-head 32 [^#]*?)#", readme, re.S)
    assert command, "README 里找不到 --n-head 的示例"
    flags = command.group(1).replace("\\", " ").split()
    out = run_json(["plan", *flags, "--json"], capsys)
    assert (out["n_head"], out["tensor_parallel"], out["devices"]) == (32, 2, 8)
    assert out == run_json(["plan", *VARIANT, "--json"], capsys)
