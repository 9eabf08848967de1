"""A job's stored in-flight counts and stages under interleaved 1F1B and zero bubble (v chunks per device)."""
from dataclasses import replace

import pytest

from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import in_flight_chunks, pipeline_timeline
from batchlab.formulas.presets import get_config

CASE = Job(get_config("gpt2-xl"), seq_len=1024, global_batch=16, micro_batch_size=1, pipeline_stages=4,
           data_parallel=2)   # the lecture's case: p = 4, m = 8


@pytest.mark.parametrize("schedule, v, chunks, microbatches", [
    ("1f1b", 1, (4, 3, 2, 1), (4, 3, 2, 1)),
    ("interleaved-1f1b", 2, (11, 9, 7, 5), (6, 5, 4, 3)),
    ("interleaved-1f1b", 4, (19, 17, 15, 13), (5, 5, 4, 4)),
    ("zero-bubble", 1, (4, 4, 4, 4), (4, 4, 4, 4)),
    ("zero-bubble", 2, (8, 8, 8, 8), (4, 4, 4, 4)),
])
def test_stored_in_flight_counts_follow_the_schedule(schedule, v, chunks, microbatches):
    job = replace(CASE, schedule=schedule, virtual_stages=v)
    assert job.in_flight_chunks == chunks and job.in_flight_microbatches == microbatches
    assert list(chunks) == pipeline_timeline(schedule, 4, 8, virtual_stages=v).peak_in_flight()
    assert list(chunks) == in_flight_chunks(schedule, 4, 8, v)


def test_stages_place_the_head_as_the_schedule_does():
    zbv = replace(CASE, schedule="zero-bubble", virtual_stages=2)
    assert [(s.has_embedding, s.has_head) for s in zbv.stages] == [(True, True)] + [(False, False)] * 3
    interleaved = replace(CASE, schedule="interleaved-1f1b", virtual_stages=2)
    assert [s.has_head for s in interleaved.stages] == [False, False, False, True]
    assert [len(s.chunks) for s in interleaved.stages] == [2] * 4
    assert [s.num_layers for s in zbv.stages] == [s.num_layers for s in CASE.stages] == [12] * 4


def test_a_job_with_chunks_refuses_an_uneven_partition():
    with pytest.raises(ValueError, match="method = 'compute'：每张卡多段模型时各段层数相等"):
        replace(CASE, schedule="interleaved-1f1b", virtual_stages=2, partition="compute")
    with pytest.raises(ValueError, match="pipeline_stages × virtual_stages"):
        replace(CASE, schedule="interleaved-1f1b", virtual_stages=5)
