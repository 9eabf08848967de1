"""The modelled step time of 4.4: FLOPs by hand, the rate curve, the bubble-versus-matmul trade-off."""
from dataclasses import replace
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.formulas.presets import get_config
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.presets import layer_forward_flops
from batchlab.formulas.throughput import model_flops_per_token, model_step
from batchlab.formulas.tune import tune

XL = get_config("gpt2-xl")
# gpt2-xl, s = 1024, global batch 64, micro-batch 2, 4 stages × 2 replicas (the case study's job)
CASE_JOB = Job(XL, seq_len=1024, global_batch=64, micro_batch_size=2, pipeline_stages=4, data_parallel=2)


def test_flops_per_token_is_narayanans_formula():
    l, h, s, v = 48, 1600, 1024, 50257
    assert model_flops_per_token(CASE_JOB) == pytest.approx(72 * l * h**2 * (1 + s / (6 * h) + v / (12 * l * h)))
    assert model_flops_per_token(replace(CASE_JOB, recompute="full")) == pytest.approx(96 * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h)))
    assert layer_forward_flops(XL, 2, s) == pytest.approx(24 * 2 * s * h**2 * (1 + s / (6 * h)))


def test_rate_curve_interpolates_on_log_axes_and_holds_the_ends():
    curve = RateCurve((1, 4, 16), (1e9, 4e9, 8e9))
    assert curve.rate(2) == pytest.approx(2e9)          # halfway on log axes between 1e9 and 4e9
    assert curve.rate(0.5) == 1e9 and curve.rate(1000) == 8e9
    assert curve.efficiency(16) == 1.0 and curve.efficiency(1) == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="必须严格递增"):
        RateCurve((4, 1), (1e9, 2e9))
    rows = [SimpleNamespace(m=8, tflops=0.5), SimpleNamespace(m=1, tflops=0.1)]  # what MatmulTiming has
    assert RateCurve.from_results(rows).rows == (1, 8)


def test_flat_rate_makes_the_smallest_micro_batch_best():
    flat = RateCurve((1, 100_000), (1e12, 1e12))
    best = tune(CASE_JOB, flat)["recommended"]
    assert best["micro_batch_size"] == 1  # nothing to gain from bigger matmuls: only the bubble counts


def test_a_steep_rate_curve_can_favour_a_bigger_micro_batch():
    steep = RateCurve((1024, 2048, 4096, 8192), (1e12, 3e12, 4e12, 4.2e12))
    before = model_step(CASE_JOB, steep)
    after = model_step(replace(CASE_JOB, micro_batch_size=4), steep)
    assert (before.num_microbatches, after.num_microbatches) == (16, 8)
    assert before.bubble_fraction == 3 / 19 and after.bubble_fraction == 3 / 11
    assert after.tokens_per_second > before.tokens_per_second  # the matmul gain beats the bigger bubble


@given(b=st.sampled_from([1, 2, 4, 8]), p=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2]))
def test_step_time_is_slots_times_m_plus_p_minus_1(b, p, dp):
    curve = RateCurve((1, 10_000), (1e11, 1e12))
    step = model_step(Job(XL, seq_len=256, global_batch=64, micro_batch_size=b, pipeline_stages=p,
                          data_parallel=dp), curve)
    m = 64 // (b * dp)
    assert step.num_microbatches == m and step.bubble_fraction == bubble_fraction(p, m)
    assert step.step_seconds == pytest.approx((m + p - 1) * step.slot_seconds)
    assert step.tokens_per_second == pytest.approx(64 * 256 / step.step_seconds)


def test_bad_input_is_named():
    # the job is validated when it is made; model_step reads a valid one
    with pytest.raises(ValueError, match="global_batch = 63 不能被"):
        replace(CASE_JOB, global_batch=63)


def test_full_recompute_adds_one_forward_of_the_layers():
    flat = RateCurve((1, 100_000), (1e12, 1e12))
    job = replace(CASE_JOB, pipeline_stages=1)
    plain = model_step(job, flat)
    full = model_step(replace(job, recompute="full"), flat)
    layers = 48 * layer_forward_flops(XL, 2, 1024)
    assert full.slot_seconds - plain.slot_seconds == pytest.approx(layers / 1e12)


def test_compute_balanced_stages_shorten_the_modelled_step():
    """The slowest stage sets the pace: uniform GPT-2 1.5B puts the head (≈ 2.4 layers) on a 12-layer last stage."""
    from dataclasses import replace

    from batchlab.formulas.roofline import RateCurve
    from batchlab.lecture.case import CASE_STUDY

    flat = RateCurve((1, 10**6), (1e14, 1e14))
    uniform = model_step(CASE_STUDY.job, flat)
    compute = model_step(replace(CASE_STUDY.job, partition="compute"), flat)
    assert compute.step_seconds / uniform.step_seconds == pytest.approx(13 / (12 + 2.37), abs=0.01)


def test_causal_halving_of_the_attention_term_is_about_five_percent_for_the_case():
    s, h = 1024, 1600
    full, causal = layer_forward_flops(XL, 1, s), layer_forward_flops(XL, 1, s, causal=True)
    assert causal == pytest.approx(24 * s * h**2 * (1 + s / (12 * h)))
    assert 1 - causal / full == pytest.approx(0.048, abs=0.001)


def _forward_matmul_flops(b: int, s: int, h: int, layers: int, vocab: int) -> tuple[int, int]:
    """An independent count, matmul by matmul (2·m·k·n each), of one forward pass: (the layers, the logits)."""
    matmul = lambda m, k, n: 2 * m * k * n  # noqa: E731
    tokens = b * s
    per_layer = (3 * matmul(tokens, h, h)          # Q, K, V projections
                 + b * matmul(s, h, s)             # scores Q·Kᵀ (all heads together: a·(s × h/a × s))
                 + b * matmul(s, s, h)             # scores · V
                 + matmul(tokens, h, h)            # attention output projection
                 + matmul(tokens, h, 4 * h) + matmul(tokens, 4 * h, h))   # the MLP
    return layers * per_layer, matmul(tokens, h, vocab)


@pytest.mark.parametrize("model", ["gpt2", "gpt2-large", "gpt2-xl"])
def test_72_form_is_three_passes_and_eq_3_is_four_on_the_layers_three_on_the_logits(model):
    # the 72 form is derived from Narayanan et al. 2021's counts without recomputation (forward + backward = 3
    # forwards); their Eq. 3, 96·B·s·l·h²(1 + s/6h + V/16lh), recomputes the layers (4) but not the logits (3)
    config = get_config(model)
    b, s = 2, 1024
    job = Job(config, seq_len=s, global_batch=b, micro_batch_size=b)
    layers, logits = _forward_matmul_flops(b, s, config.d_model, config.n_layer, config.vocab_size)
    assert model_flops_per_token(job) * b * s == pytest.approx(3 * (layers + logits), rel=1e-12)
    full = replace(job, recompute="full")
    assert model_flops_per_token(full) * b * s == pytest.approx(4 * layers + 3 * logits, rel=1e-12)
    l, h, v = config.n_layer, config.d_model, config.vocab_size
    eq3 = 96 * b * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h))
    assert 4 * layers + 3 * logits == pytest.approx(eq3, rel=1e-12)
    # the old attribution's error: Eq. 3 × 3/4 gets the layers right but keeps only 3/4 of the logits
    # (V/16lh · 96 · 3/4 ≠ V/12lh · 72), so the 72 form is not "Eq. 3 with a 72 in front" but a derivation
    assert 0.75 * eq3 < 3 * (layers + logits)
