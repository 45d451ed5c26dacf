"""Targets judged against a measured spread: met, missed, or within noise.

A target is a number the run derives from what it measures or reads (a level the labels
themselves reach, a baseline from the same run, a prediction from two measured times),
never a typed constant. A difference smaller than its spread (twice the standard error of
the difference, or the measured range of repeated windows) is "within noise"; only a
larger one is "met" or "missed".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


def half_range(values: Sequence[float]) -> float:
    """Half the range (max - min) of repeated measurements: the spread of their median; inf
    for one."""
    values = list(values)
    return (max(values) - min(values)) / 2 if len(values) > 1 else math.inf


def median_range(values: Sequence[float]) -> dict:
    """The ``median``, ``min`` and ``max`` of repeated measurements (seeds, windows)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def paired_gain(better: pd.Series, worse: pd.Series) -> dict:
    """``better - worse`` on the same items: mean ``gain``, its standard error ``gain_se``
    (NaN for one item), ``wins`` and ``loses``."""
    gain = better - worse
    return {"gain": gain.mean(), "gain_se": gain.sem(), "wins": int(sum(gain > 0)),
            "loses": int(sum(gain < 0))}


def mean_spread(values: Sequence[float]) -> float:
    """Twice the standard error of the mean of ``values`` (per-image scores, say)."""
    values = np.asarray(values, dtype=float)
    return 2.0 * float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.inf


def difference_spread(a: Sequence[float], b: Sequence[float]) -> float:
    """The spread of ``mean(a) - mean(b)`` for two independent samples: ``2·sqrt(SE_a² + SE_b²)``."""
    return math.hypot(mean_spread(a), mean_spread(b))


def ratio_spread(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The spread of ``median(numerator) / median(denominator)`` from repeated windows: each
    side's half-range relative to its median, combined in quadrature."""
    def relative_half_range(values) -> float:
        return half_range(values) / statistics.median(values)

    ratio = float(np.median(numerator) / np.median(denominator))
    return ratio * math.hypot(relative_half_range(numerator), relative_half_range(denominator))


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
