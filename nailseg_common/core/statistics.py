"""Targets judged against a measured spread: met, missed, or within noise.

A target is a number the run derives from what it measures or reads (a level the labels
themselves reach, a baseline from the same run, a prediction from two measured times),
never a typed constant. A difference smaller than its spread (twice the standard error of
the difference, or the measured range of repeated windows) is "within noise"; only a
larger one is "met" or "missed".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
        values = np.asarray(values, dtype=float)
        return float(np.ptp(values) / (2 * np.median(values))) if len(values) > 1 else math.inf

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
