"""Real pipelines of the GPT (batchlab.measure.pipeline_local): the split model computes what the GPT computes,
one process replaying a schedule gives gradient accumulation's gradients and a timeline that keeps the
schedule's rules, and p processes on torch.distributed.pipelining give the same gradients."""
import json
import multiprocessing
import subprocess
import sys

import psutil
import pytest
import torch

import batchlab.measure.pipeline_distributed as pipeline_distributed
from dataclasses import replace

from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import (in_flight_chunks, in_flight_microbatches, placement_of,
                                                  schedule_order, virtual_stage)
from batchlab.formulas.presets import get_config
from batchlab.measure import pipeline_torchrun
from batchlab.measure.model import GPT, build_model
from batchlab.measure.pipeline_distributed import check_torch_schedule, rank_chunks, run_pipeline_distributed
from batchlab.measure.pipeline_local import pipeline_batch, run_pipeline_local, split_model

CONFIG = get_config("tiny", n_layer=4)


def job(p, m, b=1, seq=8, schedule="1f1b", config=CONFIG, **fields):
    """The job of a run: p stages, m micro-batches of b sequences of seq tokens."""
    return Job(config, seq_len=seq, global_batch=m * b, micro_batch_size=b, pipeline_stages=p, schedule=schedule,
               **fields)


def accumulated_grads(job, seed=0):
    """Plain gradient accumulation over the job's m micro-batches (its batch and weights from seed): the reference."""
    model, m = build_model(job, seed), job.num_microbatches
    inputs, targets = pipeline_batch(job, seed)
    for x, y in zip(inputs.tensor_split(m), targets.tensor_split(m)):
        (model.loss(x, y) / m).backward()
    return {name: p.grad for name, p in model.named_parameters()}


def assert_same_grads(got, want, atol=1e-6):
    assert set(got) == set(want)
    for name in want:
        assert torch.allclose(got[name], want[name], atol=atol, rtol=0), name


def assert_schedule_rules(timeline, schedule, p, m):
    keys = [(op.kind, op.stage, op.microbatch) for op in timeline.ops]
    assert len(keys) == 2 * p * m and set(keys) == {(k, s, i) for k in "FB" for s in range(p) for i in range(m)}
    end = {(op.kind, op.stage, op.microbatch): op.end for op in timeline.ops}
    for op in timeline.ops:
        assert 0 <= op.start < op.end
        if op.kind == "F" and op.stage > 0:
            assert op.start >= end[("F", op.stage - 1, op.microbatch)]
        if op.kind == "B":
            dep = ("B", op.stage + 1, op.microbatch) if op.stage < p - 1 else ("F", op.stage, op.microbatch)
            assert op.start >= end[dep]
    for s in range(p):  # one op at a time per stage
        mine = sorted((op for op in timeline.ops if op.stage == s), key=lambda op: op.start)
        assert all(a.end <= b.start for a, b in zip(mine, mine[1:]))
    assert timeline.peak_in_flight() == in_flight_microbatches(schedule, p, m)


def chunk_rule_breaks(timeline, job):
    """What a measured timeline of ``job`` with chunks breaks, as a list of strings (empty: none): every
    (kind, rank, chunk, micro-batch) once (W only when the schedule splits the backward); F(k, i) after F(k−1, i),
    B(k, i) after B(k+1, i) (the last virtual stage: after F(k, i)), W(k, i) after B(k, i), k the virtual stage of
    (rank, chunk); one op at a time per rank; each rank's ops in the simulator's order (schedule_order: torch's)."""
    p, m, v, schedule = job.pipeline_stages, job.num_microbatches, job.virtual_stages, job.schedule
    placement, kinds = placement_of(schedule, v), "FBW" if schedule == "zero-bubble" else "FB"
    breaks = []
    keys = [(op.kind, op.stage, op.chunk, op.microbatch) for op in timeline.ops]
    if sorted(keys) != sorted((k, s, c, i) for k in kinds for s in range(p) for c in range(v) for i in range(m)):
        breaks.append("ops")
    end = {(op.kind, virtual_stage(op.stage, op.chunk, p, placement), op.microbatch): op.end for op in timeline.ops}
    last = p * v - 1
    for op in timeline.ops:
        k, i = virtual_stage(op.stage, op.chunk, p, placement), op.microbatch
        dep = {"F": ("F", k - 1, i) if k > 0 else None, "B": ("B", k + 1, i) if k < last else ("F", k, i),
               "W": ("B", k, i)}[op.kind]
        if not 0 <= op.start < op.end or (dep is not None and op.start < end.get(dep, float("inf"))):
            breaks.append(f"dependency of {op}")
    for s, order in enumerate(schedule_order(schedule, p, m, v)):
        mine = sorted((op for op in timeline.ops if op.stage == s), key=lambda op: op.start)
        if not all(a.end <= b.start for a, b in zip(mine, mine[1:])):
            breaks.append(f"rank {s} overlaps")
        if [(op.kind, op.microbatch, op.chunk) for op in mine] != [(e[0], e[1], e[2] if len(e) > 2 else 0) for e in order]:
            breaks.append(f"rank {s} order")
    if timeline.peak_in_flight() != in_flight_chunks(schedule, p, m, v):
        breaks.append("peak in flight")
    return breaks


# ── split_model ───────────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("p, method", [(1, "uniform"), (2, "uniform"), (3, "uniform"), (4, "parameters"), (4, "compute")])
def test_stages_compose_to_the_gpt(p, method, tie):
    model = GPT(get_config("tiny", n_layer=4, tie_embeddings=tie))
    x, y = pipeline_batch(job(1, 2, 2, config=model.config))
    stages = split_model(model, p, method)
    h = x
    for stage in stages[:-1]:
        h = stage(h)
    assert torch.equal(stages[-1](h), model(x))
    assert torch.equal(stages[-1](h, y), model.loss(x, y))
    # The GPT's own parameters, under the GPT's names; only the tied matrix sits on two stages.
    names = [name for stage in stages for name, _ in stage.named_parameters()]
    assert set(names) == {name for name, _ in model.named_parameters()}
    assert sorted(set(n for n in names if names.count(n) > 1)) == (["wte.weight"] if tie and p > 1 else [])
    params = dict(model.named_parameters())
    assert all(param is params[name] for stage in stages for name, param in stage.named_parameters())


def test_split_model_rejects():
    with pytest.raises(ValueError, match="pipeline_stages = 5 超过了 tiny 的层数 n_layer = 4"):
        split_model(GPT(CONFIG), 5)
    with pytest.raises(ValueError, match="method = 'even'"):
        split_model(GPT(CONFIG), 2, "even")
    with pytest.raises(ValueError, match="必须是 batchlab.measure.model.GPT"):
        split_model(torch.nn.Linear(2, 2), 2)


# ── one process ───────────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m, tie", [(2, 4, True), (4, 4, True), (4, 6, True), (2, 3, False)])
def test_local_pipeline_gives_accumulated_gradients(schedule, p, m, tie):
    run = job(p, m, 2, 12, schedule, config=get_config("tiny", n_layer=4, tie_embeddings=tie))
    result = run_pipeline_local(run, seed=1)
    assert result.job is run
    assert_same_grads(result.grads, accumulated_grads(run, seed=1))
    assert result.loss == pytest.approx(build_model(run, 1).loss(*pipeline_batch(run, 1)).item(), abs=1e-5)


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_stages_recompute_as_the_gpt_does(recompute):
    run = job(2, 4, recompute=recompute)
    result = run_pipeline_local(run)
    assert_same_grads(result.grads, accumulated_grads(replace(run, recompute="none")))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_local_timeline_keeps_the_schedule(schedule):
    p, m = 4, 8
    result = run_pipeline_local(job(p, m, schedule=schedule))
    for timeline in (result.timeline, result.replayed):
        assert (timeline.schedule, timeline.pipeline_stages, timeline.num_microbatches) == (schedule, p, m)
        assert_schedule_rules(timeline, schedule, p, m)
    ops = sorted(result.timeline.ops, key=lambda op: op.start)
    assert ops[0].start == 0.0
    assert all(a.end <= b.start for a, b in zip(ops, ops[1:]))  # one process: one op at a time
    # The same durations, replayed on p devices, overlap: the step gets shorter.
    assert result.replayed.makespan < result.timeline.makespan
    assert result.replayed.idle_fraction < result.timeline.idle_fraction


def test_warm_up_and_several_steps_replay_each_ops_median():
    """4.4's measured timeline: a discarded warm-up step, then each op's median over the timed steps; the gradients
    stay gradient accumulation's (every step starts from zeroed gradients on the same weights and data)."""
    run = job(4, 4, 2, 12)
    result = run_pipeline_local(run, seed=1, steps=3, warmup=1)
    assert result.warmup == 1 and len(result.durations) == 3
    assert_same_grads(result.grads, accumulated_grads(run, seed=1))
    keys = {(k, s, i) for k in "FB" for s in range(4) for i in range(4)}
    assert all(set(step) == keys for step in result.durations)
    replayed = {(op.kind, op.stage, op.microbatch): op.end - op.start for op in result.replayed.ops}
    for key in keys:
        assert replayed[key] == pytest.approx(sorted(step[key] for step in result.durations)[1])
    assert_schedule_rules(result.replayed, "1f1b", 4, 4)
    with pytest.raises(ValueError, match="steps"):
        run_pipeline_local(run, steps=0)


def test_distributed_timeline_is_the_median_of_the_timed_steps():
    """merge_ranks shows each op at its median over the timed steps, not the last step (which a busy machine may
    have slowed) nor the warm-up."""
    from batchlab.measure.pipeline_distributed import RankResult, RankStep, merge_ranks

    run = job(1, 1)
    lengths = [5.0, 1.0, 9.0, 2.0]  # the warm-up, then three timed steps of 1, 9 and 2 s
    begins = [0.0, 10.0, 20.0, 40.0]
    steps = tuple(RankStep(b, b + d, (("F", 0, b, b + d / 3, 0), ("B", 0, b + d / 3, b + d, 0)))
                  for b, d in zip(begins, lengths))
    merged = merge_ranks([RankResult(rank=0, ready=0.0, steps=steps, grads={}, loss=1.0)], run)
    assert merged.step_seconds == (1.0, 9.0, 2.0)
    assert merged.timeline.makespan == pytest.approx(2.0)   # F ends at median(1/3, 3, 2/3), B at median(1, 9, 2)
    f, b = sorted(merged.timeline.ops, key=lambda op: op.start)
    assert (f.start, f.end, b.start, b.end) == pytest.approx((0.0, 2 / 3, 2 / 3, 2.0))


def test_a_given_model_is_the_jobs_and_keeps_the_gradients():
    run, model = job(2, 4), GPT(CONFIG)
    result = run_pipeline_local(run, model)
    assert all(torch.equal(result.grads[name], p.grad) for name, p in model.named_parameters())
    with pytest.raises(ValueError, match="与作业的"):
        run_pipeline_local(run, GPT(get_config("tiny", n_layer=4, d_model=32)))
    with pytest.raises(ValueError, match="recompute = 'full'"):
        run_pipeline_local(run, GPT(CONFIG, recompute="full"))


def test_local_pipeline_rejects():
    with pytest.raises(ValueError, match=r"num_microbatches = 2：1F1B 要求微批次数 ≥ 流水线阶段数 pipeline_stages = 4"):
        job(4, 2)  # the job says so when it is made: no run gets that far
    run_pipeline_local(job(4, 2, schedule="gpipe"))  # GPipe has no such rule
    # dropout is the job's (one setting): a pipeline run refuses it, and says why
    with pytest.raises(ValueError, match="dropout = 0.1：流水线实测要求 dropout = 0（它的梯度要与梯度累积逐一比对"):
        run_pipeline_local(job(2, 2, dropout=0.1))
    with pytest.raises(ValueError, match="dropout = 0.1：流水线实测要求 dropout = 0"):
        run_pipeline_local(job(2, 2, config=get_config("tiny", n_layer=4, dropout=0.1)))
    with pytest.raises(ValueError, match="precision = 'bf16-mixed'"):
        run_pipeline_local(job(2, 2, precision="bf16-mixed"))
    with pytest.raises(ValueError, match="必须是 Job"):
        run_pipeline_local(CONFIG)


# ── one process per stage ─────────────────────────────────────────────────────────────────────────

def new_children(before):
    return [c for c in psutil.Process().children(recursive=True) if c.pid not in before and c.is_running()
            and c.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_distributed_pipeline_matches_local(schedule):
    p, m, run = 2, 4, job(2, 4, 2, 12, schedule)
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    # timeout: a hang guard (it raises TimeoutError), not a speed criterion
    result = run_pipeline_distributed(run, steps=2, start_method="fork", timeout=120)
    assert multiprocessing.active_children() == [] and new_children(before) == []

    local = run_pipeline_local(run)
    assert result.job is run
    assert_same_grads(result.grads, local.grads)  # the tied wte.weight: both ranks' parts summed
    assert result.loss == pytest.approx(local.loss, abs=1e-5)
    timeline = result.timeline
    assert (timeline.schedule, timeline.pipeline_stages, timeline.num_microbatches) == (schedule, p, m)
    assert_schedule_rules(timeline, schedule, p, m)
    assert min(op.start for op in timeline.ops) == 0.0
    assert len(result.step_seconds) == 2 and all(s > 0 for s in result.step_seconds)
    assert result.start_seconds > 0 and result.warmup_seconds > 0


CHUNKED = get_config("tiny", n_layer=8)  # 8 layers: p · v = 2 · 2 or 4 · 2 chunks


@pytest.mark.slow
@pytest.mark.parametrize("schedule, p, v, m, tie", [("interleaved-1f1b", 2, 2, 4, True), ("zero-bubble", 2, 1, 4, True),
                                                    ("zero-bubble", 2, 2, 4, True), ("zero-bubble", 2, 2, 3, False),
                                                    ("interleaved-1f1b", 4, 2, 4, False)])
def test_interleaved_and_zero_bubble_give_the_accumulated_gradients(schedule, p, v, m, tie):
    """Several model chunks per rank (interleaved 1F1B: rank r holds virtual stages r, r + p; ZB-V: r and 2p − 1 − r,
    the head and the embedding both on rank 0) and the split backward (B then W): the gradients are gradient
    accumulation's, the loss the mean over micro-batches, and the measured timeline keeps the schedule's order."""
    config = get_config("tiny", n_layer=4 * v if p == 2 else 8, tie_embeddings=tie)
    run = job(p, m, 2, 12, schedule, config=config, virtual_stages=v)
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    result = run_pipeline_distributed(run, steps=2, seed=1, timeout=120)  # timeout: a hang guard
    assert multiprocessing.active_children() == [] and new_children(before) == []
    assert_same_grads(result.grads, accumulated_grads(run, seed=1))
    assert result.loss == pytest.approx(build_model(run, 1).loss(*pipeline_batch(run, 1)).item(), abs=1e-5)
    timeline = result.timeline
    assert (timeline.schedule, timeline.pipeline_stages, timeline.num_microbatches, timeline.virtual_stages) == (
        schedule, p, m, v)
    assert chunk_rule_breaks(timeline, run) == []
    assert {op.kind for op in timeline.ops} == (set("FBW") if schedule == "zero-bubble" else set("FB"))


def test_chunk_rules_catch_a_broken_timeline():
    """The check above fails on a timeline that breaks each rule (built from the simulator's, which keeps them)."""
    from batchlab.formulas.pipeline_schedules import Timeline, pipeline_timeline

    run = job(2, 4, 2, 12, "zero-bubble", config=CHUNKED, virtual_stages=2)
    good = pipeline_timeline("zero-bubble", 2, 4, virtual_stages=2)
    assert chunk_rule_breaks(good, run) == []
    ops = list(good.ops)
    first_w = next(k for k, op in enumerate(ops) if op.kind == "W")
    faults = {
        "a W dropped": ops[:first_w] + ops[first_w + 1:],
        "a W before its B": [replace(op, start=-1.0, end=-0.5) if k == first_w else op for k, op in enumerate(ops)],
        "a chunk mislabelled": [replace(op, chunk=1 - op.chunk) if k == 0 else op for k, op in enumerate(ops)],
        "two ops at once": [replace(op, end=op.end + 0.5) if k == 0 else op for k, op in enumerate(ops)],
    }
    for name, broken in faults.items():
        assert chunk_rule_breaks(Timeline("zero-bubble", 2, 4, tuple(broken), 2), run), name


def test_rank_chunks_place_the_virtual_stages():
    assert [rank_chunks(job(4, 8, schedule="interleaved-1f1b", config=CHUNKED, virtual_stages=2), r)
            for r in range(4)] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert [rank_chunks(job(4, 4, schedule="zero-bubble", config=CHUNKED, virtual_stages=2), r)
            for r in range(4)] == [[0, 7], [1, 6], [2, 5], [3, 4]]  # V: the head's chunk on rank 0
    assert rank_chunks(job(4, 4, schedule="zero-bubble", config=CHUNKED), 2) == [2]
    # the layers each rank runs are the ones the job's model counts on that device (Job.stages)
    for schedule in ("interleaved-1f1b", "zero-bubble"):
        run, modules = job(4, 8, schedule=schedule, config=CHUNKED, virtual_stages=2), split_model(GPT(CHUNKED), 8)
        for r in range(4):
            held = [modules[k] for k in rank_chunks(run, r)]
            assert [list(chunk.layers) for chunk in held] == [list(chunk) for chunk in run.stages[r].chunks]
            assert (any(c.has_embedding for c in held), any(c.has_head for c in held)) == (
                run.stages[r].has_embedding, run.stages[r].has_head)


def test_a_torch_without_the_schedule_refuses_it_before_starting_processes(monkeypatch):
    """A torch whose pipelining lacks the schedule's class (older than the zero-bubble ones) is told so in one line
    naming the schedule, before any process starts; the job's own rules are the job's (made before the run)."""
    class OldTorch:  # a torch.distributed.pipelining with none of the schedule classes
        pass

    zbv = job(2, 4, schedule="zero-bubble", config=CHUNKED, virtual_stages=2)
    assert check_torch_schedule(zbv) is zbv
    monkeypatch.setattr(pipeline_distributed, "pipelining", OldTorch())
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    with pytest.raises(ValueError, match=r"^schedule = 'zero-bubble'：torch .* 没有 ScheduleZBVZeroBubble，零气泡 无法实测"):
        run_pipeline_distributed(zbv)
    assert new_children(before) == []
    with pytest.raises(ValueError, match="没有 ScheduleInterleaved1F1B"):
        check_torch_schedule(job(2, 4, schedule="interleaved-1f1b", config=CHUNKED, virtual_stages=2))


def test_local_replay_refuses_the_chunked_schedules():
    for schedule, v in (("interleaved-1f1b", 2), ("zero-bubble", 1), ("zero-bubble", 2)):
        with pytest.raises(ValueError, match=f"^schedule = '{schedule}'：单进程回放只重放 GPipe 和 1F1B.*run_pipeline_distributed"):
            run_pipeline_local(job(2, 4, schedule=schedule, config=CHUNKED, virtual_stages=v))


@pytest.mark.slow
def test_a_failing_rank_is_reported_and_every_process_ends(monkeypatch):
    real = pipeline_distributed.run_rank

    def fail_on_rank_1(rank, *args, **kwargs):
        if rank == 1:
            raise ArithmeticError("rank 1 broke on purpose")
        return real(rank, *args, **kwargs)

    monkeypatch.setattr(pipeline_distributed, "run_rank", fail_on_rank_1)  # forked ranks inherit the patch
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    with pytest.raises(RuntimeError, match="(?s)流水线的子进程出错.*rank 1.*rank 1 broke on purpose"):
        run_pipeline_distributed(job(2, 4), start_method="fork", timeout=60)
    # rank 0 may list its own broken connection (a race with its termination on a loaded machine, seen in a
    # fresh-clone run with a core kept busy); waited for instead of terminated, the run would raise TimeoutError
    assert multiprocessing.active_children() == [] and new_children(before) == []


def test_distributed_pipeline_rejects_before_starting_processes():
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    with pytest.raises(ValueError, match="dropout = 0.1：流水线实测要求 dropout = 0"):
        run_pipeline_distributed(job(2, 4, dropout=0.1))
    with pytest.raises(ValueError, match="必须是 Job"):
        run_pipeline_distributed("tiny")
    with pytest.raises(ValueError, match="start_method = 'thread'"):
        run_pipeline_distributed(job(2, 4), start_method="thread")
    with pytest.raises(ValueError, match="backend = 'nccl'：CPU 上只能用 'gloo'"):
        run_pipeline_distributed(job(2, 4), backend="nccl")
    assert new_children(before) == []


@pytest.mark.slow
def test_command_line_without_torchrun(monkeypatch, capsys):
    monkeypatch.delenv("RANK", raising=False)
    assert pipeline_torchrun.main(["--pipeline-stages", "2", "--global-batch", "16", "--micro-batch", "4",
                                   "--n-layer", "2", "--seq-len", "8"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pipeline_stages"] == 2 and summary["num_microbatches"] == 4
    assert summary["bubble_formula"] == pytest.approx(1 / 5)
    assert 0 < summary["idle_fraction"] < 1
    # interleaved 1F1B, two chunks of one layer per rank; its closed form (p − 1)/(v·m + p − 1) = 1/9
    assert pipeline_torchrun.main(["--pipeline-stages", "2", "--global-batch", "16", "--micro-batch", "4",
                                   "--n-layer", "4", "--seq-len", "8", "--schedule", "interleaved-1f1b",
                                   "--virtual-stages", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["torch_schedule"], summary["virtual_stages"]) == ("ScheduleInterleaved1F1B", 2)
    assert summary["bubble_formula"] == pytest.approx(1 / 9)


def test_command_line_refuses_in_one_line(monkeypatch, capsys):
    """A job the flags cannot describe, or torch cannot run, is one line on stderr and exit code 2, before any
    process starts."""
    monkeypatch.delenv("RANK", raising=False)
    base = ["--pipeline-stages", "2", "--global-batch", "10", "--micro-batch", "2", "--n-layer", "4", "--seq-len", "8"]
    for extra, said in ((["--schedule", "zero-bubble"], "num_microbatches = 5：ZB-H1"),
                        (["--schedule", "interleaved-1f1b"], "virtual_stages = 1：交错式 1F1B"),
                        (["--schedule", "zero-bubble", "--virtual-stages", "3"], "virtual_stages = 3：零气泡")):
        assert pipeline_torchrun.main(base + extra) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_command_line_under_torchrun():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "batchlab.measure.pipeline_torchrun", "--pipeline-stages", "2", "--global-batch", "16",
           "--micro-batch", "4", "--n-layer", "2", "--seq-len", "8", "--schedule", "gpipe", "--device", "cpu"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["schedule"], summary["pipeline_stages"], summary["num_microbatches"]) == ("gpipe", 2, 4)
    assert len(summary["step_seconds"]) == 2


@pytest.mark.slow
def test_two_hosts_under_torchrun_give_the_accumulated_gradients(tmp_path):
    """The multi-host path nothing else runs: two `torchrun --nnodes 2` launches on this machine, one rank
    each, meeting at 127.0.0.1 (static rendezvous; the timeline aligned on barriers, not one clock)."""
    from batchlab.measure.pipeline_distributed import free_port

    port, grads = free_port(), tmp_path / "grads.pt"
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
              "-m", "batchlab.measure.pipeline_torchrun", "--pipeline-stages", "2", "--global-batch", "8",
              "--micro-batch", "2", "--n-layer", "4", "--seq-len", "8", "--schedule", "zero-bubble",
              "--virtual-stages", "2", "--device", "cpu",
              "--grads", str(grads)]  # every rank sends its gradients; rank 0 saves them
    hosts = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--node-rank", str(rank), *common],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    outs = [host.communicate(timeout=180) for host in hosts]
    assert [host.returncode for host in hosts] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    summary = json.loads(outs[0][0])
    assert (summary["pipeline_stages"], summary["num_microbatches"]) == (2, 4) and outs[1][0] == ""
    # ZB-V: two chunks per host in V placement (the head on rank 0), the backward split into B and W
    assert (summary["schedule"], summary["virtual_stages"], summary["torch_schedule"]) == (
        "zero-bubble", 2, "ScheduleZBVZeroBubble")
    assert_same_grads(torch.load(grads), accumulated_grads(
        job(2, 4, 2, 8, "zero-bubble", config=get_config("tiny", n_layer=4), virtual_stages=2)))


def test_a_gpt2_vocabulary_job_runs_on_uniform_ids_not_the_dense_chain():
    # the Markov chain is vocab² floats: at 50,257 tokens a run would need ~30 GB of host memory before its
    # first op; a run checks gradients and times, so uniform ids (seeded, the same on every rank) serve
    wide = Job(get_config("tiny", vocab_size=50257, n_layer=2), seq_len=8, global_batch=4, micro_batch_size=2,
               pipeline_stages=2, precision="fp32", dropout=0.0)
    x, y = pipeline_batch(wide, 3)
    assert x.shape == (4, 8) and int(x.max()) > 4096
    assert torch.equal(x, pipeline_batch(wide, 3)[0]) and torch.equal(x[:, 1:], y[:, :-1])
    run = run_pipeline_local(wide, seed=3)
    assert run.loss == pytest.approx(build_model(wide, 3).loss(x, y).item(), abs=1e-5)
