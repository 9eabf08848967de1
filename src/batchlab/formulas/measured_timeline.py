"""Measured pipeline timelines, read with care: the typical step of several (each op's median), and which ops
ran far slower than their siblings (a cold start or a busy machine, not the schedule).

Pure math, no torch; the timelines are :class:`~batchlab.formulas.pipeline_schedules.Timeline` records that
the measured runs (:mod:`batchlab.measure.pipeline_local`, :mod:`batchlab.measure.pipeline_distributed`) return.
"""
from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from batchlab.formulas.checks import positive
from batchlab.formulas.pipeline_schedules import Op, Timeline, op_key

__all__ = ["median_durations", "median_timeline", "OUTLIER_FACTOR", "sibling_ratios", "outlier_ops"]


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
    keys = sorted((op.kind, op.stage, op.microbatch, op.chunk) for op in first.ops)
    per_op: dict[tuple[str, int, int, int], tuple[list[float], list[float]]] = {key: ([], []) for key in keys}
    for k, step in enumerate(steps):
        if (step.schedule, step.pipeline_stages, step.num_microbatches, step.virtual_stages) != (
                first.schedule, first.pipeline_stages, first.num_microbatches, first.virtual_stages) or \
                sorted((op.kind, op.stage, op.microbatch, op.chunk) for op in step.ops) != keys:
            raise ValueError(f"steps[{k}] 与 steps[0] 不是同一个作业的一步：每一步必须有同样的操作")
        origin = min(op.start for op in step.ops)
        for op in step.ops:
            starts, ends = per_op[(op.kind, op.stage, op.microbatch, op.chunk)]
            starts.append(op.start - origin)
            ends.append(op.end - origin)
    medians = {key: (statistics.median(starts), statistics.median(ends)) for key, (starts, ends) in per_op.items()}
    origin = min(start for start, _ in medians.values())
    ops = tuple(Op(stage=stage, microbatch=mb, kind=kind, start=start - origin, end=end - origin, chunk=chunk)
                for (kind, stage, mb, chunk), (start, end) in sorted(medians.items(), key=lambda item: item[1][0]))
    return Timeline(first.schedule, first.pipeline_stages, first.num_microbatches, ops, first.virtual_stages)


OUTLIER_FACTOR = 3.0
"""An op more than this many times the median of its siblings (same stage, same kind, the other micro-batches:
the same work on other data) is an outlier (:func:`outlier_ops`)."""


def sibling_ratios(timeline: Timeline) -> dict[tuple, float]:
    """Each op's duration over the median duration of its siblings: the ops of the same kind (F, B or W) on
    the same stage and model chunk for the other micro-batches, which do the same work on other data. Keyed
    by :func:`op_key` (``(kind, stage, microbatch)`` for chunk 0); an op without siblings (one micro-batch)
    is left out."""
    groups: dict[tuple[str, int, int], list[Op]] = {}
    for op in timeline.ops:
        groups.setdefault((op.kind, op.stage, op.chunk), []).append(op)
    ratios = {}
    for ops in groups.values():
        for op in ops:
            others = [o.end - o.start for o in ops if o is not op]
            if others:
                ratios[op_key(op)] = (op.end - op.start) / statistics.median(others)
    return ratios


def outlier_ops(timeline: Timeline, factor: float = OUTLIER_FACTOR) -> tuple[tuple, ...]:
    """The ops (:func:`op_key`: ``(kind, stage, microbatch)`` for chunk 0) that take more than ``factor`` × the median of their siblings
    (:func:`sibling_ratios`), slowest first. A measured timeline shown as typical must have none: one such op
    sets the makespan and the bubble read off it."""
    factor = positive("factor", factor)
    ratios = sibling_ratios(timeline)
    return tuple(sorted((key for key, r in ratios.items() if r > factor), key=lambda k: -ratios[k]))
