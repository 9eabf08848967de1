"""Our schedule orders are torch 2.13's: each device's compute actions in ``pipeline_order`` of
``ScheduleInterleaved1F1B``, ``ScheduleInterleavedZeroBubble`` (one stage per rank: ZB-H1) and
``ScheduleZBVZeroBubble``, built by the classes' own constructors on stand-in stages (no process group,
nothing run: a schedule's constructor only reads the stages' rank, group size, indices and count)."""
import types

import pytest

torch_schedules = pytest.importorskip("torch.distributed.pipelining.schedules")

from batchlab.formulas.pipeline_schedules import (placement_of, runnable, schedule_order,  # noqa: E402
                                                  virtual_stage)

CLASSES = {("interleaved-1f1b", "many"): torch_schedules.ScheduleInterleaved1F1B,
           ("zero-bubble", 1): torch_schedules.ScheduleInterleavedZeroBubble,
           ("zero-bubble", 2): torch_schedules.ScheduleZBVZeroBubble}
KIND = {"F": "F", "B": "B", "I": "B", "W": "W"}   # torch's I (input gradient) is our split B


def _stages(schedule, p, v, rank):
    """Stand-ins for the ``PipelineStage`` objects of ``rank``, in our local chunk order."""
    return [types.SimpleNamespace(group_size=p, group_rank=rank, num_stages=p * v, submod=None,
                                  stage_index=(k := virtual_stage(rank, c, p, placement_of(schedule, v))),
                                  is_first=k == 0, is_last=k == p * v - 1) for c in range(v)]


def torch_order(schedule, p, m, v):
    """Each rank's compute actions in torch's ``pipeline_order``, as (kind, microbatch, chunk)."""
    cls = CLASSES[(schedule, "many" if schedule == "interleaved-1f1b" else v)]
    built = cls(_stages(schedule, p, v, 0), m)
    orders = []
    for rank in range(p):
        chunk_of = {st.stage_index: c for c, st in enumerate(_stages(schedule, p, v, rank))}
        orders.append([(KIND[a.computation_type.value], a.microbatch_index, chunk_of[a.stage_index])
                       for a in built.pipeline_order[rank] if a is not None and a.is_compute_op])
    return orders


GRID = [(schedule, p, m, v) for schedule, vs in (("interleaved-1f1b", (2, 3, 4)), ("zero-bubble", (1, 2)))
        for v in vs for p in range(1, 7) for m in range(1, 4 * p + 3) if runnable(schedule, p, m, v)]


@pytest.mark.parametrize("schedule, p, m, v", GRID)
def test_our_orders_are_torchs(schedule, p, m, v):
    assert schedule_order(schedule, p, m, v) == torch_order(schedule, p, m, v)


def test_the_comparison_sees_a_different_order():
    # the check can fail: 1F1B's order is not interleaved 1F1B's, nor ZB-H1's
    assert [[(k, i, 0) for k, i in order] for order in schedule_order("1f1b", 4, 8)] != \
        torch_order("zero-bubble", 4, 8, 1)
    swapped = [order[::-1] for order in schedule_order("interleaved-1f1b", 4, 8, 2)]
    assert swapped != torch_order("interleaved-1f1b", 4, 8, 2)


@pytest.mark.parametrize("p, m", [(4, 9), (4, 11), (2, 5), (3, 7)])
def test_zbh1_refuses_what_torch_refuses(p, m):
    # ZB-H1's extra rule is torch's: m a multiple of its ⌊m/p⌋ rounds
    assert not runnable("zero-bubble", p, m, 1) and runnable("zero-bubble", p, m - 1, 1)
    with pytest.raises(ValueError, match="multiple of the number of rounds"):
        CLASSES[("zero-bubble", 1)](_stages("zero-bubble", p, 1, 0), m)
