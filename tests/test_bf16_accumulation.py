"""Gradient accumulation in bf16 (issue 31 §3): the summation rules against plain-Python references, the
criterion of 「梯度累积与大批次完全等价」 under a precision, and the measurement on the book's pico GPT."""
from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys

import pytest
import torch
from hypothesis import assume, given, settings, strategies as st

from batchlab.formulas.presets import get_config
from batchlab.lecture.accumulation_precision import (ACCUMULATORS, CRITERION, EQUIVALENCE_ROUNDINGS, LOSS_CRITERION,
                                                      LOSS_TOLERANCE, UNIT_ROUNDOFF, accumulation_verdict,
                                                      equivalence_tolerance, loss_curve_gap, same_loss_curve,
                                                      verdicts_by_accumulator)
from batchlab.lecture.verdicts import SAME_UPDATE_TOLERANCE, VERDICT
from batchlab.measure.accumulation import (accumulate, accumulation_error, accumulation_training, allreduce_error,
                                           batch_gradients, microbatch_gradients, relative_gap)
from batchlab.measure.data import make_corpus
from batchlab.measure.model import GPT, next_token_loss
from batchlab.measure.train import make_optimizer
from booktools import ROOT

COUNTS = (1, 2, 4, 8, 16, 32, 64)


# ── plain-Python references: bf16 round-to-nearest-even by the bits ────────────────────────────────────────

def to_bf16(x: float) -> float:
    """x rounded to bfloat16 (round to nearest, ties to even), from float32's bits; x must be a float32."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def to_f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def reference_sum(terms: list[float], accumulator: str) -> float:
    """One entry's sum as ``accumulator`` computes it, every operation rounded by hand."""
    if accumulator == "fp32":
        total = 0.0
        for t in terms:
            total = to_f32(total + t)
        return total
    terms = [to_bf16(t) for t in terms]
    if accumulator == "bf16-fp32-main":
        return reference_sum(terms, "fp32")
    total, compensation = 0.0, 0.0
    for t in terms:
        if accumulator == "bf16":
            total = to_bf16(total + t)
            continue
        y = to_bf16(t - compensation)
        new = to_bf16(total + y)
        compensation = to_bf16(to_bf16(new - total) - y)
        total = new
    return total


# values whose pairwise sums float32 holds exactly (exponents within 2^-7 … 1), so torch's bf16 add (in
# float32, then rounded) is one correct rounding, as the reference's
entries = (st.floats(min_value=2.0**-7, max_value=1.0) | st.floats(min_value=-1.0, max_value=-2.0**-7)).map(to_f32)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(entries, min_size=3, max_size=3), min_size=1, max_size=24))
def test_every_accumulator_rounds_as_written_in_both_orders(rows):
    terms = torch.tensor(rows, dtype=torch.float32)
    for name in ACCUMULATORS:
        sequential = accumulate(terms, name)
        assert sequential.tolist() == [reference_sum(list(col), name) for col in terms.T.tolist()], name
        ring = accumulate(terms, name, order="ring")
        n = len(rows)
        for entry in range(3):
            chunk = [j for j, part in enumerate(torch.arange(3).tensor_split(n)) if entry in part.tolist()][0]
            order = [rows[(chunk + 1 + r) % n][entry] for r in range(n)]
            assert ring[entry].item() == reference_sum(order, name), (name, entry)


def test_unit_roundoff_is_half_of_torchs_machine_epsilon():
    for dtype, u in UNIT_ROUNDOFF.items():
        assert u == torch.finfo(getattr(torch, dtype)).eps / 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_subnormal=False), min_size=1, max_size=64))
def test_one_rounding_stays_within_the_unit_roundoff(values):
    exact = torch.tensor(values, dtype=torch.float64)
    assume(exact.abs().max() >= 1e-3)  # the bound is for the normal range: far below the largest entry, an
    # entry that underflows moves by less than u times the largest anyway
    for dtype in ("bfloat16", "float32"):
        once = exact.to(getattr(torch, dtype))
        assert relative_gap({"g": once}, {"g": exact}) <= UNIT_ROUNDOFF[dtype]


def test_the_tolerance_is_two_roundings_or_the_fp32_criterion_of_4_6():
    assert equivalence_tolerance("bfloat16") == EQUIVALENCE_ROUNDINGS * 2.0**-8 == 2.0**-7
    assert equivalence_tolerance("float32") == SAME_UPDATE_TOLERANCE  # 2u = 1.2e-7 would be stricter than 4.6
    assert "2⁻⁸" in CRITERION and f"{2.0**-7:.1e}" in CRITERION
    with pytest.raises(ValueError):
        equivalence_tolerance("float64")


GROWING = {1: 2.2e-3, 2: 2.4e-3, 4: 3.7e-3, 8: 4.6e-3, 16: 9.4e-3, 32: 8.8e-3, 64: 1.4e-2}   # as measured
FLAT = {m: 2.2e-3 for m in COUNTS}                                                          # contrary


def test_the_verdict_flips_with_a_flat_bf16_error():
    assert accumulation_verdict(GROWING, "bfloat16") == VERDICT[False]
    assert accumulation_verdict(FLAT, "bfloat16") == VERDICT[True]
    one_beyond = {**FLAT, 64: equivalence_tolerance("bfloat16") * 1.01}
    assert accumulation_verdict(one_beyond, "bfloat16") == VERDICT[False]
    assert accumulation_verdict({m: 3e-7 for m in COUNTS}, "float32") == VERDICT[True]
    assert accumulation_verdict({1: 0.0, 64: 1e-4}, "float32") == VERDICT[False]
    # the same bf16 numbers judged as fp32 gradients: the tolerance follows the precision
    assert accumulation_verdict(FLAT, "float32") == VERDICT[False]
    with pytest.raises(ValueError):
        accumulation_verdict({}, "bfloat16")
    with pytest.raises(ValueError):
        verdicts_by_accumulator({"fp16": FLAT})


# ── the measurement on the book's model ────────────────────────────────────────────────────────────────────

@pytest.fixture(scope="module")
def corpus():
    return make_corpus(num_sequences=4096, seq_len=16, seed=0)


@pytest.fixture(scope="module")
def measured(corpus):
    gpt = GPT(get_config("pico"))
    x, y = corpus.inputs[:256], corpus.targets[:256]
    return accumulation_error(gpt, x, y, COUNTS), allreduce_error(gpt, x, y, COUNTS)


def test_bf16_error_grows_with_m_and_the_others_stay_within_two_roundings(measured):
    for errors in measured:
        bf16 = errors["bf16"]
        assert bf16[64] > 3 * bf16[1] and bf16[64] > equivalence_tolerance("bfloat16")
        assert all(e < 1e-6 for e in errors["fp32"].values())
        for name in ("bf16-kahan", "bf16-fp32-main"):
            assert max(errors[name].values()) <= equivalence_tolerance("bfloat16"), name
        # one micro-batch: every bf16 way is the same single rounding
        assert errors["bf16"][1] == errors["bf16-kahan"][1] == errors["bf16-fp32-main"][1] > 0
        assert verdicts_by_accumulator(errors) == {"fp32": "成立", "bf16": "不成立", "bf16-kahan": "成立",
                                                   "bf16-fp32-main": "成立"}


def test_microbatch_gradients_add_up_to_the_batch_gradient(corpus):
    gpt = GPT(get_config("pico"))
    x, y = corpus.inputs[:32], corpus.targets[:32]
    rows, tokens = microbatch_gradients(gpt, x, y, 8)
    assert rows.shape[0] == 8 and tokens == [4 * 16] * 8
    whole = torch.cat([g.reshape(-1) for g in batch_gradients(gpt, x, y).values()])
    assert relative_gap({"g": rows.mean(0)}, {"g": whole}) < 1e-5
    with pytest.raises(ValueError):
        microbatch_gradients(gpt, x, y, 5)
    with pytest.raises(ValueError):
        accumulate(rows, "fp16")
    with pytest.raises(ValueError):
        accumulate(rows, "bf16", order="tree")


def test_the_fp32_run_is_plain_large_batch_training_and_bf16_runs_start_alike(corpus):
    config = get_config("pico")
    curves = accumulation_training(lambda: GPT(config), corpus.inputs, corpus.targets, num_microbatches=4,
                                   micro_batch_size=2, steps=3, lr=1e-2)
    model = GPT(config)
    opt = make_optimizer("adam", model.parameters(), 1e-2)
    plain = []
    for step in range(3):
        x, y = corpus.inputs[8 * step:8 * step + 8], corpus.targets[8 * step:8 * step + 8]
        with torch.no_grad():
            plain.append(float(next_token_loss(model(x), y)))
        for name, g in batch_gradients(model, x, y).items():
            dict(model.named_parameters())[name].grad = g
        opt.step()
    assert max(abs(a - b) for a, b in zip(curves["fp32"], plain)) < 1e-5
    assert len({c[0] for c in curves.values()}) == 1       # the same model and batch before any update
    assert set(curves) == set(ACCUMULATORS)


def test_the_verdicts_and_decades_do_not_depend_on_the_cpu_kernels(measured):
    """bf16 errors are not bit-identical across ATen's kernel sets (the fp32 backward rounds differently, so
    a few terms round to another bf16 neighbour), but they agree to 1 % and give the same verdicts."""
    script = ("import json; from batchlab.measure.data import make_corpus; from batchlab.measure.model import GPT;"
              "from batchlab.formulas.presets import get_config; from batchlab.measure.accumulation import "
              "accumulation_error; d = make_corpus(num_sequences=4096, seq_len=16, seed=0);"
              "print(json.dumps(accumulation_error(GPT(get_config('pico')), d.inputs[:256], d.targets[:256],"
              f" {COUNTS!r})))")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=300)
    generic = {name: {int(m): e for m, e in by_m.items()} for name, by_m in json.loads(out.stdout).items()}
    native = measured[0]
    assert verdicts_by_accumulator(generic) == verdicts_by_accumulator(native)
    for name in ("bf16", "bf16-kahan", "bf16-fp32-main"):
        for m in COUNTS:
            assert math.isclose(generic[name][m], native[name][m], rel_tol=1e-2), (name, m)


# ── what it does to a run, and the exercise on one bf16 addition ───────────────────────────────────────────

def test_the_loss_curve_verdict_flips_with_a_gap_of_one_hundredth():
    reference = [4.17, 3.69, 3.18, 2.79]
    assert same_loss_curve([4.17, 3.691, 3.179, 2.794], reference)                       # as measured: ~1e-3
    assert not same_loss_curve([4.17, 3.69, 3.18, 2.79 + 1.5 * LOSS_TOLERANCE], reference)  # contrary: one step off
    assert loss_curve_gap([1.0, 2.5], [1.0, 2.0]) == 0.5
    assert str(LOSS_TOLERANCE) in LOSS_CRITERION
    with pytest.raises(ValueError):
        loss_curve_gap([1.0], [1.0, 2.0])


def test_exercise_4_6_6_is_what_a_bf16_buffer_does():
    from batchlab.ui.exercises import EXERCISES

    largest = EXERCISES["4.8-4"].answer()
    buffer = torch.tensor([2.0, 2.0, 2.0], dtype=torch.bfloat16)
    added = buffer + torch.tensor([largest, largest * 1.001, largest / 2], dtype=torch.float32)
    assert added.to(torch.bfloat16).tolist() == [2.0, 2.0 + 2.0**-6, 2.0]   # the tie rounds to even, above it up
    assert largest == 2 * UNIT_ROUNDOFF["bfloat16"]
