"""Each criterion flips when the measurement behind it flips."""
import pytest

import math
from types import SimpleNamespace

from batchlab.lecture.verdicts import (LATE_PHASE_SHARE, OSCILLATION_RATIO, UNTESTABLE, VERDICT, beats,
                                       fluctuation_ratio, holds_in_every_seed, in_band, in_late_phase,
                                       late_fluctuation, late_oscillation, late_share, loss_at_samples,
                                       lowest_at_budgets, samples_to_target, verdict_over_seeds)

SAMPLES = [0, 512, 1024, 2048, 4096]


def test_loss_at_samples_takes_the_last_evaluation_before_the_budget():
    assert loss_at_samples(SAMPLES, [4, 3, 2, 1.5, 1], 1500) == 2
    assert loss_at_samples(SAMPLES, [4, 3, 2, 1.5, 1], 4096) == 1
    with pytest.raises(ValueError, match="没有任何评估"):
        loss_at_samples([512, 1024], [3, 2], 100)


def test_smallest_batch_lowest_flips_with_the_data():
    small_wins = {8: (SAMPLES, [4, 2.0, 1.8, 1.6, 1.5]), 32: (SAMPLES, [4, 3.0, 2.5, 2.0, 1.7])}
    assert lowest_at_budgets(small_wins, [1024, 2048]) is True
    big_wins = {8: (SAMPLES, [4, 3.0, 2.5, 2.0, 1.7]), 32: (SAMPLES, [4, 2.0, 1.8, 1.6, 1.5])}
    assert lowest_at_budgets(big_wins, [1024, 2048]) is False
    tie = {8: (SAMPLES, [4, 2.0, 1.8, 1.6, 1.5]), 32: (SAMPLES, [4, 2.0, 1.8, 1.6, 1.5])}
    assert lowest_at_budgets(tie, [1024]) is False


def test_band_beats_and_targets():
    assert in_band(32, 16, 80) and not in_band(32, 40, 80)
    assert beats(1.0, [1.1, 1.2]) and not beats(1.15, [1.1, 1.2])
    assert samples_to_target(SAMPLES, [4, 3, 2, 1.5, 1], 1.6) == 2048 and samples_to_target(SAMPLES, [4, 3], 1) is None
    assert holds_in_every_seed([True, True]) and not holds_in_every_seed([True, False])
    assert VERDICT[True] == "成立" and VERDICT[False] == "不成立"


# ── 小批次后期震荡: late fluctuation around a smoothed curve, against the large batch at the same samples ──
SEEN = [128 * i for i in range(33)]                     # 4.6's grid: 4096 samples, evaluated every 128


def run(losses):
    """A run as the criteria read it (``measure.train.History``'s two fields)."""
    return SimpleNamespace(eval_samples=SEEN[:len(losses)], eval_loss=list(losses))


def jitter(i: int, size: float) -> float:
    """A fixed, irregular ±size pattern (no random generator: the same curve on every machine)."""
    return size * math.sin(2.3 * i * i + 0.7 * i)


def decaying(floor: float, noise: float = 0.0, scale: float = 20.0, i0: int = 0):
    """floor + 2.6·e^(−i/scale) at each evaluation i, plus a jitter of ``noise``."""
    return [floor + 2.6 * math.exp(-(i + i0) / scale) + jitter(i, noise) for i in range(33)]


def cosine_decayed(floor: float, noise: float):
    """A run whose fluctuation shrinks with its learning rate, ½(1 + cos(π·i/32)): the cure of 4.6."""
    return [floor + 2.6 * math.exp(-i / 3) + jitter(i, noise) * 0.5 * (1 + math.cos(math.pi * i / 32))
            for i in range(33)]


def old_rule(losses) -> int:
    """The rule this replaces: rises of the loss between consecutive evaluations in the second half."""
    late = losses[len(losses) // 2:]
    return sum(b > a for a, b in zip(late, late[1:]))


LARGE = run(decaying(1.6, noise=0.001, scale=12, i0=8))   # B=64: still descending, a little noise


def test_a_noisy_flat_late_curve_oscillates_and_a_smooth_decaying_one_does_not():
    flat_noisy = run([1.5 + 2.6 * math.exp(-i / 3) + jitter(i, 0.01) for i in range(33)])
    smooth = run(decaying(1.5, scale=3))
    assert in_late_phase(flat_noisy) and in_late_phase(smooth)
    assert fluctuation_ratio(flat_noisy, LARGE) >= OSCILLATION_RATIO
    assert late_oscillation([flat_noisy], [LARGE]) == VERDICT[True]
    assert late_oscillation([smooth], [LARGE]) == VERDICT[False]
    # a cosine-decayed run can fail it: its late jitter shrinks with the learning rate
    cured = cosine_decayed(1.5, 0.01)
    assert late_oscillation([run(cured)], [LARGE]) == VERDICT[False] and old_rule(cured) >= 2


def test_rises_without_amplitude_are_not_oscillation():
    """The old rule's error: a curve at its floor that wobbles by 10⁻⁴ rises on every other evaluation and
    'oscillated', as did 4.6's cosine-decayed cure on every seed. Its amplitude is no larger than a
    large batch's, so it does not oscillate now."""
    wobbly = [1.5 + 2.6 * math.exp(-i / 3) + (1e-4 if i % 2 else 0.0) for i in range(33)]
    large = run(decaying(1.6, noise=1e-4, scale=12, i0=8))
    assert old_rule(wobbly) >= 2                          # the old rule: 后期震荡
    assert fluctuation_ratio(run(wobbly), large) < OSCILLATION_RATIO
    assert late_oscillation([run(wobbly)], [large]) == VERDICT[False]


def test_every_seed_must_oscillate():
    noisy = run([1.5 + 2.6 * math.exp(-i / 3) + jitter(i, 0.01) for i in range(33)])
    calm = run(decaying(1.5, scale=3))
    assert late_oscillation([noisy, noisy], [LARGE, LARGE]) == VERDICT[True]
    assert late_oscillation([noisy, calm], [LARGE, LARGE]) == VERDICT[False]
    with pytest.raises(ValueError, match="一一对应"):
        late_oscillation([noisy], [LARGE, LARGE])


def test_a_run_still_descending_cannot_show_late_oscillation():
    """4.2's B=8 (its evaluations every 128 samples up to 2048): a seventh of its descent is left for
    the second half, so the verdict is 本书无法检验, however noisy the curve, and 4.6 decides."""
    chapter_4_2 = [4.169, 3.719, 3.316, 2.996, 2.683, 2.445, 2.266, 2.13, 2.033, 1.941, 1.867, 1.842, 1.816,
                   1.792, 1.74, 1.709, 1.694]
    b8, b128 = run(chapter_4_2), run([4.169 - 0.046 * i for i in range(17)])
    assert late_share(b8) == pytest.approx((2.033 - 1.694) / (4.169 - 1.694))
    assert not in_late_phase(b8) and late_share(b8) > LATE_PHASE_SHARE
    assert late_oscillation([b8], [b128]) == UNTESTABLE
    assert late_oscillation([b8], [b128], share=0.5) in VERDICT.values()   # the precondition decides


def test_fluctuation_is_compared_at_the_same_samples():
    straight = run([4 - 0.1 * i for i in range(9)])
    assert late_fluctuation(straight) == pytest.approx(0.0, abs=1e-12)
    bent = run([1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.0, 1.1, 1.0])     # late: 1.0 1.1 1.0 1.1 1.0 → residuals ∓0.1
    assert late_fluctuation(bent) == pytest.approx(0.1)
    assert fluctuation_ratio(straight, straight) == 1.0 and fluctuation_ratio(bent, straight) == math.inf
    elsewhere = SimpleNamespace(eval_samples=[512 * i for i in range(9)], eval_loss=bent.eval_loss)
    with pytest.raises(ValueError, match="同样的样本"):
        fluctuation_ratio(bent, elsewhere)
    with pytest.raises(ValueError, match="至少要 3 次"):
        late_fluctuation(run([3, 2, 1]))
    with pytest.raises(ValueError, match="没有下降"):
        late_share(run([1, 1.1, 1.2, 1.3, 1.4, 1.5]))


def test_seeds_decide_only_when_they_agree():
    """4.6's 「预热有帮助」: warm-up lower on 2 of 3 seeds is neither 成立 nor 不成立."""
    assert verdict_over_seeds([True, True, False]) == UNTESTABLE
    assert verdict_over_seeds([True, True, True]) == VERDICT[True]
    assert verdict_over_seeds([False, False, False]) == VERDICT[False]
    with pytest.raises(ValueError):
        verdict_over_seeds([])


def test_like_with_like_needs_every_pairing():
    from batchlab.lecture.verdicts import beats_like_with_like, wins_per_seed
    linear = {"无预热": [2.3, 2.7, 2.5], "预热": [2.0, 1.9, 2.0]}
    sqrt_wins_without = {"无预热": [2.4, 2.4, 2.4], "预热": [2.3, 2.3, 2.3]}
    sqrt_loses_both = {"无预热": [2.6, 2.8, 2.6], "预热": [2.3, 2.3, 2.3]}
    assert beats_like_with_like(linear, sqrt_wins_without) is False   # wins only with warm-up
    assert beats_like_with_like(linear, sqrt_loses_both) is True
    assert beats_like_with_like(sqrt_wins_without, linear) is False
    assert wins_per_seed(linear["无预热"], sqrt_wins_without["无预热"]) == [True, False, False]
    with pytest.raises(ValueError, match="条件必须相同"):
        beats_like_with_like(linear, {"预热": [2.3, 2.3, 2.3]})
    with pytest.raises(ValueError, match="一一对应"):
        beats_like_with_like(linear, {"无预热": [2.4], "预热": [2.3, 2.3, 2.3]})


def test_update_verdict_has_a_third_word_for_random_computations():
    from batchlab.lecture.verdicts import SAME_DISTRIBUTION, VERDICT, update_verdict

    assert update_verdict(1e-7, 0.3) == VERDICT[True]           # float rounding: the same update
    assert update_verdict(0.3, 0.34) == SAME_DISTRIBUTION        # like re-drawing the masks
    assert update_verdict(0.9, 0.34) == VERDICT[False]           # far past the re-seeded gap: systematic
    assert update_verdict(0.3, 0.1) == VERDICT[False]            # a contrary control flips it


def test_loss_after_reads_a_runs_own_evaluations():
    from types import SimpleNamespace

    from batchlab.lecture.verdicts import loss_after
    run = SimpleNamespace(eval_samples=SAMPLES, eval_loss=[4, 3, 2, 1.5, 1])
    assert loss_after(run, 1500) == 2 and loss_after(run, 4096) == 1
    with pytest.raises(ValueError, match="没有任何评估"):
        loss_after(SimpleNamespace(eval_samples=[512], eval_loss=[3]), 100)


def test_linear_scaling_is_judged_as_prescribed_with_warm_up():
    """Issue 28: the 原文 prescribes linear scaling *with* warm-up. The chapter's own measurement (means
    2.522 vs 2.422 without warm-up, 1.974 vs 2.522 with it) holds under that criterion; the old one, which
    also demanded a win without warm-up, judged it 不成立."""
    from batchlab.lecture.verdicts import PRESCRIBED, beats_like_with_like, wins_as_prescribed
    linear = {"不加预热": [2.327, 2.699, 2.541], PRESCRIBED: [2.038, 1.925, 1.960]}
    sqrt = {"不加预热": [2.416, 2.436, 2.416], PRESCRIBED: [2.530, 2.511, 2.525]}
    assert wins_as_prescribed(linear, sqrt) is True
    assert beats_like_with_like(linear, sqrt) is False   # the old criterion: the error this test catches
    # a contrary measurement flips it: square-root wins once both are warmed up
    assert wins_as_prescribed(sqrt, linear) is False
    worse = {**linear, PRESCRIBED: [2.6, 2.6, 2.6]}
    assert wins_as_prescribed(worse, sqrt) is False
    with pytest.raises(ValueError, match="原文规定的条件"):
        wins_as_prescribed({"不加预热": [2.0]}, {"不加预热": [2.1]})
