"""Choosing the micro-batch size (sections 4.3–4.4) as plain numbers: every candidate, its bubble, its
memory and its modelled speed, and the best one that fits (pure math, no torch).

At a fixed global batch, data-parallel degree and pipeline depth, the only free choice is the
micro-batch size b: a divisor of global_batch / data_parallel, giving m = global_batch / (b · dp)
micro-batches (1F1B needs m ≥ p, :func:`batchlab.formulas.pipeline_schedules.check_runnable`). For each, this
module puts side by side what the book computes in separate chapters:

* the bubble (p − 1)/(m + p − 1) and the modelled tokens/s (:func:`batchlab.formulas.throughput.model_step`,
  with a rate curve: measured, or a device preset's roofline, :meth:`batchlab.formulas.roofline.DevicePeak.curve`);
* the worst stage's peak memory against the device (:func:`batchlab.formulas.memory.stage_memory`), under
  the job's own attention kind (``Job.attention``; the lecture's case keeps the s×s scores, and whoever
  prints the answer names it with :func:`batchlab.formulas.memory.activation_basis`).

:func:`tune` recommends the fitting candidate with the highest modelled tokens/s. When nothing fits it
tries the usual remedies one at a time — recomputation (selective, then full), then more pipeline
stages — and says which one would make some micro-batch fit.

It also searches the schedules (:data:`~batchlab.formulas.pipeline_schedules.SCHEDULES`) and, for those that
hold several model chunks per device, every virtual-stage count v the job's rules allow
(:func:`schedule_choices`): the same candidates under each, the fastest that fits over all of them, and one
sentence saying why it won (its bubble at the same m, or that memory ruled the faster ones out).

Speeds closer than the model's resolution (:data:`RESOLUTION`, 0.1%) are one speed: no switch of schedule is
recommended for a gain below it, and equal speeds go to the candidate holding less memory, then sending fewer
point-to-point messages (:func:`preferred`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, TypeVar

from batchlab.formulas.comm import p2p_messages
from batchlab.formulas.job import LIMITS, Job
from batchlab.formulas.memory import stage_memory
from batchlab.formulas.pipeline_schedules import SCHEDULES, op_count, runnable, schedule_label
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.throughput import model_step

__all__ = ["tune", "runnable_micro_batch_sizes", "schedule_choices", "TUNED_VIRTUAL_STAGES", "SEARCH_OPS", "schedule_reason",
           "RESOLUTION", "same_speed", "preferred"]

_RECOMPUTE_ORDER = ("none", "selective", "full")
T = TypeVar("T")


def runnable_micro_batch_sizes(job: Job, pipeline_stages: int | None = None, schedule: str | None = None,
                               virtual_stages: int | None = None) -> list[int]:
    """Every micro-batch size b ``job``'s batch arithmetic allows at its global batch and data-parallel
    degree (with ``pipeline_stages`` stages, ``schedule`` and ``virtual_stages``, default the job's): b
    divides global_batch / data_parallel (a whole m), b is within the job's limit, and the schedule can run
    those m micro-batches (1F1B: m ≥ p; interleaved: m a multiple of p,
    :func:`batchlab.formulas.pipeline_schedules.runnable`). Memory is not asked."""
    p = job.pipeline_stages if pipeline_stages is None else pipeline_stages
    schedule = job.schedule if schedule is None else schedule
    v = job.virtual_stages if virtual_stages is None else virtual_stages
    per_replica = job.global_batch // job.data_parallel
    return [b for b in range(1, min(per_replica, LIMITS["micro_batch_size"][1]) + 1)
            if per_replica % b == 0 and runnable(schedule, p, per_replica // b, v)]


TUNED_VIRTUAL_STAGES = 8
"""The most model chunks per device :func:`tune` tries (the job's own v is always tried): Megatron-LM's
interleaved runs use 2–8. Each chunk more sends p more messages a micro-batch, a cost the throughput model
does not count, so past this the model's gain would be one it cannot see the price of."""


def schedule_choices(job: Job) -> list[tuple[str, int]]:
    """Every (schedule, virtual stages) :func:`tune` tries for ``job``: each schedule of
    :data:`~batchlab.formulas.pipeline_schedules.SCHEDULES` with each v from 1 to :data:`TUNED_VIRTUAL_STAGES`
    (and n_layer / p) that the schedule's rule allows at some m (:func:`~batchlab.formulas.pipeline_schedules.runnable`
    at m = p); the job's own first. Whether the layers cut into p · v chunks is the job's to say, when each
    candidate is made."""
    p, n_layer = job.pipeline_stages, job.model.n_layer
    choices = [(job.schedule, job.virtual_stages)]
    for schedule in SCHEDULES:
        for v in range(1, min(TUNED_VIRTUAL_STAGES, n_layer // p) + 1):
            # m = p is a multiple of p and ≥ p: a v that no m can run is left out here, whatever the batch
            if (schedule, v) not in choices and runnable(schedule, p, p, v):
                choices.append((schedule, v))
    return choices


def _candidates(job: Job, curve: RateCurve, **changes: object) -> list[dict]:
    """One row per runnable micro-batch size of ``job`` with ``changes`` applied (each its own job)."""
    rows = []
    for b in runnable_micro_batch_sizes(job, changes.get("pipeline_stages"), changes.get("schedule"),
                                        changes.get("virtual_stages")):
        candidate = replace(job, micro_batch_size=b, **changes)
        step, memory = model_step(candidate, curve), stage_memory(candidate)
        rows.append({
            "micro_batch_size": b,
            "num_microbatches": candidate.num_microbatches,
            "bubble_fraction": step.bubble_fraction,
            "peak_memory_fraction": memory.peak_memory_fraction,
            "fits": memory.fits,
            "tokens_per_second": step.tokens_per_second,
            "matmul_efficiency": step.matmul_efficiency,
            "step_seconds": step.step_seconds,
        })
    return rows


def _largest_fit(rows: list[dict]) -> int | None:
    """The largest fitting micro-batch size (memory grows with b, so the largest says most)."""
    fitting = [r["micro_batch_size"] for r in rows if r["fits"]]
    return max(fitting) if fitting else None


def _suggest(job: Job, curve: RateCurve) -> tuple[str, dict | None]:
    """When nothing fits: the first single change (recompute, then more stages) that makes some
    micro-batch fit, as a sentence and as the changed fields; then the two together."""
    stronger = _RECOMPUTE_ORDER[_RECOMPUTE_ORDER.index(job.recompute) + 1:]
    n_layer, p0, dp = job.model.n_layer, job.pipeline_stages, job.data_parallel
    deeper = [p for p in range(p0 + 1, n_layer + 1) if n_layer % p == 0]

    def fits_with(**changes: object) -> int | None:
        return _largest_fit(_candidates(job, curve, **changes))

    def devices(p: int, b: int) -> int:
        return replace(job, pipeline_stages=p, micro_batch_size=b).devices

    for mode in stronger:
        if (b := fits_with(recompute=mode)) is not None:
            return f"用 {mode} 重计算后微批次大小 {b} 放得下", {"recompute": mode}
    for p in deeper:
        if (b := fits_with(pipeline_stages=p)) is not None:
            return (f"把流水线阶段数从 {p0} 增大到 {p}（设备数 {p} × {dp} = {devices(p, b)}）后微批次大小 {b} 放得下",
                    {"pipeline_stages": p})
    for mode in stronger:
        for p in deeper:
            if (b := fits_with(recompute=mode, pipeline_stages=p)) is not None:
                return (f"用 {mode} 重计算并把流水线阶段数从 {p0} 增大到 {p}（设备数 {devices(p, b)}）后微批次大小 {b} "
                        "放得下", {"recompute": mode, "pipeline_stages": p})
    return ("重计算和更多流水线阶段（到 n_layer = "
            f"{n_layer}）都不够：需要更大的显存、ZeRO-1、更低的精度或更短的序列"), None


RESOLUTION = 0.001
"""The model's resolution: two modelled speeds whose ratio differs from 1 by less than this (0.1%) are the same
speed. The model's inputs are a device preset's round figures and its answers are read as percentages to one
decimal (a gain below it prints as 0.0%), and it leaves out costs far larger than this (point-to-point latency,
kernel launches, :func:`_unmodelled`): a difference below 0.1% is no answer the model can give, so it never
decides a recommendation. Equal speeds are decided by :func:`preferred`."""


def same_speed(a: float, b: float) -> bool:
    """Whether modelled tokens/s ``a`` and ``b`` are the same speed to the model (within :data:`RESOLUTION`)."""
    return max(a, b) < min(a, b) * (1 + RESOLUTION)


def preferred(items: list[T], row: Callable[[T], dict] = lambda item: item,
              messages: Callable[[T], int] = lambda item: 0) -> T | None:
    """Of ``items`` (each a row with ``tokens_per_second`` and ``peak_memory_fraction``, or something whose
    ``row`` is one), the one to recommend: among those at the same speed as the fastest (:func:`same_speed`),
    the one holding the least memory, then the one sending the fewest point-to-point ``messages`` a step, then
    the first listed; None for no items."""
    if not items:
        return None
    top = max(row(item)["tokens_per_second"] for item in items)
    tied = [item for item in items if same_speed(row(item)["tokens_per_second"], top)]
    return min(tied, key=lambda item: (row(item)["peak_memory_fraction"], messages(item)))


def _fastest(rows: list[dict]) -> dict | None:
    """The fitting row to recommend (:func:`preferred`: the fastest, ties to less memory), or None."""
    return preferred([r for r in rows if r["fits"]])


def _spaced(label: str) -> str:
    """``label`` before a Chinese word: a space after Latin text (1F1B 把), none after Chinese (零气泡把, ）把)."""
    return label + " " if label[-1].isascii() else label


def _unmodelled(entry: dict) -> str:
    """What the step model leaves out that grows with ``entry``'s schedule, so a win by a few per cent is read as
    modelled, not measured: interleaving's v-fold point-to-point messages, zero bubble's split backward."""
    if entry["schedule"] == "interleaved-1f1b":
        return f"（模型不计点对点通信：v = {entry['virtual_stages']} 时每步的点对点消息是 1F1B 的 {entry['virtual_stages']} 倍，要实测再定）"
    if entry["schedule"] == "zero-bubble":
        return "（模型不计拆分反向的额外开销：B 与 W 分两次算，要实测再定）"
    return ""


def schedule_reason(own: dict, winner: dict | None, faster_unfit: dict | None,
                    tied: list[dict] | None = None) -> str | None:
    """Why ``winner`` (an entry of :func:`tune`'s ``schedules``) won over the job's ``own`` entry, in one
    Chinese sentence: the bubble at the same m (or each at its best micro-batch), or that its own schedule
    fits nothing; ``faster_unfit``, an entry whose fastest micro-batch is faster still but does not fit, is
    named as ruled out by memory; ``tied``, the fitting entries at the winner's speed (:func:`same_speed`), as
    decided by the tie rule (:func:`preferred`; the job's own schedule first). None when nothing fits under any
    schedule."""
    if winner is None:
        return None
    even = ("" if not tied else
            f"；{'、'.join(schedule_label(e['schedule'], e['virtual_stages']) for e in tied)}的模型吞吐与它相差不到 "
            f"{RESOLUTION:.1%}（模型的分辨率），算作一样快：" + ("不换调度" if winner is own else
                                                   "一样快时选显存更少、点对点消息更少的"))
    best = winner["recommended"]
    name = schedule_label(winner["schedule"], winner["virtual_stages"])
    name_ = _spaced(name)
    ruled_out = ("" if faster_unfit is None else
                 f"；{_spaced(schedule_label(faster_unfit['schedule'], faster_unfit['virtual_stages']))}用微批次大小 "
                 f"{faster_unfit['fastest']['micro_batch_size']} 的模型吞吐更高，但显存放不下（最满的阶段占 "
                 f"{faster_unfit['fastest']['peak_memory_fraction']:.0%}）")
    if winner is own:
        return f"{name_}已是模型下最快且放得下的调度（微批次大小 {best['micro_batch_size']}）{even}{ruled_out}"
    ruled_out = _unmodelled(winner) + even + ruled_out
    own_name = _spaced(schedule_label(own["schedule"], own["virtual_stages"]))
    if own["recommended"] is None:
        return (f"{own_name}下没有放得下的微批次大小；{name_}用微批次大小 {best['micro_batch_size']} 放得下"
                f"（气泡 {best['bubble_fraction']:.1%}）{ruled_out}")
    same = next((r for r in own["candidates"] if r["micro_batch_size"] == best["micro_batch_size"]), None)
    if same is not None:
        return (f"同样 m = {best['num_microbatches']} 个微批次（微批次大小 {best['micro_batch_size']}），{name_}把气泡从 "
                f"{same['bubble_fraction']:.1%} 降到 {best['bubble_fraction']:.1%}，模型估计吞吐高 "
                f"{best['tokens_per_second'] / same['tokens_per_second'] - 1:.1%}"
                + ("" if same["fits"] else f"（{own_name}在这个微批次下放不下）") + ruled_out)
    mine = own["recommended"]
    return (f"各取最好的微批次：{own_name}是 {mine['micro_batch_size']}（气泡 {mine['bubble_fraction']:.1%}），"
            f"{name_}是 {best['micro_batch_size']}（气泡 {best['bubble_fraction']:.1%}），模型估计吞吐高 "
            f"{best['tokens_per_second'] / mine['tokens_per_second'] - 1:.1%}{ruled_out}")


SEARCH_OPS = 1_000_000
"""The most schedule ops :func:`tune` lets the memory model read for the other schedules with v > 1 (each
micro-batch size counted as its schedule's ops at m = p, :func:`~batchlab.formulas.pipeline_schedules.op_count`:
the model reads the held chunks off the order, a few periods of p micro-batches). About a second here; past
it (hundreds of stages and sizes) those schedules are named as not searched, not left to run for minutes."""


def _schedules(job: Job, curve: RateCurve, own_rows: list[dict]) -> dict:
    """The schedule search of :func:`tune`: one entry per :func:`schedule_choices` pair, the winner and why."""
    entries, skipped, spent = [], [], 0
    p = job.pipeline_stages
    for schedule, v in schedule_choices(job):
        is_own = (schedule, v) == (job.schedule, job.virtual_stages)
        sizes = [] if is_own else runnable_micro_batch_sizes(job, None, schedule, v)
        if not is_own and sizes:
            try:  # the job's own rule: do the layers cut into p · v chunks?
                replace(job, micro_batch_size=sizes[0], schedule=schedule, virtual_stages=v)
            except ValueError:
                continue
        if not is_own and v > 1:
            cost = len(sizes) * op_count(schedule, p, p, v)
            if spent + cost > SEARCH_OPS:
                skipped.append(schedule_label(schedule, v))
                continue
            spent += cost
        rows = own_rows if is_own else _candidates(job, curve, schedule=schedule, virtual_stages=v)
        if rows:
            fastest = max(rows, key=lambda r: r["tokens_per_second"])
            entries.append({"schedule": schedule, "virtual_stages": v, "label": schedule_label(schedule, v),
                            "candidates": rows, "recommended": _fastest(rows), "fastest": fastest})
    own = entries[0]  # the job's own schedule: its candidates are tune's own
    fitting = [e for e in entries if e["recommended"] is not None]

    def messages(entry: dict) -> int:
        return p2p_messages(p, entry["recommended"]["num_microbatches"], entry["virtual_stages"], entry["schedule"])

    def speed(entry: dict) -> float:
        return entry["recommended"]["tokens_per_second"]

    # no switch for a gain the model cannot resolve: at the fastest speed the job keeps its own schedule; other
    # ties (GPipe and 1F1B take the same time; ZB-V and interleaving at v = 6 can too) go to less memory, then
    # fewer point-to-point messages
    winner = preferred(fitting, lambda e: e["recommended"], messages)
    if winner is not None and own["recommended"] is not None and same_speed(speed(own), speed(winner)):
        winner = own
    tied = [e for e in fitting if e is not winner and same_speed(speed(e), speed(winner))]
    faster = [e for e in entries if e is not winner and not e["fastest"]["fits"] and (
        winner is None or (e["fastest"]["tokens_per_second"] > speed(winner)
                           and not same_speed(e["fastest"]["tokens_per_second"], speed(winner))))]
    faster_unfit = max(faster, key=lambda e: e["fastest"]["tokens_per_second"]) if faster and winner else None
    return {"schedules": entries,
            "best_schedule": None if winner is None else {
                "schedule": winner["schedule"], "virtual_stages": winner["virtual_stages"], **winner["recommended"]},
            "schedule_reason": schedule_reason(own, winner, faster_unfit, tied), "schedules_not_searched": skipped}


def tune(job: Job, curve: RateCurve) -> dict:
    """Every runnable micro-batch size of ``job`` (its own micro-batch size is one choice among them), and
    the recommended one.

    Candidates: each divisor b of global_batch / data_parallel, except (1F1B) those with fewer
    micro-batches than stages, each as ``dataclasses.replace(job, micro_batch_size=b)``. Each row is a
    dict with ``micro_batch_size``, ``num_microbatches``, ``bubble_fraction``, ``peak_memory_fraction``
    (worst stage / device), ``fits``, ``tokens_per_second`` (whole job,
    :func:`batchlab.formulas.throughput.model_step` on ``curve``), ``matmul_efficiency`` and ``step_seconds``.

    Returns ``candidates``, ``recommended`` (the fitting candidate with the highest modelled tokens/s, ties
    within :data:`RESOLUTION` to less memory, :func:`preferred`; or None), ``suggestion`` (None when something fits; else a Chinese sentence naming the first change
    that makes some micro-batch fit) and ``suggested_change`` (that change as job fields to replace, e.g.
    ``{"recompute": "selective"}``; None if none helps or nothing needed), all under the job's own schedule;
    and the schedule search: ``schedules`` (one entry per :func:`schedule_choices` pair with runnable
    micro-batches, the job's own first: ``schedule``, ``virtual_stages``, ``label``, ``candidates``,
    ``recommended``, ``fastest`` — fitting or not), ``best_schedule`` (the fastest fitting candidate over
    all of them — the job's own schedule when it is as fast within :data:`RESOLUTION`, else ties to less memory,
    then fewer point-to-point messages — with its ``schedule`` and ``virtual_stages``; None when nothing fits) and
    ``schedule_reason`` (:func:`schedule_reason`'s sentence); ``schedules_not_searched`` names the pairs
    with v > 1 left out past :data:`SEARCH_OPS`.
    """
    if not isinstance(job, Job):
        raise ValueError(f"job = {job!r}：必须是 Job（batchlab.formulas.job.Job）")
    if not isinstance(curve, RateCurve):
        raise ValueError(f"curve = {curve!r}：必须是 RateCurve（实测点，或 DevicePeak.curve 的屋顶线）")
    rows = _candidates(job, curve)
    recommended = _fastest(rows)
    suggestion = change = None
    if recommended is None:
        suggestion, change = _suggest(job, curve)
    return {"candidates": rows, "recommended": recommended, "suggestion": suggestion, "suggested_change": change,
            **_schedules(job, curve, rows)}
