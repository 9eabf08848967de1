"""Chapter 4.6's learning-rate measurements (误区三, 误区四) decided by the shared criteria of
``batchlab.lecture.verdicts``: the same oscillation verdict as 4.2, the small-batch early advantage at each
batch size's own tuned rate, and a best-rate ratio that a finer grid can tell apart from the coarse grid's
spacing. Each test also feeds the criterion a contrary run and sees it flip."""
from __future__ import annotations

import math

import pytest

from batchlab.lecture.verdicts import (UNTESTABLE, VERDICT, best_rate_grows, late_oscillation, loss_at_samples,
                                       wins_per_seed)
from batchlab.measure.data import make_corpus
from batchlab.measure.model import BigramLM
from batchlab.measure.train import train


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(num_sequences=4096, seq_len=16, seed=0), make_corpus(num_sequences=256, seq_len=16, seed=0,
                                                                           sample_seed=1000)


def bigram(corpus, **kwargs):
    data, held_out = corpus
    return train(BigramLM(data.source.vocab_size), data, optimizer="sgd", eval_data=held_out, seed=0, **kwargs)


def test_one_oscillation_criterion_tells_a_noise_floor_from_its_cure(corpus):
    """4.6's runs (SGD, lr 30, 4096 samples, evaluated every 128): constant-rate B=8 at its noise floor
    oscillates against B=64 at the same samples; the cosine-decayed B=8, whose loss still rises again and again
    (the old rule called it oscillating), does not; B=64 itself, still descending, cannot be judged."""
    floor = bigram(corpus, batch_size=8, steps=512, lr=30.0, eval_every=16)
    cured = bigram(corpus, batch_size=8, steps=512, lr=30.0, eval_every=16, decay="cosine")
    large = bigram(corpus, batch_size=64, steps=64, lr=30.0, eval_every=2)
    assert late_oscillation([floor], [large]) == VERDICT[True]
    assert late_oscillation([cured], [large]) == VERDICT[False]
    assert late_oscillation([large], [large]) == UNTESTABLE


def test_early_advantage_at_each_batch_sizes_own_rate(corpus):
    def early(h):
        return [loss_at_samples(h.eval_samples, h.eval_loss, n) for n in (256, 512)]

    large = early(bigram(corpus, batch_size=64, steps=8, lr=240.0, eval_every=2))    # B=64's best on the chapter's grid
    small = early(bigram(corpus, batch_size=8, steps=64, lr=60.0, eval_every=16))    # B=8's
    assert wins_per_seed(small, large) == [True, True]
    off = early(bigram(corpus, batch_size=8, steps=64, lr=7.5, eval_every=16))       # B=8 far from its rate
    assert wins_per_seed(off, large) == [False, False]


def test_a_finer_grid_moves_the_best_rates_off_the_coarse_points(corpus):
    """On the coarse grid (√8 apart) the best rates are 30 and 240, ratio 8; halfway points beat both."""
    def final(batch, rate):
        return bigram(corpus, batch_size=batch, steps=1024 // batch, lr=rate, eval_every=max(1, 128 // batch)).final_eval_loss

    half = math.sqrt(math.sqrt(8))                                                   # half a coarse step
    assert final(8, 30.0 * half) < final(8, 30.0) and final(64, 240.0 / half) < final(64, 240.0)
    assert best_rate_grows({8: 30.0 * half, 64: 240.0 / half})
