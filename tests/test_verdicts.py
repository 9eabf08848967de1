"""Each criterion flips when the measurement behind it flips."""
import pytest

from batchlab.lecture.verdicts import (VERDICT, beats, count_rises, holds_in_every_seed, in_band, loss_at_samples,
                               lowest_at_budgets, samples_to_target)

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


def test_rises_band_beats_and_targets():
    assert count_rises([3, 2, 2.1, 1.9, 2.0]) == 2 and count_rises([3, 2, 1, 0.5]) == 0
    assert count_rises([3, 2, 2.05], tolerance=0.1) == 0
    assert in_band(32, 16, 80) and not in_band(32, 40, 80)
    assert beats(1.0, [1.1, 1.2]) and not beats(1.15, [1.1, 1.2])
    assert samples_to_target(SAMPLES, [4, 3, 2, 1.5, 1], 1.6) == 2048 and samples_to_target(SAMPLES, [4, 3], 1) is None
    assert holds_in_every_seed([True, True]) and not holds_in_every_seed([True, False])
    assert VERDICT[True] == "成立" and VERDICT[False] == "不成立"


def test_oscillation_is_two_rises_in_the_second_half():
    from batchlab.lecture.verdicts import later_rises, oscillates
    settles = [4, 3, 2.5, 2.2, 2.0, 1.9, 1.85, 1.8]
    jitters = [4, 3, 2.5, 2.2, 2.0, 2.1, 1.9, 2.0]          # rises twice after the midpoint
    early_only = [4, 4.2, 3, 3.1, 2.0, 1.9, 1.85, 1.8]       # rises twice, but only in the first half
    assert later_rises(jitters) == 2 and oscillates(jitters) is True
    assert oscillates(settles) is False and oscillates(early_only) is False
    assert oscillates(jitters, min_rises=3) is False
    with pytest.raises(ValueError, match="后半程"):
        oscillates([3, 2, 2.5])


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
