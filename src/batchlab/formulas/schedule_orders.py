"""Each device's operations in torch 2.13's interleaved and zero-bubble pipeline schedules, and the replay of
any schedule's orders under their data dependencies (pure math, no torch).

The orders are the compute actions of ``torch.distributed.pipelining``'s ``ScheduleInterleaved1F1B``
(Narayanan et al. 2021), ``ScheduleInterleavedZeroBubble`` with one stage per rank (ZB-H1) and
``ScheduleZBVZeroBubble`` (ZB-V), the last two with the backward split into the input gradient B and the weight
gradient W (Qi et al. 2024, arXiv:2401.10241). :mod:`batchlab.formulas.pipeline_schedules` names the schedules,
checks their rules, places their chunks and holds their closed forms; it reads this module.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from batchlab.formulas.checks import positive

__all__ = ["gpipe_order", "one_f_one_b_order", "interleaved_order", "zbh1_order", "zbv_order", "replay"]


def gpipe_order(p: int, m: int, device: int) -> list[tuple[str, int]]:
    """GPipe (Huang et al. 2019): every forward, then every backward."""
    return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]


def one_f_one_b_order(p: int, m: int, device: int) -> list[tuple[str, int]]:
    """1F1B (PipeDream-Flush): p − 1 − device warm-up forwards, then one forward and one backward in turn."""
    warmup = min(p - device - 1, m)
    order = [("F", i) for i in range(warmup)]
    for j in range(m - warmup):
        order += [("F", warmup + j), ("B", j)]
    return order + [("B", j) for j in range(m - warmup, m)]


def interleaved_order(p: int, m: int, v: int, device: int) -> list[tuple[str, int, int]]:
    """Device ``device``'s ops in torch's ``ScheduleInterleaved1F1B`` (m a multiple of p): forwards go
    through the chunks p micro-batches at a time (micro-batch 0…p−1 on chunk 0, then on chunk 1, …),
    backwards the same from the last chunk down; (v − 1)·p + 2(p − 1 − device) warm-up forwards, then one
    forward and one backward alternately, then the remaining backwards."""
    total = v * m
    warmup = min((v - 1) * p + 2 * (p - 1 - device), total)

    def forward(step: int) -> tuple[str, int, int]:
        return "F", step // (p * v) * p + step % p, step // p % v

    def backward(step: int) -> tuple[str, int, int]:
        return "B", step // (p * v) * p + step % p, v - 1 - step // p % v

    order = [forward(s) for s in range(warmup)]
    for j in range(total - warmup):
        order += [forward(warmup + j), backward(j)]
    return order + [backward(j) for j in range(total - warmup, total)]


def zbh1_order(p: int, m: int, device: int) -> list[tuple[str, int, int]]:
    """Device ``device``'s ops in ZB-H1 as torch's ``ScheduleInterleavedZeroBubble`` issues them with one
    stage per rank: 1F1B's p − 1 − device warm-up forwards and F, B alternation (B the input gradient
    only), each B followed by a W, except that device i holds back its first i weight gradients (its
    warm-up was i ops shorter) and runs them at the end, where 1F1B's cool-down bubble was."""
    warmup = p - 1 - device
    order = [("F", i, 0) for i in range(warmup)]
    for j in range(m):
        if warmup + j < m:
            order.append(("F", warmup + j, 0))
        order.append(("B", j, 0))
        if j >= device:
            order.append(("W", j - device, 0))
    return order + [("W", j, 0) for j in range(m - device, m)]


def zbv_order(p: int, m: int, device: int) -> list[tuple[str, int, int]]:
    """Device ``device``'s ops in torch's ``ScheduleZBVZeroBubble`` (V placement: local chunk 0 is virtual
    stage ``device``, chunk 1 is 2p − 1 − device). torch plans max(m, 2p − 1) micro-batches and drops the
    ops of those beyond m."""
    n = max(2 * p - 1, m)
    order: list[tuple[str, int, int]] = []
    count = {"F0": 0, "F1": 0, "B0": 0, "B1": 0}

    def add(kind: str, chunk: int, index: int | None = None) -> None:
        key = f"{kind}{chunk}"
        mb = count[key] if index is None else index
        if index is None:
            count[key] += 1
        order.append((kind, mb, chunk))

    for _ in range(2 * (p - device) - 1):  # warm-up: chunk 0's forwards fill the V's descending arm
        add("F", 0)
    for _ in range(device):
        add("F", 1)
        add("F", 0)
    for _ in range(p - device):  # chunk 1's first backwards, each with its weight gradient
        add("F", 1)
        add("B", 1, count["B1"])
        add("W", 1, count["B1"])
        count["B1"] += 1
    while count["F1"] < count["F0"] or count["F0"] < n:  # steady: F, B, W on each chunk in turn
        if count["F0"] < n:
            add("F", 0)
        add("B", 0, count["B0"])
        add("W", 0, count["B0"])
        count["B0"] += 1
        add("F", 1)
        add("B", 1, count["B1"])
        add("W", 1, count["B1"])
        count["B1"] += 1
    w0, w1 = count["B0"], count["B1"]
    for _ in range(device):  # cool-down: input gradients first, weight gradients deferred
        add("B", 0)
        add("B", 1)
    for _ in range(p - device):
        add("B", 0)
        add("W", 0, w0)
        w0 += 1
    order += [("W", j, 1) for j in range(w1, count["B1"])]
    order += [("W", j, 0) for j in range(w0, count["B0"])]
    return [op for op in order if op[1] < m]


def _entry(op: tuple) -> tuple[str, int, int]:
    """An order's entry as (kind, microbatch, chunk): GPipe's and 1F1B's pairs are chunk 0."""
    return (op[0], op[1], 0) if len(op) == 2 else (op[0], op[1], op[2])


def replay(orders: list[list[tuple]], forward_time: float, backward_time: float,
           durations: Mapping[tuple, float] | None, place: Callable[[int, int], int],
           two_chunks: bool = False) -> list[tuple[int, int, str, float, float, int]]:
    """The simulator of :func:`batchlab.formulas.pipeline_schedules.simulate` (which documents the costs and
    the ``durations`` keys; its arguments are checked there): an op starts when its device is free and its
    input has arrived. ``place(device, chunk)`` is the chunk's virtual stage k; F(k, i) needs F(k−1, i);
    B(k, i) needs B(k+1, i), or F(k, i) on the last virtual stage; W(k, i) needs B(k, i). ``two_chunks``:
    the placement needs exactly two chunks per device (V). Returns (device, microbatch, kind, start, end,
    chunk) per op in the order they were placed; ValueError on an order that deadlocks."""
    p = len(orders)
    entries = [[_entry(op) for op in order] for order in orders]
    v = 1 + max((chunk for order in entries for _, _, chunk in order), default=0)
    if two_chunks and v != 2:
        raise ValueError(f"placement = 'v'：V 形放置每张卡正好两段模型，这些顺序里有 {v} 段")
    split = any(kind == "W" for order in entries for kind, _, _ in order)
    cost_of = {"F": forward_time, "B": backward_time / 2 if split else backward_time, "W": backward_time / 2}
    stage_of = [[place(d, c) for c in range(v)] for d in range(p)]
    last = p * v - 1
    device_of = [0] * (last + 1)
    for d in range(p):
        for k in stage_of[d]:
            device_of[k] = d

    def cost(kind: str, s: int, i: int, chunk: int) -> float:
        if durations is None:
            return cost_of[kind]
        key = (kind, s, i) if chunk == 0 else (kind, s, i, chunk)
        if key not in durations:
            raise ValueError(f"durations 缺少操作 {key!r}：必须为每个操作给出耗时")
        return positive(f"durations[{key!r}]", durations[key])

    done: dict[tuple[str, int, int], float] = {}
    cursor = [0] * p
    free_at = [0.0] * p
    ops = []
    # Devices to look at again: all at first, then only those a finished op may have unblocked (F(k, i)
    # feeds virtual stage k + 1's device, B(k, i) k − 1's), so the work grows with the ops, not with p × the
    # rounds a backward takes to ripple back (sweeping every stage each round was 13 s at p = 10,000, m = 1).
    # An op's start depends only on its device's previous op and its input, not on this visiting order.
    waiting = deque(range(p))
    queued = [True] * p
    while waiting:
        s = waiting.popleft()
        queued[s] = False
        while cursor[s] < len(entries[s]):
            kind, i, chunk = entries[s][cursor[s]]
            k = stage_of[s][chunk]
            if kind == "F":
                dep = ("F", k - 1, i) if k > 0 else None
            elif kind == "B":
                dep = ("B", k + 1, i) if k < last else ("F", k, i)
            elif kind == "W":
                dep = ("B", k, i)
            else:
                raise ValueError(f"操作类型 {kind!r} 不存在：只有 'F'、'B' 和 'W'")
            if dep is not None and dep not in done:
                break
            start = max(free_at[s], done[dep] if dep else 0.0)
            end = start + cost(kind, s, i, chunk)
            done[(kind, k, i)] = free_at[s] = end
            ops.append((s, i, kind, start, end, chunk))
            cursor[s] += 1
            fed = k + 1 if kind == "F" else k - 1 if kind == "B" else -1
            if 0 <= fed <= last and not queued[device_of[fed]]:
                waiting.append(device_of[fed])
                queued[device_of[fed]] = True
    if any(cursor[s] < len(entries[s]) for s in range(p)):
        raise ValueError("调度死锁：某个阶段在等待一个永远不会执行的操作")
    return ops
