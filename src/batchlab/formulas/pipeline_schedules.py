"""Pipeline micro-batch schedules as plain numbers: who runs what, when, and how much is idle.

Pure math, no torch. ``schedule_order`` lists each device's operations in the order a schedule issues them
(GPipe, 1F1B; interleaved 1F1B and zero bubble as torch 2.13 does: :mod:`batchlab.formulas.schedule_orders`),
``simulate`` replays them under their data dependencies with given op costs, and the closed forms beside
it (:func:`bubble_fraction`, :func:`in_flight_chunks`) agree with it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from batchlab.formulas.checks import at_most, one_of, positive, whole
from batchlab.formulas.schedule_orders import (gpipe_order, interleaved_order, one_f_one_b_order, replay,
                                               zbh1_order, zbv_order)

__all__ = [
    "ScheduleName", "SCHEDULES", "schedule_label", "VIRTUAL_STAGES_LIMIT", "BACKWARD_PER_FORWARD", "Op", "op_key", "Timeline",
    "bubble_fraction", "in_flight_chunks", "in_flight_microbatches", "placement_of", "virtual_stage",
    "schedule_order", "op_count", "MAX_SIMULATED_OPS", "simulable", "runnable", "check_runnable", "simulate",
    "pipeline_timeline",
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


def schedule_label(schedule: str, virtual_stages: int = 1) -> str:
    """A schedule as every figure, table, explorer and the tuner name it: ``1F1B``, ``交错式 1F1B（v = 2）``,
    zero bubble by its two variants, ``零气泡（ZB-H1）`` (v = 1) and ``零气泡（ZB-V）`` (v = 2)."""
    if schedule == "zero-bubble":
        return f"{SCHEDULES[schedule]}（{'ZB-H1' if virtual_stages == 1 else 'ZB-V'}）"
    return SCHEDULES[schedule] + ("" if virtual_stages == 1 else f"（v = {virtual_stages}）")


def bubble_fraction(pipeline_stages: int, num_microbatches: int, schedule: ScheduleName = "1f1b",
                    virtual_stages: int = 1) -> float:
    """Idle share of a pipeline step under ``schedule`` with v = ``virtual_stages`` chunks per device.

    GPipe and 1F1B (the lecture, 原文): each of the p stages is busy for m slots out of m + p − 1, so
    (p − 1)/(m + p − 1). Interleaved 1F1B (Narayanan et al. 2021): the idle time per device shrinks to
    (p − 1)/v of one micro-batch's forward and backward, so ((p − 1)/v)/(m + (p − 1)/v) = (p − 1)/(v·m + p − 1).
    ZB-H1 (v = 1, Qi et al. 2024, F = B = W): each device idles p − 1 op times, an op being a third of a
    micro-batch's work on a stage, so (p − 1)/(3m + p − 1), a third of 1F1B's bubble time. ZB-V (v = 2, torch's
    order, F = B = W per chunk): idle time max(p − 1, 2(2p − 1 − m)) chunk ops per device
    beside 6m busy ones; for m ≥ 1.5p − 0.5 that is (p − 1)/(6m + p − 1), a sixth of 1F1B's bubble time
    (at p = 4, m = 4 the holes make it 6 ops, a third) — not zero, counted over the whole synchronous
    step: device i waits i ops for the first forward to reach it and p − 1 − i at the end. (Qi et al.
    count the gaps between a device's first and last op, which are zero.) The zero-bubble forms hold for F = B = W, the others for any F and B; each equals
    the simulator's idle share (a property test). Plain arithmetic on validated counts (a plan or job)."""
    p, m, v = pipeline_stages, num_microbatches, virtual_stages
    if schedule in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if schedule == "interleaved-1f1b":
        return (p - 1) / (v * m + p - 1)
    if schedule != "zero-bubble":  # only a name no job has gets here: a job's schedule is not checked again
        one_of("schedule", schedule, SCHEDULES)
    if v == 1:  # ZB-H1
        return (p - 1) / (3 * m + p - 1)
    # ZB-V, in chunk ops (F = B = W): 6m busy per device; p − 1 idle while the first forward reaches the last
    # device and the last backward comes back, or the holes torch leaves where it drops the micro-batches it
    # planned up to 2p − 1, 2(2p − 1 − m)
    idle = max(p - 1, 2 * (2 * p - 1 - m))
    return idle / (6 * m + idle)


def in_flight_chunks(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int,
                     virtual_stages: int = 1) -> list[int]:
    """Per device i (0 = first), the most model-chunk activations (n_layer/(p·v) layers each) it holds at once,
    each from its forward until its W, or its whole backward when not split (v = 1: :func:`in_flight_microbatches`).

    GPipe: m. 1F1B: min(p − i, m). Interleaved 1F1B: min(m·v, (v − 1)·p + 2(p − i − 1) + 1), the warm-up
    forwards and one more; on device 0 with m > p, p·v·(1 + (p − 1)/(p·v)): Megatron-LM's interleaving memory
    factor on 1F1B's p micro-batches. ZB-H1: p everywhere (torch holds device i's first i W back to fill its
    bubble: 1F1B's peak on every device). ZB-V: min(2p, m + i + 1); with m ≥ 2p − 1, 2p chunks of half a
    stage: 1F1B's peak on every device. :meth:`Timeline.peak_in_flight` agrees (a property test)."""
    one_of("schedule", schedule, SCHEDULES)
    p = whole("pipeline_stages", pipeline_stages)
    m = whole("num_microbatches", num_microbatches)
    v = whole("virtual_stages", virtual_stages)
    if schedule == "gpipe":
        return [m * v] * p
    if schedule == "1f1b":
        return [min(p - i, m) for i in range(p)]
    check_runnable(schedule, p, m, v)
    if schedule == "interleaved-1f1b":
        return [min(m * v, (v - 1) * p + 2 * (p - i - 1) + 1) for i in range(p)]
    if v == 1:
        return [p] * p
    return [min(2 * p, m + i + 1) for i in range(p)]   # ZB-V: its warm-up forwards, before a W frees one


def in_flight_microbatches(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int,
                           virtual_stages: int = 1) -> list[int]:
    """Per stage i (0 = first), the most micro-batches whose activations it holds at once.

    GPipe runs every forward before any backward, so every stage holds all m. 1F1B lets stage i run
    p − i − 1 warm-up forwards, then alternates one forward with one backward, so it holds
    min(p − i, m). This count, not the global batch, multiplies a stage's activation memory (4.3).
    With v > 1 chunks per device, :func:`in_flight_chunks` in whole micro-batches, ⌈chunks / v⌉ (Megatron-LM's
    in-flight micro-batches). The simulator's :meth:`Timeline.peak_in_flight` agrees (a property test)."""
    return [-(-chunks // virtual_stages)
            for chunks in in_flight_chunks(schedule, pipeline_stages, num_microbatches, virtual_stages)]


@dataclass(frozen=True)
class Op:
    """One op of a pipeline step on device ``stage``: ``kind`` F (forward), B (backward; with a split backward
    the input gradient only) or W (weight gradient), of ``microbatch`` on local chunk ``chunk`` (:func:`virtual_stage`)."""

    stage: int
    microbatch: int
    kind: Literal["F", "B", "W"]
    start: float
    end: float
    chunk: int = 0


def op_key(op: Op) -> tuple:
    """An op's key in ``durations`` and in the outlier checks: ``(kind, stage, microbatch)`` for chunk 0
    (every op of a one-chunk schedule, the keys measured runs always used), ``(kind, stage, microbatch,
    chunk)`` otherwise."""
    return (op.kind, op.stage, op.microbatch) if op.chunk == 0 else (op.kind, op.stage, op.microbatch, op.chunk)


@dataclass(frozen=True)
class Timeline:
    schedule: str
    pipeline_stages: int
    num_microbatches: int
    ops: tuple[Op, ...]
    virtual_stages: int = 1

    @property
    def makespan(self) -> float:
        return max(op.end for op in self.ops)

    @property
    def idle_fraction(self) -> float:
        """The bubble read off this timeline: 1 − busy time / (devices × makespan). Equals the formula
        :func:`bubble_fraction` when op costs are uniform; with real (measured) costs it need not."""
        busy = sum(op.end - op.start for op in self.ops)
        return 1.0 - busy / (self.pipeline_stages * self.makespan)

    def peak_in_flight(self) -> list[int]:
        """Per device, the most model-chunk activations held at once (forward done, backward not yet; with
        a split backward, W not yet): what decides activation memory in 4.3. With one chunk per device these
        are micro-batches. Compare :func:`in_flight_chunks`, the closed form."""
        frees = "W" if any(op.kind == "W" for op in self.ops) else "B"
        by_stage: list[list[Op]] = [[] for _ in range(self.pipeline_stages)]
        for op in self.ops:  # one pass, not one per stage: p × ops was seconds at p = 10,000
            by_stage[op.stage].append(op)
        peaks = []
        for ops in by_stage:
            held = peak = 0
            for op in sorted(ops, key=lambda o: o.start):
                held += 1 if op.kind == "F" else -1 if op.kind == frees else 0
                peak = max(peak, held)
            peaks.append(peak)
        return peaks


Placement = Literal["loop", "v"]


def placement_of(schedule: ScheduleName, virtual_stages: int = 1) -> Placement:
    """How a schedule lays its p·v virtual stages on p devices: ``"v"`` for ZB-V (device i holds virtual
    stages i and 2p − 1 − i, so the first and the last are on device 0), ``"loop"`` otherwise (device i
    holds i, i + p, i + 2p, …: Megatron-LM's and torch's interleaving)."""
    return "v" if schedule == "zero-bubble" and virtual_stages == 2 else "loop"


def virtual_stage(device: int, chunk: int, pipeline_stages: int, placement: Placement = "loop") -> int:
    """The virtual stage (0 = the embedding's, p·v − 1 = the head's) that ``device`` runs as its local
    ``chunk``: chunk·p + device in loop placement; device, then 2p − 1 − device in V placement."""
    if placement == "v":
        return device if chunk == 0 else 2 * pipeline_stages - 1 - device
    return chunk * pipeline_stages + device


def schedule_order(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int,
                   virtual_stages: int = 1) -> list[list[tuple]]:
    """Each device's operations, in issue order: ("F" | "B", microbatch) pairs for GPipe and 1F1B, and
    (kind, microbatch, chunk) triples for the interleaved and zero-bubble schedules, kind "F", "B" or "W"
    and chunk the local index of :func:`virtual_stage`. Those two are the compute actions of torch 2.13's
    ``ScheduleInterleaved1F1B``, ``ScheduleInterleavedZeroBubble`` (ZB-H1, one stage per rank) and
    ``ScheduleZBVZeroBubble`` (ZB-V), in order (tests/test_schedule_orders_torch.py compares them)."""
    one_of("schedule", schedule, SCHEDULES)
    p = whole("pipeline_stages", pipeline_stages)
    m = whole("num_microbatches", num_microbatches)
    v = whole("virtual_stages", virtual_stages)
    if schedule in ("gpipe", "1f1b") and v == 1:  # defined for m < p too (the degenerate case the rules refuse)
        return [(gpipe_order if schedule == "gpipe" else one_f_one_b_order)(p, m, d) for d in range(p)]
    check_runnable(schedule, p, m, v)
    if schedule == "interleaved-1f1b":
        return [interleaved_order(p, m, v, d) for d in range(p)]
    if v == 1:
        return [zbh1_order(p, m, d) for d in range(p)]
    return [zbv_order(p, m, d) for d in range(p)]


def op_count(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int, virtual_stages: int = 1) -> int:
    """The ops of one step: F and B for each micro-batch on each of the p·v chunks, and W too when the
    backward is split (zero bubble)."""
    return (3 if schedule == "zero-bubble" else 2) * pipeline_stages * num_microbatches * virtual_stages


MAX_SIMULATED_OPS = 20_000
"""The most ops (:func:`op_count`; 2·p·m for GPipe and 1F1B) :func:`simulate` replays for one step, about
0.1 s here whatever the split between p and m (the replay's work grows with the ops). Longer steps are
answered by the closed forms (:func:`bubble_fraction`, :func:`in_flight_chunks`), which it agrees with."""


def simulable(pipeline_stages: int, num_microbatches: int, schedule: ScheduleName = "1f1b",
              virtual_stages: int = 1) -> bool:
    """Whether one step is within :data:`MAX_SIMULATED_OPS` (:func:`op_count`)."""
    return op_count(schedule, pipeline_stages, num_microbatches, virtual_stages) <= MAX_SIMULATED_OPS


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
        # whose rule: torch's schedule classes refuse m < p; Megatron-LM's plain 1F1B runs it (warm-up
        # min(p − rank − 1, m)) with a larger bubble, so the sentence must not call it a property of 1F1B
        megatron = "；Megatron-LM 的 1F1B 也能跑 m < p，气泡更大" if schedule == "1f1b" else ""
        return (f"num_microbatches = {m}：{SCHEDULES[schedule]} 要求微批次数 ≥ 流水线阶段数 pipeline_stages = {p}"
                f"（这是本书与 torch.distributed.pipelining 的对应调度的规则{megatron}）")
    if schedule == "interleaved-1f1b" and m % p:
        return (f"num_microbatches = {m}：交错式 1F1B 要求微批次数是流水线阶段数 pipeline_stages = {p} 的整数倍"
                "（Megatron-LM 的规则）")
    if schedule == "zero-bubble" and v == 1 and m % (m // p):
        return (f"num_microbatches = {m}：ZB-H1 把微批次按每轮约 pipeline_stages = {p} 个分成 ⌊m/p⌋ = {m // p} 轮，"
                "要求微批次数是轮数的整数倍（torch 的 ScheduleInterleavedZeroBubble 的规则）")
    return None


def runnable(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int, virtual_stages: int = 1) -> bool:
    """The rule :func:`check_runnable` enforces, as a test on valid counts (it checks no argument)."""
    return _refusal(schedule, pipeline_stages, num_microbatches, virtual_stages) is None


def check_runnable(schedule: ScheduleName, pipeline_stages: int, num_microbatches: int,
                   virtual_stages: int = 1) -> None:
    """Raise ValueError unless a real pipeline (:mod:`batchlab.measure.pipeline_local`) can run this schedule.

    One rule per schedule, one wording each:

    - GPipe and 1F1B hold one model chunk per device (v = 1).
    - 1F1B needs m ≥ p micro-batches: the book's rule, taken from
      ``torch.distributed.pipelining.Schedule1F1B``, which refuses m < p. It is not a property of 1F1B: its
      order above is defined for any m, and Megatron-LM's non-interleaved 1F1B runs m < p (warm-up
      min(p − rank − 1, m)) with a larger bubble; with m < p the steady 1F1B phase never starts (the
      schedule degenerates to GPipe), so both runtimes of 4.4 reject it. So do the interleaved and
      zero-bubble schedules.
    - Interleaved 1F1B holds v ≥ 2 chunks per device and needs m to be a multiple of p (Megatron-LM's
      rule; torch's flexible variant accepts more, the book keeps the stricter one its readers meet).
    - Zero bubble: ZB-H1 (v = 1) and ZB-V (v = 2), Qi et al. 2024. ZB-H1 is torch's ``ScheduleInterleavedZeroBubble``
      with one stage per rank, which refuses an m not a multiple of its ⌊m/p⌋ rounds (p = 4: m = 9, 11, 13, 14).
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
    orders: list[list[tuple]],
    forward_time: float = 1.0,
    backward_time: float = float(BACKWARD_PER_FORWARD),
    durations: Mapping[tuple, float] | None = None,
    *,
    placement: Placement = "loop",
) -> tuple[Op, ...]:
    """Replay per-device orders (:func:`schedule_order`): an op starts when its device is free and its input
    has arrived (:func:`~batchlab.formulas.schedule_orders.replay`).

    Dependencies follow the virtual stages (:func:`virtual_stage` of the op's device and chunk under
    ``placement``; v is read off the orders): F(k, i) needs F(k−1, i); B(k, i) needs B(k+1, i), or F(k, i)
    on the last virtual stage; W(k, i) needs B(k, i).
    Communication is free here; the measured pipelines of 4.4 add it back.

    Costs: F ``forward_time`` per chunk; B ``backward_time``, or B and W half of it each when the orders split
    the backward (hold W ops): one matmul each (:data:`BACKWARD_PER_FORWARD`), so F = B = W by default.
    ``durations`` (optional) gives each op its own cost, keyed by :func:`op_key` (``(kind, stage, microbatch)``
    for chunk 0, as :func:`batchlab.measure.pipeline_local.run_pipeline_local` measures them); it then
    replaces ``forward_time`` and ``backward_time`` and must cover every op.
    """
    forward_time = positive("forward_time", forward_time)
    backward_time = positive("backward_time", backward_time)
    one_of("placement", placement, ("loop", "v"))
    p = len(orders)
    ops = replay(orders, forward_time, backward_time, durations, lambda d, c: virtual_stage(d, c, p, placement),
                 placement == "v")
    return tuple(Op(stage=s, microbatch=i, kind=kind, start=start, end=end, chunk=chunk)
                 for s, i, kind, start, end, chunk in ops)


def pipeline_timeline(
    schedule: ScheduleName,
    pipeline_stages: int,
    num_microbatches: int,
    forward_time: float = 1.0,
    backward_time: float = float(BACKWARD_PER_FORWARD),
    *,
    virtual_stages: int = 1,
) -> Timeline:
    """Simulated timeline of one optimizer step of ``schedule`` with ``virtual_stages`` chunks per device
    (ValueError beyond :data:`MAX_SIMULATED_OPS`). ``forward_time`` and ``backward_time`` are one chunk's."""
    orders = schedule_order(schedule, pipeline_stages, num_microbatches, virtual_stages)
    if not simulable(pipeline_stages, num_microbatches, schedule, virtual_stages):
        raise ValueError(f"这一步有 {op_count(schedule, pipeline_stages, num_microbatches, virtual_stages)} 个操作，"
                         f"超过了模拟器一步重放的上限 {MAX_SIMULATED_OPS}：请用公式 bubble_fraction / in_flight_chunks")
    ops = simulate(orders, forward_time, backward_time, placement=placement_of(schedule, virtual_stages))
    return Timeline(schedule, pipeline_stages, num_microbatches, ops, virtual_stages)
