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
