"""Section 4.4 beyond the lecture (原文之外) as tables: each schedule's bubble beside its price, the modelled
tokens/s of every micro-batch size under each schedule, whether the fastest one moves with the schedule, and
what tensor parallelism does to the matmul's shape and to the fastest micro-batch.

No formula of its own: bubbles, in-flight chunks and messages come from
:mod:`batchlab.formulas.pipeline_schedules` and :mod:`batchlab.formulas.comm`, step times from
:func:`batchlab.formulas.throughput.model_step`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from batchlab.formulas.comm import p2p_messages, tensor_parallel_bytes_per_layer
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import (BACKWARD_PER_FORWARD, bubble_fraction, in_flight_chunks,
                                                  pipeline_timeline, runnable, schedule_label)
from batchlab.formulas.roofline import DevicePeak, RateCurve, arithmetic_intensity, matmul_rows
from batchlab.formulas.throughput import model_step
from batchlab.page.numbers import count, decimal, percent, ratio, size, throughput
from batchlab.ui import pipeline   # the module, so that its plot_ functions are not listed as this one's
from batchlab.ui.style import check_layout
from batchlab.ui.tables import Table, text_table

__all__ = ["SCHEDULE_VARIANTS", "plot_schedule_runs", "schedule_bubble_table", "tokens_by_schedule",
           "best_micro_batches", "best_moves", "schedule_speed_table", "layout_name", "tensor_parallel_speeds",
           "tensor_parallel_table"]

SCHEDULE_VARIANTS: tuple[tuple[str, int], ...] = (("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2),
                                                  ("zero-bubble", 1), ("zero-bubble", 2))
"""(schedule, v) of the tables: the four schedules, zero bubble both as ZB-H1 (v = 1) and ZB-V (v = 2)."""


def plot_schedule_runs(timelines: Sequence, titles: Sequence[str], units: Sequence[str],
                       layout: str = "desk"):
    """Simulated and measured steps of the chunked and split-backward schedules, one row each
    (:func:`~batchlab.ui.pipeline.plot_pipeline_timelines`), with the key the boxes need below them: forward,
    backward (the input gradient where W is split off), weight gradient, and each device's model chunks."""
    fig = pipeline.plot_pipeline_timelines(timelines, titles=titles, units=units, labels=False, layout=layout)
    if pipeline.needs_key(timelines):
        fig.legend(handles=pipeline.legend_handles(timelines), loc="outside lower center", fontsize=8.5, frameon=False,
                   ncol=2 if check_layout(layout) == "phone" else 5)
    return fig


def _idle_time(timeline) -> float:
    """Idle time per device of a simulated step, in the timeline's units."""
    return timeline.makespan * timeline.idle_fraction


def schedule_bubble_table(pipeline_stages: int, num_microbatches: int,
                          schedules: Sequence[tuple[str, int]] = SCHEDULE_VARIANTS) -> Table:
    """One row per (schedule, v): the closed-form bubble beside the simulator's idle share of the same step
    (a chunk costs 1/v of a stage, F = 1, B + W = 2, as :func:`~batchlab.ui.pipeline.plot_schedule_comparison`
    draws it), the idle time per device and device 0's peak activations, both relative to 1F1B's, and the
    point-to-point messages of the step (:func:`~batchlab.formulas.comm.p2p_messages`)."""
    p, m = pipeline_stages, num_microbatches
    base = pipeline_timeline("1f1b", p, m)
    base_held = in_flight_chunks("1f1b", p, m)[0]
    rows = []
    for schedule, v in schedules:
        timeline = pipeline_timeline(schedule, p, m, 1 / v, BACKWARD_PER_FORWARD / v, virtual_stages=v)
        held = in_flight_chunks(schedule, p, m, v)[0] / v   # a chunk holds 1/v of a stage's activations
        rows.append([schedule_label(schedule, v), percent(bubble_fraction(p, m, schedule, v)),
                     percent(timeline.idle_fraction), ratio(_idle_time(timeline) / _idle_time(base)),
                     ratio(held / base_held), count(p2p_messages(p, m, v, schedule))])
    return text_table(["调度", "气泡（公式）", "气泡（模拟器）", "空闲时间（相对 1F1B）",
                       "设备 0 的激活（相对 1F1B）", "每步点对点消息"], rows)


def tokens_by_schedule(job: Job, curve: RateCurve, schedules: Sequence[tuple[str, int]] = SCHEDULE_VARIANTS[1:],
                       link_bandwidth: float | None = None) -> dict[str, dict[int, float]]:
    """Modelled tokens/s (:func:`~batchlab.formulas.throughput.model_step`) of ``job`` at every micro-batch size
    its batch allows (b divides global_batch / data_parallel) and each schedule can run at the resulting m,
    by schedule name. GPipe is left out by default: the model gives it 1F1B's time (they differ in memory)."""
    per_replica = job.global_batch // job.data_parallel
    table = {}
    for schedule, v in schedules:
        speeds = {}
        for b in range(1, per_replica + 1):
            if per_replica % b == 0 and runnable(schedule, job.pipeline_stages, per_replica // b, v):
                candidate = replace(job, micro_batch_size=b, schedule=schedule, virtual_stages=v)
                speeds[b] = model_step(candidate, curve, link_bandwidth).tokens_per_second
        table[schedule_label(schedule, v)] = speeds
    return table


def best_micro_batches(table: Mapping[str, Mapping[int, float]]) -> dict[str, int]:
    """Per schedule, the micro-batch size with the highest tokens/s (the smallest of equals)."""
    return {name: max(sorted(speeds), key=lambda b: speeds[b]) for name, speeds in table.items() if speeds}


def best_moves(table: Mapping[str, Mapping[int, float]]) -> bool:
    """The verdict: the fastest micro-batch moves with the schedule, i.e. not every schedule has the same one."""
    return len(set(best_micro_batches(table).values())) > 1


def schedule_speed_table(table: Mapping[str, Mapping[int, float]]) -> Table:
    """:func:`tokens_by_schedule`'s answer as one row per schedule: tokens/s at each micro-batch size (a dash where
    the schedule cannot run that m), and the fastest size last."""
    sizes = sorted({b for speeds in table.values() for b in speeds})
    best = best_micro_batches(table)
    rows = [[name, *[throughput(speeds[b], unit=False) if b in speeds else None for b in sizes], best[name]]
            for name, speeds in table.items()]
    return text_table(["调度（tokens/s）", *[f"微批次 {b}" for b in sizes], "最快的微批次"], rows)


def layout_name(job: Job) -> str:
    """The job's devices as t·p·d: 2·4·1."""
    return f"{job.tensor_parallel}·{job.pipeline_stages}·{job.data_parallel}"


def tensor_parallel_speeds(jobs: Sequence[Job], peak: DevicePeak, link_bandwidth: float,
                           end: str = "low") -> dict[str, dict[int, float]]:
    """:func:`tokens_by_schedule` of each job under its own schedule, on ``peak``'s roofline (``end``) for the
    job's t, with the tensor-parallel collectives at ``link_bandwidth`` bytes/s; keyed by :func:`layout_name`,
    so :func:`best_moves` says whether the fastest micro-batch moves with the layout."""
    return {layout_name(job): next(iter(tokens_by_schedule(
        job, peak.curve(job.model, end, tensor_parallel=job.tensor_parallel),
        [(job.schedule, job.virtual_stages)], link_bandwidth).values())) for job in jobs}


def tensor_parallel_table(jobs: Sequence[Job], peak: DevicePeak, link_bandwidths: Sequence[float],
                          end: str = "low") -> Table:
    """One row per job: its layout t·p·d, the MLP matmul one device runs at micro-batch 1, [b·s/cp, h] × [h, 4h/t],
    its arithmetic intensity, the tensor-parallel bytes one device sends per layer and micro-batch
    (:func:`~batchlab.formulas.comm.tensor_parallel_bytes_per_layer`), and at each assumed link bandwidth the
    fastest micro-batch with its modelled tokens/s (:func:`tensor_parallel_speeds`)."""
    speeds = [tensor_parallel_speeds(jobs, peak, bandwidth, end) for bandwidth in link_bandwidths]
    rows = []
    for job in jobs:
        name, h = layout_name(job), job.model.d_model
        n, rows_m = 4 * h // job.tensor_parallel, matmul_rows(1, job.seq_len, job.context_parallel)
        fastest = [(b, s[name][b]) for s in speeds for b in best_micro_batches({name: s[name]}).values()]
        rows.append([name, f"[{rows_m}, {h}] × [{h}, {n}]",
                     decimal(arithmetic_intensity(rows_m, h, n, job.element_bytes), 0),
                     size(tensor_parallel_bytes_per_layer(replace(job, micro_batch_size=1))),
                     *[f"{b}（{throughput(tokens, unit=False)}）" for b, tokens in fastest]])
    headers = ["t·p·d", "每张卡的 MLP 矩阵乘法（微批次 1）", "算术强度", "每层每微批次的张量并行通信",
               *[f"最快的微批次（tokens/s），链路 {bandwidth / 1e9:g} GB/s" for bandwidth in link_bandwidths]]
    return text_table(headers, rows)
