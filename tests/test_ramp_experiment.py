"""Batch-size ramp-up in training (4.8): the noise-driven rule, train's ramp, the runner, and the verdict that a
contrary measurement flips."""
import math

import pytest
import torch

from batchlab.formulas.job import Job
from batchlab.formulas.presets import get_config
from batchlab.formulas.rampup import Rampup, noise_batch
from batchlab.lecture.ramp_verdict import RAMP_STEP_SAVING, ramp_verdict, saves_steps, step_saving
from batchlab.lecture.verdicts import UNTESTABLE, VERDICT
from batchlab.measure.data import make_corpus
from batchlab.measure.model import GPT, BigramLM
from batchlab.measure.ramp import NoiseRamp, NoiseRule, ramp_runs
from batchlab.measure.train import steps_to_target, train


@pytest.fixture(scope="module")
def data():
    return make_corpus(256, 8, seed=3)


# ── the noise-driven rule (formulas) ─────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("b_simple, current, expected", [
    (50.0, None, 32), (64.0, None, 64), (500.0, None, 64), (3.0, None, 8),   # largest allowed ≤ B_simple, clipped
    (10.0, 32, 32),                                                         # a ramp never shrinks
    (math.nan, 16, 16), (-5.0, None, 8), (math.inf, 16, 16),                 # no usable estimate: keep
])
def test_noise_batch_takes_the_largest_allowed_size_below_the_noise_scale(b_simple, current, expected):
    assert noise_batch(b_simple, (8, 16, 32, 64), current) == expected


def test_noise_batch_refuses_bad_sizes():
    with pytest.raises(ValueError, match="allowed 为空"):
        noise_batch(10.0, ())
    with pytest.raises(ValueError, match="allowed = 0"):
        noise_batch(10.0, (0, 8))


# ── train with a ramp ────────────────────────────────────────────────────────────────────────────────

def test_a_rampup_sizes_each_step_by_megatrons_rule_and_stops_at_the_sample_budget(data):
    ramp = Rampup(4, 4, 64, 16)
    h = train(BigramLM(64), data, ramp=ramp, samples=200, optimizer="sgd", lr=1.0)
    consumed = [0, *h.samples_seen[:-1]]
    assert h.batch_sizes[:-1] == [ramp.global_batch_at(n) for n in consumed[:-1]]
    assert h.samples_seen[-1] == 200                       # the last step takes only the rest
    assert h.batch_sizes[-1] == 200 - consumed[-1] <= 16
    assert h.batch_sizes[0] == 4 and max(h.batch_sizes) == 16


def test_a_callable_ramp_and_the_lr_rules(data):
    steps = {"none": 30.0, "sqrt": 60.0, "linear": 120.0}   # batch 4 → 16: ×1, ×√4, ×4
    for rule, lr_at_16 in steps.items():
        h = train(BigramLM(64), data, ramp=lambda n: 4 if n < 8 else 16, steps=3, optimizer="sgd", lr=30.0,
                  lr_rule=rule)
        assert h.batch_sizes == [4, 4, 16]
        assert h.lr == pytest.approx([30.0, 30.0, lr_at_16])


def test_batch_increase_still_sizes_by_step(data):
    h = train(BigramLM(64), data, batch_size=4, batch_increase=(3, 2), steps=4, optimizer="sgd", lr=1.0)
    assert h.batch_sizes == [4, 4, 8, 8]


def test_a_jobs_ramp_keeps_the_micro_batch_and_grows_m(data):
    job = Job(get_config("tiny"), seq_len=8, global_batch=8, micro_batch_size=2)
    torch.manual_seed(0)
    model = GPT(get_config("tiny"))
    h = train(model, data, job=job, ramp=Rampup(4, 4, 8, 8), steps=3, lr=1e-3)
    assert h.batch_sizes == [4, 4, 8]
    with pytest.raises(ValueError, match="第 1 步的批大小 = 5 不能被 micro_batch_size = 2 整除"):
        train(GPT(get_config("tiny")), data, job=job, ramp=lambda n: 5, steps=1, lr=1e-3)


@pytest.mark.parametrize("kwargs, message", [
    ({"ramp": Rampup(4, 4, 8, 8), "batch_size": 4, "steps": 2}, "ramp 与 batch_size 只能给一种"),
    ({"ramp": Rampup(4, 4, 8, 8), "batch_increase": (2, 2), "steps": 2}, "batch_increase 与 ramp 只能给一种"),
    ({"ramp": 8, "steps": 2}, "ramp = int"),
    ({"ramp": lambda n: 0, "steps": 2}, "第 1 步的批大小 = 0"),
    ({"ramp": lambda n: 999, "steps": 2}, "第 1 步的批大小 = 999 超过了 len\\(data\\)"),
    ({"batch_size": 4}, "steps 与 samples 恰好给一个"),
    ({"batch_size": 4, "steps": 2, "samples": 8}, "steps 与 samples 恰好给一个"),
    ({"batch_size": 4, "samples": 8, "decay": "cosine"}, "只能用 \"constant\""),
    ({"batch_size": 4, "steps": 2, "lr_rule": "cubic"}, "lr_rule = 'cubic'"),
])
def test_bad_ramps_raise_with_a_message(data, kwargs, message):
    with pytest.raises(ValueError, match=message):
        train(BigramLM(64), data, optimizer="sgd", lr=1.0, **kwargs)


def test_the_noise_ramp_measures_grows_and_stops_measuring_at_the_top(data):
    model = BigramLM(64)
    ramp = NoiseRamp(model, data, NoiseRule((4, 8, 16), every=32, b_small=4, b_big=16, num_pairs=2), seed=1)
    h = train(model, data, ramp=ramp, samples=256, optimizer="sgd", lr=30.0)
    assert h.batch_sizes == sorted(h.batch_sizes)                      # only grows
    chosen = [r.batch for r in ramp.readings]
    assert all(noise_batch(r.b_simple, (4, 8, 16)) <= r.batch for r in ramp.readings)
    assert chosen[-1] == 16 or len(ramp.readings) == 256 // 32          # measures until the top, no more
    assert [r.consumed for r in ramp.readings] == sorted({r.consumed for r in ramp.readings})


# ── the verdict: its criterion, and contrary measurements flip it ──────────────────────────────────────

def test_the_verdict_flips_with_the_measurement():
    constant = [300, 240, 310]
    assert ramp_verdict([110, 100, 120], constant) == VERDICT[True]
    assert ramp_verdict([None, None, None], constant) == VERDICT[False]                    # never reached
    assert ramp_verdict([290, 230, 300], constant) == VERDICT[False]                       # < 10 % fewer
    assert ramp_verdict([110, None, 120], constant) == UNTESTABLE                          # seeds split
    assert saves_steps(int(300 * (1 - RAMP_STEP_SAVING)), 300) and not saves_steps(271, 300)
    assert step_saving(None, 300) is None and step_saving(150, 300) == 0.5
    with pytest.raises(ValueError, match="一一对应"):
        ramp_verdict([1], [1, 2])
    with pytest.raises(ValueError, match="constant_steps = 0"):
        step_saving(1, 0)


def test_a_fast_real_run_at_equal_samples():
    """The chapter's experiment, one seed: every run uses the same samples; the sqrt-following ramp reaches the
    constant batch's final loss in fewer steps, the constant-learning-rate ramp does not (this model, this budget)."""
    data = make_corpus(num_sequences=4096, seq_len=16, seed=0)
    held = make_corpus(num_sequences=256, seq_len=16, seed=0, sample_seed=1000)
    vocab = data.source.vocab_size
    linear = Rampup(8, 8, 2048, 64)
    runs = ramp_runs(lambda: BigramLM(vocab), data, held, {"B=8": 8, "ramp": linear, "ramp sqrt": (linear, "sqrt")},
                     samples=4096, lr=30.0, seeds=(0,), eval_every=2)
    assert {h.samples_seen[-1] for hs in runs.histories.values() for h in hs} == {4096}
    target = runs.histories["B=8"][0].final_eval_loss
    steps = {name: [steps_to_target(h, target) for h in hs] for name, hs in runs.histories.items()}
    assert ramp_verdict(steps["ramp sqrt"], steps["B=8"]) == VERDICT[True]
    assert ramp_verdict(steps["ramp"], steps["B=8"]) == VERDICT[False]
