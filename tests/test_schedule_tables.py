"""4.7's schedule tables (batchlab.ui.schedules): the verdict that the fastest micro-batch moves with the schedule
flips on a contrary table, and the tables carry the closed forms and the model's numbers, not others."""
from __future__ import annotations

from dataclasses import replace

import pytest

from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.formulas.roofline import DEVICE_PRESETS
from batchlab.formulas.throughput import model_step
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.schedules import (best_micro_batches, best_moves, schedule_bubble_table, schedule_speed_table,
                                   tokens_by_schedule)

NPU = DEVICE_PRESETS["ascend-910b"]


def test_the_verdict_flips_on_a_contrary_table():
    moved = {"1F1B": {1: 10.0, 2: 9.0, 4: 8.0}, "零气泡": {1: 10.0, 2: 11.0, 4: 10.5}}
    assert best_micro_batches(moved) == {"1F1B": 1, "零气泡": 2} and best_moves(moved)
    same = {**moved, "零气泡": {1: 12.0, 2: 11.0, 4: 10.5}}   # the contrary table: both fastest at 1
    assert best_micro_batches(same) == {"1F1B": 1, "零气泡": 1} and not best_moves(same)
    assert best_micro_batches({"x": {4: 1.0, 2: 1.0}}) == {"x": 2}   # equals: the smaller micro-batch


def test_the_lecture_case_does_not_move_and_a_shorter_sequence_does():
    """The numbers 4.7 prints: on the case's 910B roofline (compute-bound from M = 1024) every schedule is
    fastest at micro-batch 1; at sequence length 256 on the high end the zero-bubble schedules move to 2."""
    case = CASE_STUDY.job
    assert not best_moves(tokens_by_schedule(case, NPU.curve(case.model, "low")))
    short = replace(case, seq_len=256)
    best = best_micro_batches(tokens_by_schedule(short, NPU.curve(short.model, "high")))
    assert best["1F1B"] == 1 and best["零气泡（ZB-V）"] == 2


def test_the_speed_table_is_the_models():
    case = CASE_STUDY.job
    curve = NPU.curve(case.model, "low")
    table = tokens_by_schedule(case, curve)
    want = model_step(replace(case, micro_batch_size=4, schedule="interleaved-1f1b", virtual_stages=2), curve)
    assert table["交错式 1F1B（v = 2）"][4] == want.tokens_per_second
    assert 16 not in table["1F1B"]          # m = 2 < p: 1F1B cannot run it, the table shows a dash
    lines = str(schedule_speed_table(table)).splitlines()
    assert [line.split()[-1] for line in lines[1:]] == ["1"] * 4   # each schedule's fastest, last
    assert lines[1].split()[:2] == ["1F1B", "184,000"]


@pytest.mark.parametrize("p, m", [(4, 8), (2, 4), (4, 12)])
def test_the_bubble_table_prints_the_closed_form_beside_the_simulator(p, m):
    rows = [line.split() for line in str(schedule_bubble_table(p, m)).splitlines()[1:]]
    for row, (schedule, v) in zip(rows, [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("zero-bubble", 1),
                                         ("zero-bubble", 2)]):
        formula, simulated = row[-5], row[-4]
        assert formula == simulated == f"{100 * bubble_fraction(p, m, schedule, v):.1f}%"


def tensor_parallel_jobs(seq_len=1024):
    """The three 8-card layouts 4.7 compares, t·p·d = 1·4·2, 2·4·1, 4·2·1, on the 32-head gpt2-xl."""
    from batchlab.lecture.replan import REPLAN_MODEL

    case = replace(CASE_STUDY.job, model=REPLAN_MODEL, seq_len=seq_len)
    return [replace(case, tensor_parallel=t, pipeline_stages=p, data_parallel=d) for t, p, d in ((1, 4, 2), (2, 4, 1),
                                                                                                 (4, 2, 1))]


def test_the_tensor_parallel_table_is_the_models():
    from batchlab.formulas.comm import tensor_parallel_bytes_per_layer
    from batchlab.ui.schedules import tensor_parallel_speeds, tensor_parallel_table

    jobs = tensor_parallel_jobs()
    lines = str(tensor_parallel_table(jobs, NPU, (50e9, 200e9))).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["1·4·2", "2·4·1", "4·2·1"]
    assert "[1024, 1600] × [1600, 3200]" in lines[2] and "12.5 MiB" in lines[2]
    assert tensor_parallel_bytes_per_layer(replace(jobs[1], micro_batch_size=1)) == 4 * 1024 * 1600 * 2  # 4 × 2(t−1)/t
    # the verdict 4.7 prints: t does not move the case's fastest micro-batch, it does at sequence length 256
    assert not best_moves(tensor_parallel_speeds(jobs, NPU, 50e9))
    assert best_moves(tensor_parallel_speeds(tensor_parallel_jobs(256), NPU, 50e9, "high"))
