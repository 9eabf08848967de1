"""Pipeline micro-batch schedules as plain numbers: who runs what, when, and how much is idle.

Pure math, no torch. ``schedule_order`` lists each stage's operations in the order a schedule
issues them (GPipe: Huang et al. 2019; 1F1B: PipeDream-Flush, Narayanan et al. 2021), and
``simulate`` replays them under their data dependencies with given op costs.
"""
from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from batchlab.formulas.checks import at_most, one_of, positive, whole

__all__ = [
    "ScheduleName", "SCHEDULES", "VIRTUAL_STAGES_LIMIT", "BACKWARD_PER_FORWARD", "Op", "Timeline", "bubble_fraction",
    "in_flight_microbatches", "schedule_order", "MAX_SIMULATED_OPS", "simulable", "runnable", "check_runnable", "simulate", "pipeline_timeline",
    "median_durations", "median_timeline", "OUTLIER_FACTOR", "sibling_ratios", "outlier_ops",
]

ScheduleName = Literal["gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"]

BACKWARD_PER_FORWARD = 2
"""A backward pass costs twice its forward: the gradient with respect to the input and the one with
respect to the weights are one matmul each (Narayanan et al. 2021, §5.1). The simulator's default op
costs and the throughput model both read it."""
# The schedules' names in code (keys) and as readers see them (values); plots, widgets and the CLI
# read this one table.
SCHEDULES: dict[str, str] = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved-1f1b": "交错式 1F1B",
                             "zero-bubble": "零气泡"}
VIRTUAL_STAGES_LIMIT = 64
"""The most model chunks (virtual stages) one device may hold; far beyond Megatron-LM practice (2–8)."""


def bubble_fraction(pipeline_stages: int, num_microbatches: int) -> float:
    """Idle share of a pipeline step, (p − 1)/(m + p − 1), as in GPipe and the lecture (原文).

    With uniform stage costs, each of the p stages is busy for m slots out of m + p − 1. Plain
    arithmetic: the counts come from a validated :class:`~batchlab.formulas.batching.BatchPlan` or job.
    """
    return (pipeline_stages - 1) / (num_microbatches + pipeline_stages - 1)


def in_flight_microbatches(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int) -> list[int]:
    """Per stage i (0 = first), the most micro-batches whose activations it holds at once.

    GPipe runs every forward before any backward, so every stage holds all m. 1F1B lets stage i run
    p − i − 1 warm-up forwards, then alternates one forward with one backward, so it holds
    min(p − i, m). This count, not the global batch, multiplies a stage's activation memory (4.3).
    The simulator's :meth:`Timeline.peak_in_flight` must agree (a property test checks it).
    """
    one_of("schedule", schedule, SCHEDULES)
    p = whole("pipeline_stages", pipeline_stages)
    m = whole("num_microbatches", num_microbatches)
    if schedule == "gpipe":
        return [m] * p
    return [min(p - i, m) for i in range(p)]


@dataclass(frozen=True)
class Op:
    stage: int
    microbatch: int
    kind: Literal["F", "B"]
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    schedule: str
    pipeline_stages: int
    num_microbatches: int
    ops: tuple[Op, ...]

    @property
    def makespan(self) -> float:
        return max(op.end for op in self.ops)

    @property
    def idle_fraction(self) -> float:
        """The bubble read off this timeline: 1 − busy time / (stages × makespan). Equals the formula
        :func:`bubble_fraction` when op costs are uniform; with real (measured) costs it need not."""
        busy = sum(op.end - op.start for op in self.ops)
        return 1.0 - busy / (self.pipeline_stages * self.makespan)

    def peak_in_flight(self) -> list[int]:
        """Per stage, the most micro-batches whose activations are held at once (forward done,
        backward not yet): what decides activation memory in 4.3. Compare
        :func:`in_flight_microbatches`, the closed form."""
        by_stage: list[list[Op]] = [[] for _ in range(self.pipeline_stages)]
        for op in self.ops:  # one pass, not one per stage: p × ops was seconds at p = 10,000
            by_stage[op.stage].append(op)
        peaks = []
        for ops in by_stage:
            held = peak = 0
            for op in sorted(ops, key=lambda o: o.start):
                held += 1 if op.kind == "F" else -1
                peak = max(peak, held)
            peaks.append(peak)
        return peaks


def schedule_order(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int) -> list[list[tuple[str, int]]]:
    """Each stage's operations, in issue order, as ("F" | "B", microbatch) pairs."""
    one_of("schedule", schedule, SCHEDULES)
    p = whole("pipeline_stages", pipeline_stages)
    m = whole("num_microbatches", num_microbatches)
    if schedule == "gpipe":
        return [[("F", i) for i in range(m)] + [("B", i) for i in range(m)] for _ in range(p)]
    orders = []  # 1F1B
    for stage in range(p):
        warmup = min(p - stage - 1, m)
        order = [("F", i) for i in range(warmup)]
        for j in range(m - warmup):
            order += [("F", warmup + j), ("B", j)]
        order += [("B", j) for j in range(m - warmup, m)]
        orders.append(order)
    return orders


MAX_SIMULATED_OPS = 20_000
"""The most forward and backward ops (2·p·m) :func:`simulate` replays for one step, about 0.1 s here
whatever the split between p and m (the replay's work grows with the ops).
Longer steps are answered by the closed forms (:func:`bubble_fraction`, :func:`in_flight_microbatches`),
which the simulator agrees with (a property test)."""


def simulable(pipeline_stages: int, num_microbatches: int) -> bool:
    """Whether one step of p stages and m micro-batches is within :data:`MAX_SIMULATED_OPS`."""
    return 2 * pipeline_stages * num_microbatches <= MAX_SIMULATED_OPS


def _refusal(schedule: str, p: int, m: int, v: int) -> str | None:
    """The rule a valid (schedule, p, m, v) breaks, in the reader's words, or None: the one wording of each rule."""
    if schedule in ("gpipe", "1f1b") and v != 1:
        return (f"virtual_stages = {v}：{SCHEDULES[schedule]} 每张卡只放一段模型（virtual_stages = 1）；"
                "多段请用 interleaved-1f1b 或 zero-bubble")
    if schedule == "interleaved-1f1b" and v < 2:
        return "virtual_stages = 1：交错式 1F1B 要求每张卡放 ≥ 2 段模型（virtual_stages ≥ 2）"
    if schedule == "zero-bubble" and v not in (1, 2):
        return f"virtual_stages = {v}：零气泡调度只有 ZB-H1（virtual_stages = 1）和 ZB-V（virtual_stages = 2）"
    if schedule != "gpipe" and m < p:
        return (f"num_microbatches = {m}：{SCHEDULES[schedule]} 要求微批次数 ≥ 流水线阶段数 pipeline_stages = {p}"
                "（torch.distributed.pipelining 的对应调度同样拒绝 m < p）")
    if schedule == "interleaved-1f1b" and m % p:
        return (f"num_microbatches = {m}：交错式 1F1B 要求微批次数是流水线阶段数 pipeline_stages = {p} 的整数倍"
                "（Megatron-LM 的规则）")
    return None


def runnable(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int, virtual_stages: int = 1) -> bool:
    """The rule :func:`check_runnable` enforces, as a test on valid counts (it checks no argument)."""
    return _refusal(schedule, pipeline_stages, num_microbatches, virtual_stages) is None


def check_runnable(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int,
                   virtual_stages: int = 1) -> None:
    """Raise ValueError unless a real pipeline (:mod:`batchlab.measure.pipeline_local`) can run this schedule.

    One rule per schedule, one wording each:

    - GPipe and 1F1B hold one model chunk per device (v = 1).
    - 1F1B needs m ≥ p micro-batches. Its order above is defined for any m, but
      ``torch.distributed.pipelining.Schedule1F1B`` refuses m < p, and with m < p the steady 1F1B phase
      never starts (the schedule degenerates to GPipe), so both runtimes of 4.4 reject it. So do the
      interleaved and zero-bubble schedules.
    - Interleaved 1F1B holds v ≥ 2 chunks per device and needs m to be a multiple of p (Megatron-LM's
      rule; torch's flexible variant accepts more, the book keeps the stricter one its readers meet).
    - Zero bubble runs ZB-H1 with v = 1 and ZB-V with v = 2 (Qi et al. 2024).
    """
    one_of("schedule", schedule, SCHEDULES)
    p = whole("pipeline_stages", pipeline_stages)
    m = whole("num_microbatches", num_microbatches)
    v = whole("virtual_stages", virtual_stages)
    at_most("virtual_stages", v, VIRTUAL_STAGES_LIMIT, "上限")
    refusal = _refusal(schedule, p, m, v)
    if refusal:
        raise ValueError(refusal)


def simulate(
    orders: list[list[tuple[str, int]]],
    forward_time: float = 1.0,
    backward_time: float = float(BACKWARD_PER_FORWARD),
    durations: dict[tuple[str, int, int], float] | None = None,
) -> tuple[Op, ...]:
    """Replay per-stage orders: an op starts when its stage is free and its input has arrived.

    F(s, i) needs F(s−1, i); B(s, i) needs B(s+1, i), or F(s, i) on the last stage.
    Communication is free here; the measured pipelines of 4.4 add it back.

    ``durations`` (optional) gives each op its own cost, keyed ``(kind, stage, microbatch)``, e.g. the
    per-op times measured in one process by :func:`batchlab.measure.pipeline_local.run_pipeline_local`; it then
    replaces ``forward_time`` and ``backward_time`` and must cover every op.
    """
    forward_time = positive("forward_time", forward_time)
    backward_time = positive("backward_time", backward_time)
    p = len(orders)
    done: dict[tuple[str, int, int], float] = {}
    cursor = [0] * p
    free_at = [0.0] * p
    ops: list[Op] = []
    # Stages to look at again: all at first, then only those a finished op may have unblocked (F(s, i)
    # feeds stage s + 1, B(s, i) stage s − 1), so the work grows with the ops, not with p × the rounds
    # a backward takes to ripple back (sweeping every stage each round was 13 s at p = 10,000, m = 1).
    # An op's start depends only on its stage's previous op and its input, not on this visiting order.
    waiting = deque(range(p))
    queued = [True] * p
    while waiting:
        s = waiting.popleft()
        queued[s] = False
        while cursor[s] < len(orders[s]):
            kind, i = orders[s][cursor[s]]
            if kind == "F":
                dep = ("F", s - 1, i) if s > 0 else None
            else:
                dep = ("B", s + 1, i) if s < p - 1 else ("F", s, i)
            if dep is not None and dep not in done:
                break
            start = max(free_at[s], done[dep] if dep else 0.0)
            if durations is None:
                cost = forward_time if kind == "F" else backward_time
            elif (kind, s, i) in durations:
                cost = positive(f"durations[{(kind, s, i)!r}]", durations[(kind, s, i)])
            else:
                raise ValueError(f"durations 缺少操作 {(kind, s, i)!r}：必须为每个操作给出耗时")
            end = start + cost
            done[(kind, s, i)] = free_at[s] = end
            ops.append(Op(stage=s, microbatch=i, kind=kind, start=start, end=end))
            cursor[s] += 1
            fed = s + 1 if kind == "F" else s - 1
            if 0 <= fed < p and not queued[fed]:
                waiting.append(fed)
                queued[fed] = True
    if any(cursor[s] < len(orders[s]) for s in range(p)):
        raise ValueError("调度死锁：某个阶段在等待一个永远不会执行的操作")
    return tuple(ops)


def pipeline_timeline(
    schedule: ScheduleName,
    pipeline_stages: int,
    num_microbatches: int,
    forward_time: float = 1.0,
    backward_time: float = float(BACKWARD_PER_FORWARD),
) -> Timeline:
    """Simulated timeline of one optimizer step of ``schedule`` (ValueError beyond :data:`MAX_SIMULATED_OPS`)."""
    orders = schedule_order(schedule, pipeline_stages, num_microbatches)
    if not simulable(pipeline_stages, num_microbatches):
        raise ValueError(f"2 × pipeline_stages × num_microbatches = {2 * pipeline_stages * num_microbatches} 超过了"
                         f"模拟器一步重放的上限 {MAX_SIMULATED_OPS}：请用公式 bubble_fraction / in_flight_microbatches")
    return Timeline(schedule, pipeline_stages, num_microbatches, simulate(orders, forward_time, backward_time))


K = TypeVar("K", bound=Hashable)


def median_durations(steps: Sequence[Mapping[K, float]]) -> dict[K, float]:
    """Each op's median duration over several measured steps, ``steps`` one ``{op: seconds}`` each (the same
    ops in every step): what a timeline of a *typical* step replays (:func:`simulate` ``durations=``), so that
    one slow op of one step (a cold start, a busy machine) does not become the picture."""
    if not steps:
        raise ValueError("steps 为空：至少需要一步的实测时长")
    keys = set(steps[0])
    for k, step in enumerate(steps):
        if set(step) != keys:
            raise ValueError(f"steps[{k}] 的操作与 steps[0] 不同：每一步必须测到同样的操作")
    return {key: statistics.median(positive(f"steps[·][{key!r}]", step[key]) for step in steps)
            for key in steps[0]}


def median_timeline(steps: Sequence[Timeline]) -> Timeline:
    """A typical step of several measured ones (the same job, the same ops): each op starts and ends at the
    median of its start and its end over the steps, each step counted from its own earliest op, and the
    result again from its earliest op. One op slowed in one step (a process descheduled on a shared core)
    moves no median. Order is kept: an op that started after another ended in every step does so in the
    medians too (the sorted ends dominate the sorted starts), so each stage's ops still run one at a time."""
    if not steps:
        raise ValueError("steps 为空：至少需要一步的实测时间线")
    first = steps[0]
    keys = sorted((op.kind, op.stage, op.microbatch) for op in first.ops)   # as sibling_ratios keys them
    per_op: dict[tuple[str, int, int], tuple[list[float], list[float]]] = {key: ([], []) for key in keys}
    for k, step in enumerate(steps):
        if (step.schedule, step.pipeline_stages, step.num_microbatches) != (
                first.schedule, first.pipeline_stages, first.num_microbatches) or \
                sorted((op.kind, op.stage, op.microbatch) for op in step.ops) != keys:
            raise ValueError(f"steps[{k}] 与 steps[0] 不是同一个作业的一步：每一步必须有同样的操作")
        origin = min(op.start for op in step.ops)
        for op in step.ops:
            starts, ends = per_op[(op.kind, op.stage, op.microbatch)]
            starts.append(op.start - origin)
            ends.append(op.end - origin)
    medians = {key: (statistics.median(starts), statistics.median(ends)) for key, (starts, ends) in per_op.items()}
    origin = min(start for start, _ in medians.values())
    ops = tuple(Op(stage=stage, microbatch=mb, kind=kind, start=start - origin, end=end - origin)
                for (kind, stage, mb), (start, end) in sorted(medians.items(), key=lambda item: item[1][0]))
    return Timeline(first.schedule, first.pipeline_stages, first.num_microbatches, ops)


OUTLIER_FACTOR = 3.0
"""An op more than this many times the median of its siblings (same stage, same kind, the other micro-batches:
the same work on other data) is an outlier (:func:`outlier_ops`)."""


def sibling_ratios(timeline: Timeline) -> dict[tuple[str, int, int], float]:
    """Each op's duration over the median duration of its siblings: the ops of the same kind (F or B) on the
    same stage for the other micro-batches, which do the same work on other data. Keyed
    ``(kind, stage, microbatch)``; an op without siblings (one micro-batch) is left out."""
    groups: dict[tuple[str, int], list[Op]] = {}
    for op in timeline.ops:
        groups.setdefault((op.kind, op.stage), []).append(op)
    ratios = {}
    for ops in groups.values():
        for op in ops:
            others = [o.end - o.start for o in ops if o is not op]
            if others:
                ratios[(op.kind, op.stage, op.microbatch)] = (op.end - op.start) / statistics.median(others)
    return ratios


def outlier_ops(timeline: Timeline, factor: float = OUTLIER_FACTOR) -> tuple[tuple[str, int, int], ...]:
    """The ops (``(kind, stage, microbatch)``) that take more than ``factor`` × the median of their siblings
    (:func:`sibling_ratios`), slowest first. A measured timeline shown as typical must have none: one such op
    sets the makespan and the bubble read off it."""
    factor = positive("factor", factor)
    ratios = sibling_ratios(timeline)
    return tuple(sorted((key for key, r in ratios.items() if r > factor), key=lambda k: -ratios[k]))
