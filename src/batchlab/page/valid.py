"""Which values of a job's counts make a valid job, for the explorers whose controls build a
:class:`~batchlab.formulas.job.Job` (memory, trade-off): a control offers only those values, so a reader
never lands on a refusal by dragging a slider (issue 29: 60 of the memory explorer's 64 micro-batch
positions were refused).

Validity is the job's own: each candidate is tried by making the job (``make``), whose checks are the one
place the rules live (m = G / (b·d) whole, 1F1B's m ≥ p, no more stages than layers, interleaving's m a
multiple of p and the layers in p·v chunks, heads divisible by t); nothing here restates a rule. Making a job costs ~25 µs here, a few times that in the page's Pyodide, and a control tries at
most a few hundred candidates (the divisors of the global batch; the model's layers).
"""
from __future__ import annotations

from itertools import permutations
from typing import Callable, Iterable

from batchlab.formulas.job import LIMITS, Job
from batchlab.formulas.pipeline_schedules import SCHEDULES
from batchlab.formulas.presets import PRESETS
from batchlab.page.spec import Control

__all__ = ["divisors", "candidates", "valid_values", "nearest", "settle", "count_control", "chunk_control", "COUNTS",
           "SCHEDULE_PREFERENCE", "JobMaker"]

COUNTS = ("virtual_stages", "micro_batch_size", "pipeline_stages", "data_parallel", "tensor_parallel")
"""The counts a job's validity ties together, in the order :func:`settle` prefers to move them (an explorer
without one of them leaves it out). The virtual stages first: a schedule or stage count they no longer fit
moves them, not the reader's batch; the tensor-parallel degree last (only a new model's heads refuse it)."""
SCHEDULE_PREFERENCE = ("1f1b", "interleaved-1f1b", "zero-bubble", "gpipe")
"""The schedules a new virtual-stage count moves to, in turn, when the reader's schedule cannot hold it (v ≥ 2
under 1F1B: interleaved 1F1B; v = 1 under interleaving: 1F1B, the lecture's): the first that makes a job."""
TENSOR_PARALLEL_TRIED = 64
"""The tensor-parallel degrees a control tries, 1 … this: more than any preset's heads (gpt2-xl has 25)."""


class JobMaker:
    """values → Job through ``build``, each answer (the job or its refusal) remembered: a change asks for the
    same values many times (each count's options, the settling, the panel). Forgets all past
    :attr:`KEEP` answers, so a long session stays small."""

    KEEP = 4096

    def __init__(self, build: Callable[[dict], Job]) -> None:
        self.build = build
        self.seen: dict[tuple, Job | ValueError] = {}

    def __call__(self, values: dict) -> Job:
        try:
            key = tuple(sorted(values.items()))
            hash(key)
        except TypeError:  # an unhashable value from the page: asked, not remembered
            return self.build(values)
        if key not in self.seen:
            if len(self.seen) >= self.KEEP:
                self.seen.clear()
            try:
                self.seen[key] = self.build(values)
            except ValueError as err:
                self.seen[key] = err
        found = self.seen[key]
        if isinstance(found, ValueError):
            raise found
        return found


def divisors(n: int) -> list[int]:
    """Every whole divisor of ``n`` (≥ 1), ascending: 64 → 1, 2, 4, …, 64."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def candidates(name: str, values: dict, layers: int) -> list[int]:
    """The values of count ``name`` worth trying: for the micro-batch size and the data parallelism the
    divisors of the global batch over the other of the two (any other leaves m fractional), 1 … ``layers``
    for the stages, the divisors of ``layers`` up to the limit for the virtual stages, the divisors of the
    model's heads (1 … :data:`TENSOR_PARALLEL_TRIED` when the model is unknown) for the tensor-parallel degree.
    The job decides which of them are valid."""
    if name == "pipeline_stages":
        return list(range(1, layers + 1))
    if name == "virtual_stages":  # a job cuts its layers into p·v chunks, so only a divisor of them can be one;
        # trying 1 … layers made every change build ~200 jobs and pause for a full garbage collection
        return [v for v in divisors(layers) if v <= LIMITS["virtual_stages"][1]]
    if name == "tensor_parallel":  # t splits the heads, so with a known model only a divisor of its heads can be one
        model = values.get("model")
        model = PRESETS.get(model) if isinstance(model, str) else model
        heads = getattr(model, "n_head", None)
        if isinstance(heads, int) and heads >= 1:
            return divisors(heads)
        return list(range(1, TENSOR_PARALLEL_TRIED + 1))
    batch = values.get("global_batch")
    if not (isinstance(batch, int) and not isinstance(batch, bool) and 1 <= batch <= LIMITS["global_batch"][1]):
        return [1]  # a refused batch: the explorer's refusal names it
    other = values.get("data_parallel" if name == "micro_batch_size" else "micro_batch_size")
    whole = isinstance(other, int) and not isinstance(other, bool) and other >= 1 and batch % other == 0
    return divisors(batch // other if whole else batch)


def valid_values(make: Callable[[dict], Job], values: dict, name: str, tried: Iterable[int]) -> list[int]:
    """The values among ``tried`` for which ``make`` (values → Job) accepts ``values`` with ``name`` set."""
    out = []
    for value in tried:
        try:
            make({**values, name: value})
        except (ValueError, TypeError, KeyError):
            continue
        out.append(value)
    return out


def nearest(options: list[int], value: object) -> int:
    """The option closest to ``value`` (the smaller of two as close; the first when ``value`` is no number)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return options[0]
    return min(options, key=lambda o: (abs(o - value), o))


def settle(make: Callable[[dict], Job], values: dict, changed: str, layers: int) -> dict:
    """``values``, or if they make no valid job, the nearest values that do: the counts other than
    ``changed`` moved to their nearest valid values, as few of them as possible (one, then two, in
    :data:`COUNTS`' order; else all of them, from 1 up). Values the job refuses whatever the counts (a
    refused global batch) are left for the explorer's refusal."""
    try:
        make(values)
        return dict(values)
    except (ValueError, TypeError, KeyError):
        pass
    if changed == "virtual_stages" and values.get("schedule") in SCHEDULES:  # the schedule that holds v chunks
        for schedule in (values["schedule"], *SCHEDULE_PREFERENCE):
            try:
                make({**values, "schedule": schedule})
                return {**values, "schedule": schedule}
            except (ValueError, TypeError, KeyError):
                continue
    free = [n for n in COUNTS if n != changed and n in values]
    for size in (1, 2):
        for names in permutations(free, size):
            found = _fix(make, dict(values), list(names), layers)
            if found is not None:
                return found
    # every free count from 1 (m = G / (1·1) ≥ 1 = p is a job of one chunk per device), but the virtual
    # stages at their smallest valid value (an interleaved schedule needs v ≥ 2); then each as near the
    # reader's as it goes
    settled = {**values, **{n: 1 for n in free}}
    if "virtual_stages" in free:
        chunks = valid_values(make, settled, "virtual_stages", candidates("virtual_stages", settled, layers))
        settled["virtual_stages"] = chunks[0] if chunks else 1
    try:
        make(settled)
    except (ValueError, TypeError, KeyError):
        return dict(values)
    for name in free:
        options = valid_values(make, settled, name, candidates(name, settled, layers))
        settled[name] = nearest(options, values[name])
    return settled


_NEAREST_TRIED = 12
"""How many values of the first of two moved counts :func:`_fix` tries, nearest first: enough to find a
pair near the reader's values, few enough that a refused pair costs milliseconds, not seconds."""


def _fix(make: Callable[[dict], Job], values: dict, names: list[str], layers: int) -> dict | None:
    """``values`` with ``names`` moved (one or two counts): the first to its nearest candidates in turn,
    the last to its nearest valid value; None when no such move makes a valid job."""
    name, rest = names[0], names[1:]
    tried = candidates(name, values, layers)
    if not rest:
        options = valid_values(make, values, name, tried)
        return {**values, name: nearest(options, values[name])} if options else None
    now = values[name] if isinstance(values[name], int) and not isinstance(values[name], bool) else 0
    for value in sorted(tried, key=lambda v: (abs(v - now), v))[:_NEAREST_TRIED]:
        found = _fix(make, {**values, name: value}, rest, layers)
        if found is not None:
            return found
    return None


def count_control(make: Callable[[dict], Job], values: dict, name: str, label: str, layers: int,
                  wide: bool = False) -> Control:
    """The control of count ``name``: a slider over the values that make a valid job with the other
    ``values``. When the job is refused for another reason, the current value stays among them (the
    explorer's refusal says why)."""
    options = valid_values(make, values, name, candidates(name, values, layers))
    now = values.get(name)
    if now not in options and isinstance(now, int) and not isinstance(now, bool):
        options = sorted({*options, now})
    return Control(name, label, "steps", options=tuple((str(v), v) for v in options or [1]), wide=wide)


def chunk_control(make: Callable[[dict], Job], values: dict, label: str, layers: int, wide: bool = False) -> Control:
    """The control of the virtual stages (model chunks per device): a slider over the counts that make a valid
    job with the other values under some schedule (1 under GPipe and 1F1B, v ≥ 2 interleaved, 2 for ZB-V), so
    a count the reader's schedule cannot hold is offered too, and :func:`settle` moves the schedule to one that
    can (:data:`SCHEDULE_PREFERENCE`)."""
    tried = candidates("virtual_stages", values, layers)
    options = sorted({v for schedule in SCHEDULES
                      for v in valid_values(make, {**values, "schedule": schedule}, "virtual_stages", tried)})
    now = values.get("virtual_stages")
    if now not in options and isinstance(now, int) and not isinstance(now, bool):
        options = sorted({*options, now})
    return Control("virtual_stages", label, "steps", options=tuple((str(v), v) for v in options or [1]), wide=wide)
