"""Targets judged against a measured spread: met, missed, or within noise.

One spread for the whole course: ``x ± s`` means that ``x - s`` to ``x + s`` is **a 95 %
interval** of ``x``, computed from repeats (images, photos, timing windows, epochs) with
Student's t for their count: ``s`` is the standard error times ``t(0.975, n - 1)``, 12.7 for
two repeats, 4.30 for three, 2.78 for five, near 2 for hundreds of photos. For a mean over
items, :func:`mean_spread`; for the difference of two means, :func:`difference_spread` (Welch's
degrees of freedom); for a ratio of two repeated rates, :func:`ratio_spread` (the relative
standard errors combined, Welch's degrees of freedom). Repeated seeds are reported as their
median and range instead, never with ``±``.

A target is a number the run derives from what it measures or reads (a level the labels
themselves reach, a baseline from the same run, a prediction from two measured times),
never a typed constant. A difference smaller than its spread is "within noise"; only a
larger one is "met" or "missed".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


def median_range(values: Sequence[float]) -> dict:
    """The ``median``, ``min`` and ``max`` of repeated measurements (seeds, windows)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def paired_gain(better: pd.Series, worse: pd.Series) -> dict:
    """``better - worse`` on the same items: mean ``gain``, its standard error ``gain_se`` and
    spread ``gain_spread`` (:func:`mean_spread`; inf for one item), ``wins`` and ``loses``."""
    gain = better - worse
    return {"gain": gain.mean(), "gain_se": standard_error(gain), "gain_spread": mean_spread(gain),
            "wins": int(sum(gain > 0)), "loses": int(sum(gain < 0))}


CONFIDENCE = 0.95


def standard_error(values: Sequence[float]) -> float:
    """The standard error of ``values``' mean (``scipy.stats.sem``); inf for one value."""
    return float(stats.sem(np.asarray(values, dtype=float))) if len(values) > 1 else math.inf


def _t_half_width(errors: Sequence[float], counts: Sequence[int]) -> float:
    """The 95 % half-width of a sum of independent estimates with these standard ``errors``
    from these ``counts`` of repeats: Student's t at Welch-Satterthwaite's degrees of freedom
    (for one estimate, ``n - 1``)."""
    if any(n < 2 for n in counts):
        return math.inf
    variance = sum(e * e for e in errors)
    if variance == 0:
        return 0.0
    freedom = variance ** 2 / sum(e ** 4 / (n - 1) for e, n in zip(errors, counts))
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, freedom)) * math.sqrt(variance)


def mean_spread(values: Sequence[float]) -> float:
    """The course's spread of ``values``' mean: the half-width of its 95 % Student-t interval
    (``t(0.975, n - 1)`` standard errors); inf for one value."""
    return _t_half_width([standard_error(values)], [len(values)])


def prediction_spread(values: Sequence[float]) -> float:
    """The 95 % half-width for one more draw from what ``values`` were drawn from (a new run
    against earlier seeds): ``t(0.975, n - 1)·sd·sqrt(1 + 1/n)``; inf for one value."""
    if len(values) < 2:
        return math.inf
    values = np.asarray(values, dtype=float)
    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1))
    return t * float(values.std(ddof=1)) * math.sqrt(1 + 1 / len(values))


def difference_spread(a: Sequence[float], b: Sequence[float]) -> float:
    """The spread of ``mean(a) - mean(b)`` for two independent samples: Welch's 95 % interval."""
    return _t_half_width([standard_error(a), standard_error(b)], [len(a), len(b)])


def ratio_spread(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The spread of ``median(numerator) / median(denominator)`` from repeated windows: each
    side's standard error relative to its median, combined (the delta method), as a 95 %
    interval at Welch's degrees of freedom."""
    ratio = float(np.median(numerator) / np.median(denominator))
    relative = [standard_error(v) / statistics.median(v) for v in (numerator, denominator)]
    return ratio * _t_half_width(relative, [len(numerator), len(denominator)])


@dataclass(frozen=True)
class Verdict:
    """``value`` against ``target`` (``basis`` says where the target comes from)."""

    name: str
    value: float
    target: float
    spread: float
    basis: str
    higher_is_better: bool = True

    @property
    def margin(self) -> float:
        """How far ``value`` is on the good side of ``target`` (negative: the bad side)."""
        return (self.value - self.target) * (1 if self.higher_is_better else -1)

    @property
    def outcome(self) -> str:
        if abs(self.margin) <= self.spread:
            return "within noise"
        return "met" if self.margin > 0 else "missed"

    def __str__(self) -> str:
        digits = 3 if max(abs(self.value), abs(self.target)) < 10 else 0
        by = "" if self.outcome == "within noise" else f" by {abs(self.margin):.{digits}f}"
        return (f"{self.name} {self.value:.{digits}f} against {self.target:.{digits}f} "
                f"({self.basis}): {self.outcome}{by}, spread ±{self.spread:.{digits}f}")
