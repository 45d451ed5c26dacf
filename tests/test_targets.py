"""Verdicts: met or missed only beyond the measured spread."""

import math

import pytest

from nailseg_common.core.statistics import Verdict, difference_spread, mean_spread, ratio_spread


def test_a_difference_inside_the_spread_is_within_noise():
    assert Verdict("Dice", 0.885, 0.880, 0.01, "a level").outcome == "within noise"
    assert Verdict("Dice", 0.885, 0.870, 0.01, "a level").outcome == "met"
    assert Verdict("Dice", 0.855, 0.870, 0.01, "a level").outcome == "missed"


def test_lower_is_better_turns_the_margin():
    verdict = Verdict("seconds", 40.0, 60.0, 5.0, "the seeds' median", higher_is_better=False)
    assert verdict.margin == 20.0 and verdict.outcome == "met"
    assert "met by 20" in str(verdict) and "spread ±5" in str(verdict)


def test_spreads():
    assert mean_spread([1.0, 1.0, 1.0]) == 0.0
    assert mean_spread([0.0, 2.0]) == pytest.approx(2.0)  # sd 1.414, SE 1
    assert math.isinf(mean_spread([1.0]))
    assert difference_spread([0.0, 2.0], [0.0, 2.0]) == pytest.approx(2 * math.sqrt(2))
    # numerator 90, 100, 110 (sd 10, twice the SE 11.5 % of 100), denominator constant
    assert ratio_spread([90.0, 100.0, 110.0], [200.0, 200.0]) == pytest.approx(
        0.5 * 2 * 10 / math.sqrt(3) / 100)


def test_finetune_advice_names_the_photos_and_what_to_try_for_each_outcome():
    from nailseg_common.measure.own_photos_report import finetune_gain_in_words
    assert "use a fine-tuned start" in finetune_gain_in_words("met", standin=False)[0]
    assert "fewer finetune_steps" in " ".join(finetune_gain_in_words("missed", standin=True))
    for standin, where in ((True, "the stand-in"), (False, "your photos")):
        noise = " ".join(finetune_gain_in_words("within noise", standin))
        assert where in noise and "more finetune_steps first" in noise
        assert "lower finetune_lr" not in noise  # steps, not a lower rate, helped on real photos
