"""Chapter 4.7's two re-plans of the 原文's case (batchlab.lecture.replan): each criterion flips on a contrary input."""
from __future__ import annotations

from dataclasses import replace

import pytest

from batchlab.formulas.presets import count_params, get_config
from batchlab.formulas.roofline import DEVICE_PRESETS
from batchlab.lecture.case import CASE_STUDY
from batchlab.lecture.replan import (ASSUMED_LINK_BANDWIDTHS, HYPOTHETICAL_CURVE, REPLAN_MODEL, recommendation_moves,
                                     replanned)

CASE = CASE_STUDY.job


def test_the_32_head_variant_has_gpt2_xl_parameters_and_splits_by_2_and_4():
    assert count_params(REPLAN_MODEL) == count_params(get_config("gpt2-xl"))
    assert REPLAN_MODEL.d_model == CASE.model.d_model and REPLAN_MODEL.n_head == 32
    for t in (2, 4):
        assert replace(CASE, model=REPLAN_MODEL, tensor_parallel=t).tensor_parallel == t
    with pytest.raises(ValueError, match="25"):
        replanned(CASE)  # gpt2-xl's own 25 heads refuse t = 2


def test_replanned_keeps_the_devices_and_refuses_what_does_not_divide():
    job = replace(CASE, model=REPLAN_MODEL)
    tp = replanned(job)
    assert (tp.tensor_parallel, tp.pipeline_stages, tp.data_parallel) == (2, 4, 1)
    assert tp.devices == job.devices == 8 and tp.num_microbatches == 2 * job.num_microbatches
    with pytest.raises(ValueError, match="data_parallel"):
        replanned(tp)  # d = 1 has no factor 2 left


def test_assumed_bandwidths_are_a_range():
    low, high = ASSUMED_LINK_BANDWIDTHS
    assert 0 < low < high
    assert DEVICE_PRESETS["ascend-910b"].link_bandwidth is None  # still no sourced figure: they stay assumptions


def test_the_recommendation_verdict_flips_on_a_contrary_rate_curve():
    roofline = DEVICE_PRESETS["ascend-910b"].curve(CASE.model, "low")
    same = recommendation_moves(CASE, roofline)
    assert not same["moves"]
    assert same["before"]["recommended"]["micro_batch_size"] == same["after"]["recommended"]["micro_batch_size"]
    # a device whose rate still grows by 12% from M = 2048 to 4096: 1F1B's bubble (15.8% → 27.3%) costs more than
    # that, interleaved 1F1B's (8.6% → 15.8%) less, so the larger micro-batch wins only when interleaved
    moved = recommendation_moves(CASE, HYPOTHETICAL_CURVE)
    assert moved["moves"]
    assert (moved["before"]["recommended"]["micro_batch_size"], moved["after"]["recommended"]["micro_batch_size"]) == (2, 4)



def test_the_verdict_counts_a_schedule_that_fits_nothing_as_a_move():
    roofline = DEVICE_PRESETS["ascend-910b"].curve(CASE.model, "low")
    # 16 GiB: 1F1B still fits micro-batch 1 (about 15 GiB), interleaved 1F1B holds 1 + 3/8 as much on stage 0
    small = replace(CASE, device_memory_gib=16)
    result = recommendation_moves(small, roofline)
    assert result["before"]["recommended"]["micro_batch_size"] == 1 and result["after"]["recommended"] is None
    assert result["moves"]
