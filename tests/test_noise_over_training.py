"""The noise scale along one training run (issue 31 §1): the criterion ``rises`` decides from repeats with a
band, a contrary measurement flips it, and the measurement itself is one deterministic run of the book's
pico GPT whose noise scale grows."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from batchlab.lecture.claims import CLAIMS  # noqa: E402
from batchlab.lecture.noise_growth import MIN_POINTS, NOISE_GROWTH_CRITERION, band, levels_off, rises  # noqa: E402
from batchlab.measure.data import make_corpus  # noqa: E402
from batchlab.measure.model import GPT  # noqa: E402
from batchlab.measure.noise import noise_over_training, noise_scale_simple, per_sample_grads  # noqa: E402
from batchlab.measure.train import train  # noqa: E402
from batchlab.formulas.presets import get_config  # noqa: E402
from batchlab.ui.claims import claim_card  # noqa: E402
from batchlab.ui.noise import plot_noise_growth  # noqa: E402

RISING = [[18, 19, 20], [19, 20, 21], [25, 26, 28], [38, 40, 43], [48, 50, 55]]


def test_a_rise_beyond_the_spread_holds():
    assert rises(RISING)


def test_a_flat_measurement_flips_the_verdict():
    flat = [[18, 19, 20], [19, 20, 21], [18.5, 19.5, 20], [19, 20, 21], [18, 20, 21]]
    assert not rises(flat)


def test_a_falling_measurement_flips_the_verdict():
    assert not rises(RISING[::-1])


def test_overlapping_end_bands_do_not_count_as_a_rise():
    # The medians rise 18 → 24, but the last band reaches down into the first: not beyond the spread.
    wide = [[15, 18, 21], [16, 19, 22], [17, 21, 25], [20.9, 24, 27]]
    assert not rises(wide)
    assert rises([*wide[:-1], [21.1, 24, 27]])


def test_a_fall_beyond_the_spread_on_the_way_fails_but_a_dip_inside_it_does_not():
    dip_inside = [[18, 19, 20], [17.5, 18.5, 19], [25, 26, 28], [38, 40, 43]]   # bands overlap: noise
    assert rises(dip_inside)
    resolved_fall = [[18, 19, 20], [30, 31, 32], [22, 23, 24], [38, 40, 43]]   # 30–32 → 22–24: a real fall
    assert not rises(resolved_fall)


def test_too_few_points_or_repeats_are_refused():
    with pytest.raises(ValueError):
        rises(RISING[:MIN_POINTS - 1])
    with pytest.raises(ValueError):
        rises([[v[0]] for v in RISING])
    with pytest.raises(ValueError):
        band([1.0, float("nan")])


def test_levels_off_describes_the_last_step_only():
    assert not levels_off(RISING)
    assert levels_off([*RISING[:-1], [40, 42, 44]])      # last median inside the previous band
    assert band([3, 1, 2]) == band([1, 2, 3]) and band([1, 2, 3]).median == 2


def test_the_card_names_its_source_and_states_the_criterion():
    claim = CLAIMS["noise-grows"]
    assert claim.source != "原文" and claim.criterion == NOISE_GROWTH_CRITERION
    cards = {rising: claim_card(claim, {"中位数": "19 → 50"}, rises(points))
             for rising, points in ((True, RISING), (False, RISING[::-1]))}
    assert cards[True].text.startswith(f"【成立】{claim.source}：") and cards[False].text.startswith("【不成立】")
    assert "原文" not in cards[True].text.splitlines()[0] and claim.source in cards[True].html()
    lecture = claim_card(CLAIMS["early-fast"], "x", True)
    assert lecture.text.startswith("【成立】原文：")     # the lecture's claims keep their label
    assert claim_card("某说法", "x", True, criterion="y", source="某论文").text.startswith("【成立】某论文：")
    with pytest.raises(ValueError):
        claim_card("某说法", "x", True, criterion="y", source=" ")


def test_the_figure_draws_the_band_on_both_layouts():
    trajectory = SimpleNamespace(samples_seen=(0, 256, 512, 1024, 2048), loss=(4.2, 3.8, 3.5, 3.0, 2.3),
                                 b_simple=tuple(tuple(p) for p in RISING), subset_size=128)
    for layout in ("desk", "phone"):
        fig = plot_noise_growth(trajectory, layout=layout)
        assert len(fig.axes) == 2
        plt.close(fig)
    with pytest.raises(ValueError):
        plot_noise_growth(SimpleNamespace(samples_seen=(0, 1), loss=(1.0, 1.0), b_simple=RISING, subset_size=2))


@pytest.fixture(scope="module")
def pico():
    config = get_config("pico")
    data = make_corpus(num_sequences=512, seq_len=16, seed=0)
    probe = make_corpus(num_sequences=128, seq_len=16, seed=0, sample_seed=2000)
    return config, data, probe


def test_every_point_is_the_same_run_and_the_model_is_left_untouched(pico):
    config, data, probe = pico
    model = GPT(config)
    before = copy.deepcopy(model.state_dict())
    trajectory = noise_over_training(model, data, probe, steps=(0, 2, 4, 8), num_subsets=2, batch_size=16)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert trajectory.samples_seen == (0, 32, 64, 128) and trajectory.subset_size == 64
    assert len(trajectory.b_simple) == 4 and all(len(v) == 2 for v in trajectory.b_simple)
    # The point after 4 steps is the state a single run has after its 4th step: training is deterministic.
    replay = copy.deepcopy(model)
    train(replay, data, batch_size=16, steps=4, lr=3e-3, seed=0)
    grads = per_sample_grads(replay, probe.inputs[:64], probe.targets[:64]).double()
    assert noise_scale_simple(grads) == pytest.approx(trajectory.b_simple[2][0], rel=1e-9)
    with pytest.raises(ValueError):
        noise_over_training(model, data, probe, steps=(0, 4, 2, 8))
    with pytest.raises(ValueError):
        noise_over_training(model, data, probe, num_subsets=1)


def test_the_book_run_shows_the_noise_scale_grow(pico):
    """A small real measurement (a few seconds): pico, Adam 3e-3, B = 32, as in 4.2, on a shorter run."""
    config, data, probe = pico
    trajectory = noise_over_training(GPT(config), data, probe, steps=(0, 8, 16, 32, 64), num_subsets=2)
    assert trajectory.loss[-1] < trajectory.loss[0]
    assert rises(trajectory.b_simple)
