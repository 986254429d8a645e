"""Summaries of learning curves over several seeds, so a claim about an algorithm rests on
more than one run: means with 95% intervals, the paired difference between two algorithms
trained on the same seeds, and how far a run fell from its best (a late collapse).

A curve is one run's held-out success rate after each iteration (0..1). Intervals are
Student-t intervals over seeds (few seeds: the normal interval would be too narrow).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from episodelake.lake.storage.errors import InvalidInput

#: Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom; above 30 the normal
#: quantile is within 2% of t.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)
_Z95 = 1.960


@dataclass(frozen=True)
class Interval:
    """A mean and its 95% interval; `low`/`high` are None with a single value (no spread to
    estimate from)."""

    mean: float
    low: float | None
    high: float | None
    n: int

    @property
    def above_zero(self) -> bool:
        return self.low is not None and self.low > 0

    def __str__(self) -> str:
        if self.low is None or self.high is None:
            return f"{self.mean:+.3f} (n={self.n}, no interval)"
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] (n={self.n})"


def t95(dof: int) -> float:
    if dof < 1:
        raise InvalidInput(f"degrees of freedom must be >= 1, got {dof}")
    return _T95[dof - 1] if dof <= len(_T95) else _Z95


def mean_interval(values: Sequence[float]) -> Interval:
    """The mean of `values` with its 95% t-interval."""
    if not values:
        raise InvalidInput("no values to summarise")
    mean = statistics.fmean(values)
    if len(values) == 1:
        return Interval(mean, None, None, 1)
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(mean, mean - half, mean + half, len(values))


def paired_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """Mean of a[i] - b[i] with its 95% interval: runs i of both algorithms share seed i, so
    the seed's own luck cancels out of each difference."""
    if len(a) != len(b):
        raise InvalidInput(f"paired values need equal counts, got {len(a)} and {len(b)}")
    return mean_interval([x - y for x, y in zip(a, b, strict=True)])


def final(curve: Sequence[float], last: int = 5) -> float:
    """Mean of the last `last` points: the end of a run, less noisy than its last point."""
    tail = curve[-last:]
    if not tail:
        raise InvalidInput("an empty curve has no end")
    return statistics.fmean(tail)


def area(curve: Sequence[float]) -> float:
    """Area under the curve per iteration (trapezoids, so 0..1 like the curve): how early
    and how well a run learns, in one number."""
    if len(curve) < 2:
        raise InvalidInput("an area needs at least two points")
    return sum((x + y) / 2 for x, y in zip(curve, curve[1:], strict=False)) / (len(curve) - 1)


def first_above(curve: Sequence[float], target: float) -> int | None:
    """Index of the first point above `target`, or None when the run never gets there."""
    return next((i for i, value in enumerate(curve) if value > target), None)


def largest_fall(curve: Sequence[float]) -> float:
    """The largest drop from a run's best so far to any later point (0 when it never falls)."""
    best = -math.inf
    fall = 0.0
    for value in curve:
        best = max(best, value)
        fall = max(fall, best - value)
    return fall


def moving_mean(curve: Sequence[float], window: int = 5) -> list[float]:
    """Mean of each full `window` of consecutive points. One point of held-out success is 40
    episodes (a binomial standard deviation of ~7 points at 70%), so a fall measured point to
    point is mostly one lucky best and one unlucky dip; a fall of the moving mean is a run that
    lost what it had learned."""
    if window < 1:
        raise InvalidInput(f"window must be >= 1, got {window}")
    return [statistics.fmean(curve[i:i + window]) for i in range(len(curve) - window + 1)]


def per_iteration(curves: Sequence[Sequence[float]]) -> list[Interval]:
    """Mean and interval at each iteration over runs (curves cut to the shortest run)."""
    if not curves:
        raise InvalidInput("no curves to summarise")
    length = min(len(c) for c in curves)
    return [mean_interval([c[i] for c in curves]) for i in range(length)]
