"""Targets judged against a measured spread: met, missed, or within noise.

One spread for the whole course: ``x ± s`` means that ``s`` is **twice the standard error**
of ``x``, about a 95 % interval, computed from repeats (images, photos, timing windows,
epochs). For a mean over items, :func:`mean_spread`; for the difference of two means,
:func:`difference_spread`; for a ratio of two repeated rates, :func:`ratio_spread` (the
relative spreads combined). Repeated seeds are reported as their median and range instead,
never with ``±``.

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


def median_range(values: Sequence[float]) -> dict:
    """The ``median``, ``min`` and ``max`` of repeated measurements (seeds, windows)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def paired_gain(better: pd.Series, worse: pd.Series) -> dict:
    """``better - worse`` on the same items: mean ``gain``, its spread ``gain_spread``
    (:func:`mean_spread`; inf for one item), ``wins`` and ``loses``."""
    gain = better - worse
    return {"gain": gain.mean(), "gain_spread": mean_spread(gain), "wins": int(sum(gain > 0)),
            "loses": int(sum(gain < 0))}


def mean_spread(values: Sequence[float]) -> float:
    """The course's spread of ``values``' mean: twice its standard error (about a 95 %
    interval); inf for one value."""
    values = np.asarray(values, dtype=float)
    return 2.0 * float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.inf


def difference_spread(a: Sequence[float], b: Sequence[float]) -> float:
    """The spread of ``mean(a) - mean(b)`` for two independent samples: ``2·sqrt(SE_a² + SE_b²)``."""
    return math.hypot(mean_spread(a), mean_spread(b))


def ratio_spread(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The spread of ``median(numerator) / median(denominator)`` from repeated windows: each
    side's :func:`mean_spread` relative to its median, combined in quadrature."""
    def relative(values) -> float:
        return mean_spread(values) / statistics.median(values)

    ratio = float(np.median(numerator) / np.median(denominator))
    return ratio * math.hypot(relative(numerator), relative(denominator))


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
