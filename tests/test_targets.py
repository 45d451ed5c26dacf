"""Verdicts: met or missed only beyond the measured spread."""

import math

import pandas as pd
import pytest
from scipy import stats

from nailseg_common.core.statistics import (
    Verdict,
    difference_spread,
    mean_spread,
    paired_gain,
    prediction_spread,
    ratio_spread,
)


def test_a_difference_inside_the_spread_is_within_noise():
    assert Verdict("Dice", 0.885, 0.880, 0.01, "a level").outcome == "within noise"
    assert Verdict("Dice", 0.885, 0.870, 0.01, "a level").outcome == "met"
    assert Verdict("Dice", 0.855, 0.870, 0.01, "a level").outcome == "missed"


def test_lower_is_better_turns_the_margin():
    verdict = Verdict("seconds", 40.0, 60.0, 5.0, "the seeds' median", higher_is_better=False)
    assert verdict.margin == 20.0 and verdict.outcome == "met"
    assert "met by 20" in str(verdict) and "spread ±5" in str(verdict)


def test_spreads_are_95_percent_student_t_intervals_for_their_count():
    t1, t2 = stats.t.ppf(0.975, 1), stats.t.ppf(0.975, 2)  # 12.71 and 4.30, not 2
    assert mean_spread([1.0, 1.0, 1.0]) == 0.0
    assert mean_spread([0.0, 2.0]) == pytest.approx(t1)  # sd 1.414, SE 1
    assert math.isinf(mean_spread([1.0]))
    low, high = stats.t.interval(0.95, 2, loc=2.0, scale=stats.sem([1.0, 2.0, 3.0]))
    assert mean_spread([1.0, 2.0, 3.0]) == pytest.approx((high - low) / 2)
    # Welch: two SEs of 1 from two values each, 2 degrees of freedom
    assert difference_spread([0.0, 2.0], [0.0, 2.0]) == pytest.approx(t2 * math.sqrt(2))
    # numerator 90, 100, 110 (sd 10, SE 5.77 % of 100), denominator constant: n - 1 = 2 freedoms
    assert ratio_spread([90.0, 100.0, 110.0], [200.0, 200.0]) == pytest.approx(
        0.5 * t2 * 10 / math.sqrt(3) / 100)
    # one more draw from three seeds: t(2) times the sd, widened by the mean's own error
    assert prediction_spread([1.0, 2.0, 3.0]) == pytest.approx(t2 * 1.0 * math.sqrt(1 + 1 / 3))
    assert math.isinf(prediction_spread([1.0]))


def test_a_paired_gain_keeps_its_standard_error_beside_its_interval():
    gain = paired_gain(pd.Series([1.0, 2.0, 4.0]), pd.Series([0.0, 0.0, 0.0]))
    assert gain["gain_se"] == pytest.approx(stats.sem([1.0, 2.0, 4.0]))
    assert gain["gain_spread"] == pytest.approx(stats.t.ppf(0.975, 2) * gain["gain_se"])


def test_fine_tune_advice_names_the_photos_and_what_to_try_for_each_outcome():
    from nailseg_common.measure.own_photos_report import fine_tune_gain_in_words
    assert "use a fine-tuned start" in fine_tune_gain_in_words("met", standin=False)[0]
    assert "fewer fine_tune_steps" in " ".join(fine_tune_gain_in_words("missed", standin=True))
    for standin, where in ((True, "the stand-in"), (False, "your photos")):
        noise = " ".join(fine_tune_gain_in_words("within noise", standin))
        assert where in noise and "more fine_tune_steps first" in noise
        assert "lower fine_tune_lr" not in noise  # steps, not a lower rate, helped on real photos
