"""The ramp-up formula reads ``--rampup-batch-size`` as Megatron-LM does: compared with a port of its calculator
on random configurations — the batch at each consumed sample, the micro-batches of the step, what it
rounds and what it refuses — and the ramp's stages under a job's pipeline."""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod

import pytest
from hypothesis import given, settings, strategies as st

from batchlab.formulas.job import Job
from batchlab.formulas.presets import get_config
from batchlab.formulas.rampup import RAMP_STAGES_LIMIT, Rampup, ramp_stages

# ── Megatron-LM's calculator, ported ─────────────────────────────────────────────────────────────
# From https://github.com/NVIDIA/Megatron-LM/blob/0b9bc2088b6d6c858275d02638064cc7e0bf8b70/megatron/core/num_microbatches_calculator.py
# (the last commit with the ramp-up calculator; 532ad926 replaced it with the step schedule). The class and
# its helper as they are there, logging left out; an assert stays an assert, so a refusal is AssertionError
# (or the ZeroDivisionError it hits at start = G and at ramp samples 0).


def _round(batch_size: int, divisor: int) -> int:
    """Round `batch_size` down to nearest batch size divisible by `divisor`."""
    return (batch_size // divisor) * divisor


class NumMicroBatchesCalculator(ABC):
    def __init__(self) -> None:
        self.num_micro_batches = None
        self.current_global_batch_size = None
        self.micro_batch_size = None
        self.current_running_global_batch_size = None

    def get(self) -> int:
        return self.num_micro_batches

    def get_current_global_batch_size(self) -> int:
        return self.current_global_batch_size

    def get_current_running_global_batch_size(self) -> int:
        return self.current_running_global_batch_size

    @abstractmethod
    def update(self, consumed_samples, consistency_check, verbose=False) -> None:
        pass


class RampupBatchsizeNumMicroBatchesCalculator(NumMicroBatchesCalculator):
    def __init__(self, global_batch_size, micro_batch_size, data_parallel_size, decrease_batch_size_if_needed,
                 rank, start_global_batch_size, batch_size_increment, ramup_samples) -> None:
        assert global_batch_size > 0
        assert start_global_batch_size > 0
        assert batch_size_increment > 0
        assert ramup_samples >= 0

        self.global_batch_size = global_batch_size
        self.micro_batch_size = micro_batch_size
        self.data_parallel_size = data_parallel_size
        self.decrease_batch_size_if_needed = decrease_batch_size_if_needed
        self.rank = rank
        self.start_global_batch_size = start_global_batch_size
        self.batch_size_increment = batch_size_increment
        self.ramup_samples = ramup_samples

        self.micro_batch_times_data_parallel_size = self.micro_batch_size * self.data_parallel_size
        assert self.micro_batch_times_data_parallel_size > 0
        self.current_global_batch_size = None

        diff_batch_size = self.global_batch_size - self.start_global_batch_size
        assert diff_batch_size >= 0
        assert diff_batch_size % batch_size_increment == 0

        num_increments = diff_batch_size // self.batch_size_increment
        self.rampup_samples_per_increment = self.ramup_samples / num_increments

        self.update(0, consistency_check=False, verbose=True)

    def update(self, consumed_samples: int, consistency_check: bool, verbose: bool = False) -> None:
        if consumed_samples > self.ramup_samples:
            self.current_global_batch_size = self.global_batch_size
        else:
            steps = int(consumed_samples / self.rampup_samples_per_increment)
            self.current_global_batch_size = self.start_global_batch_size + steps * self.batch_size_increment
            assert self.current_global_batch_size <= self.global_batch_size

        if consistency_check and not self.decrease_batch_size_if_needed:
            assert self.current_global_batch_size % self.micro_batch_times_data_parallel_size == 0

        if (self.decrease_batch_size_if_needed
                and self.current_global_batch_size % self.micro_batch_times_data_parallel_size != 0):
            self.current_running_global_batch_size = _round(self.current_global_batch_size,
                                                            self.micro_batch_times_data_parallel_size)
            assert self.current_running_global_batch_size % self.micro_batch_times_data_parallel_size == 0
        else:
            self.current_running_global_batch_size = self.current_global_batch_size

        self.num_micro_batches = self.current_running_global_batch_size // self.micro_batch_times_data_parallel_size


def megatron(ramp: Rampup, micro: int = 1, dp: int = 1, decrease: bool = False):
    return RampupBatchsizeNumMicroBatchesCalculator(ramp.global_batch, micro, dp, decrease, 0, ramp.start,
                                                    ramp.increment, ramp.ramp_samples)


# ── random configurations ────────────────────────────────────────────────────────────────────────

@st.composite
def ramps(draw, max_increments: int = 200):
    start = draw(st.integers(1, 2048))
    increment = draw(st.integers(1, 512))
    k = draw(st.integers(1, max_increments))
    samples = draw(st.one_of(st.integers(1, 10_000), st.integers(1, 10**12)))
    return Rampup(start, increment, samples, start + k * increment)


def consumed(ramp: Rampup):
    return st.one_of(st.integers(0, 2 * ramp.ramp_samples + 1),
                     st.sampled_from([0, ramp.ramp_samples - 1, ramp.ramp_samples, ramp.ramp_samples + 1]))


@settings(max_examples=400, deadline=None)
@given(ramps(), st.data())
def test_the_batch_at_each_sample_is_megatrons(ramp, data):
    reference = megatron(ramp)
    for _ in range(20):
        n = data.draw(consumed(ramp))
        reference.update(n, consistency_check=False)
        assert ramp.global_batch_at(n) == reference.get_current_global_batch_size()


@settings(max_examples=400, deadline=None)
@given(ramps(max_increments=40), st.integers(1, 16), st.integers(1, 16), st.data())
def test_the_micro_batches_of_a_step_and_the_refusals_are_megatrons(ramp, micro, dp, data):
    """Megatron-LM checks every step's batch against b · d (an assert); the book refuses the same steps in
    batching's line and counts the same m where it runs."""
    reference = megatron(ramp, micro, dp)
    for _ in range(10):
        n = data.draw(consumed(ramp))
        try:
            reference.update(n, consistency_check=True)
        except AssertionError:
            with pytest.raises(ValueError, match="不能被 micro_batch_size × data_parallel"):
                ramp.num_microbatches_at(n, micro, dp)
        else:
            assert ramp.num_microbatches_at(n, micro, dp) == reference.get()


@settings(max_examples=300, deadline=None)
@given(ramps(max_increments=40), st.integers(1, 16), st.integers(1, 16), st.data())
def test_megatrons_rounding_down_is_refused_where_it_would_shrink_the_batch(ramp, micro, dp, data):
    """With ``decrease_batch_size_if_needed`` Megatron-LM rounds the batch down to a multiple of b · d (to zero
    micro-batches when the batch is below b · d); the book runs exactly the batches it leaves alone."""
    reference = megatron(ramp, micro, dp, decrease=True)
    n = data.draw(consumed(ramp))
    reference.update(n, consistency_check=True)
    shrunk = reference.get_current_running_global_batch_size() < reference.get_current_global_batch_size()
    if shrunk:
        with pytest.raises(ValueError):
            ramp.num_microbatches_at(n, micro, dp)
    else:
        assert ramp.num_microbatches_at(n, micro, dp) == reference.get() >= 1


@settings(max_examples=500, deadline=None)
@given(st.integers(-2, 40), st.integers(-2, 12), st.integers(-2, 300), st.integers(1, 60))
def test_a_ramp_is_refused_exactly_where_megatron_refuses_it(start, increment, samples, target):
    """Megatron-LM's asserts (and the two divisions by zero its asserts let through: start = G, 0 samples)
    against the book's one Chinese line per rule."""
    try:
        RampupBatchsizeNumMicroBatchesCalculator(target, 1, 1, False, 0, start, increment, samples)
    except (AssertionError, ZeroDivisionError):
        with pytest.raises(ValueError) as refused:
            Rampup(start, increment, samples, target)
        line = str(refused.value)
        assert "\n" not in line and any("\u4e00" <= ch <= "\u9fff" for ch in line)
    else:
        Rampup(start, increment, samples, target)


@pytest.mark.parametrize("args, line", [
    ((0, 16, 6000, 64), "rampup_start = 0：必须是 ≥ 1 的整数"),
    ((16, -1, 6000, 64), "rampup_increment = -1：必须是 ≥ 1 的整数"),
    ((16, 16, 0, 64), "rampup_samples = 0：必须是 ≥ 1 的整数"),
    ((16, 16, 10**30, 64), "rampup_samples = 1000000000000000000000000000000 超过了 上限 = 9007199254740992"),
    ((64, 16, 6000, 64), "rampup_start = 64：爬升的起始批次必须小于目标 global_batch = 64"),
    ((100, 16, 6000, 64), "rampup_start = 100：爬升的起始批次必须小于目标 global_batch = 64"),
    ((7, 16, 6000, 64), "global_batch − rampup_start = 57 不能被 rampup_increment = 16 整除"),
    ((16.0, 16, 6000, 64), "rampup_start = 16.0：必须是 ≥ 1 的整数"),
])
def test_each_rule_has_its_one_line(args, line):
    with pytest.raises(ValueError) as refused:
        Rampup(*args)
    assert str(refused.value).startswith(line) and "\n" not in str(refused.value)


def test_the_float_reading_is_megatrons_and_differs_from_exact_arithmetic():
    """Megatron-LM divides by ramp_samples / k as a float; exact arithmetic ⌊n · k / R⌋ reads some samples
    one increment higher. The formula keeps the float, and a formula that took the exact reading is caught."""
    ramp = Rampup(1, 1, 10, 59)  # k = 58 increments over 10 samples
    reference = megatron(ramp)
    reference.update(5, consistency_check=False)
    assert ramp.global_batch_at(5) == reference.get_current_global_batch_size() == 1 + 28
    exact = ramp.start + 5 * ramp.num_increments // ramp.ramp_samples * ramp.increment
    assert exact == 1 + 29 != reference.get_current_global_batch_size()
    ramp = Rampup(1, 1, 5, 30)  # at n = ramp_samples the float falls one increment short of G
    reference.__init__(30, 1, 1, False, 0, 1, 1, 5)
    reference.update(5, consistency_check=False)
    assert ramp.global_batch_at(5) == reference.get_current_global_batch_size() == 29 != ramp.global_batch


def test_a_misread_ramp_is_caught_by_the_comparison():
    """The comparison can fail: a ramp that switches to G at n = ramp_samples, or that rounds the increments
    to the nearest instead of down, disagrees with Megatron-LM's calculator on the grid."""
    def misreads(read) -> bool:
        for ramp in (Rampup(16, 16, 6000, 64), Rampup(1, 1, 5, 30), Rampup(8, 8, 1000, 1536)):
            reference = megatron(ramp)
            for n in range(0, ramp.ramp_samples + 2, max(1, ramp.ramp_samples // 500)):
                reference.update(n, consistency_check=False)
                if read(ramp, n) != reference.get_current_global_batch_size():
                    return True
        return False

    assert not misreads(Rampup.global_batch_at)
    assert misreads(lambda r, n: r.global_batch if n >= r.ramp_samples else r.global_batch_at(n))
    assert misreads(lambda r, n: min(r.global_batch,
                                     r.start + round(n / r.samples_per_increment) * r.increment))


# ── the ramp meets the pipeline ──────────────────────────────────────────────────────────────────

CASE = Job(get_config("gpt2-xl"), seq_len=1024, global_batch=64, micro_batch_size=2, pipeline_stages=4,
           data_parallel=2)


def simulate(ramp: Rampup, micro: int, dp: int) -> dict[int, int]:
    """Megatron-LM's training loop: update before each step, then add the step's batch to the samples."""
    reference, n, steps = megatron(ramp, micro, dp), 0, {}
    while n <= ramp.ramp_samples:
        reference.update(n, consistency_check=False)
        batch = reference.get_current_global_batch_size()
        steps[batch] = steps.get(batch, 0) + 1
        n += batch
    return steps


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 20), st.integers(1, 5000))
def test_each_stage_lasts_the_samples_and_steps_of_megatrons_loop(start, increment, k, samples):
    ramp = Rampup(start, increment, samples, start + k * increment)
    job = Job(get_config("tiny"), seq_len=8, global_batch=ramp.global_batch, micro_batch_size=1)
    stages = ramp_stages(job, ramp)
    assert [s.global_batch for s in stages] == list(range(start, ramp.global_batch + 1, increment))
    for stage in stages:  # the samples each stage covers: the batch there is its own (a stage of 0 samples
        # is passed over: more than one increment falls on one sample), and the one before is smaller
        reached = ramp.global_batch_at(stage.first_sample)
        assert reached == stage.global_batch if stage.samples != 0 else reached > stage.global_batch
        if stage.first_sample > 0:
            assert ramp.global_batch_at(stage.first_sample - 1) < stage.global_batch
    ran = simulate(ramp, 1, 1)
    assert {s.global_batch: s.steps for s in stages[:-1] if s.steps} == \
        {b: n for b, n in ran.items() if b != ramp.global_batch}


def test_the_lectures_case_ramps_its_bubble_down():
    stages = ramp_stages(CASE, Rampup(16, 16, 6000, 64))
    assert [(s.global_batch, s.num_microbatches, s.samples, s.steps) for s in stages] == [
        (16, 4, 2000, 125), (32, 8, 2000, 63), (48, 12, 2000, 42), (64, 16, None, None)]
    assert [s.bubble_fraction for s in stages] == [3 / 7, 3 / 11, 3 / 15, 3 / 19]
    assert all(s.refusal is None for s in stages)
    interleaved = dataclasses.replace(CASE, schedule="interleaved-1f1b", virtual_stages=2)
    assert [s.bubble_fraction for s in ramp_stages(interleaved, Rampup(16, 16, 6000, 64))] == \
        [3 / 11, 3 / 19, 3 / 27, 3 / 35]


def test_a_stage_the_job_cannot_run_carries_the_jobs_own_line():
    stages = ramp_stages(CASE, Rampup(4, 2, 6000, 64))
    for stage in stages:
        try:
            dataclasses.replace(CASE, global_batch=stage.global_batch)
        except ValueError as err:
            assert stage.refusal == str(err) and stage.bubble_fraction is None
        else:
            assert stage.refusal is None and stage.bubble_fraction is not None
    by_batch = {s.global_batch: s for s in stages}
    assert by_batch[8].num_microbatches == 2 and "1F1B 要求微批次数 ≥ 流水线阶段数" in by_batch[8].refusal
    assert by_batch[6].num_microbatches is None and "不能被 micro_batch_size × data_parallel" in by_batch[6].refusal


def test_too_many_stages_are_refused_in_one_line():
    big = dataclasses.replace(CASE, global_batch=4 * RAMP_STAGES_LIMIT + 4)
    assert len(ramp_stages(big, Rampup(8, 4, 10**6, big.global_batch))) == RAMP_STAGES_LIMIT
    with pytest.raises(ValueError, match="爬升阶段数 .* 超过了 上限 = 1024"):
        ramp_stages(big, Rampup(4, 4, 10**6, big.global_batch))
    with pytest.raises(ValueError, match="目标批次"):
        ramp_stages(CASE, Rampup(16, 16, 6000, 128))
