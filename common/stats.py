"""Intervals the reports stand on: a mean over seeds with Student's t, and a proportion over test items (Wilson).

    interval([5.1, 5.3, 5.2])       # {"mean", "ci_low", "ci_high", "n", "sd"}: Student's t, 95%; n = 1: no interval
    proportion_interval(0.46, 300)  # (low, high): Wilson's 95% interval of an accuracy over 300 test items
    difference_interval([7.04, 7.03], [7.03, 7.02])  # a - b between two independent sets of seeds: Welch's t, 95%
"""
from __future__ import annotations

import math
from statistics import mean, stdev
from typing import Any

LEVEL = 0.95


def t_quantile(dof: int, level: float = LEVEL) -> float:
    """The two-sided Student's t quantile (scipy's, which scikit-learn brings)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, dof))


def interval(values: list[float], level: float = LEVEL) -> dict[str, Any]:
    """Mean and its `level` confidence interval over independent values (seeds)."""
    if not values:
        raise ValueError("interval: no values")
    m = mean(values)
    if len(values) < 2:
        return {"mean": m, "ci_low": None, "ci_high": None, "n": len(values), "sd": None}
    sd = stdev(values)
    half = t_quantile(len(values) - 1, level) * sd / math.sqrt(len(values))
    return {"mean": m, "ci_low": m - half, "ci_high": m + half, "n": len(values), "sd": sd}


def proportion_interval(p: float, n: int, level: float = LEVEL) -> tuple[float, float] | None:
    """Wilson's `level` interval of a proportion `p` measured on `n` independent items (an accuracy on a test split):
    how far the figure could move on another sample of that size. None without items."""
    if n < 1:
        return None
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def difference_interval(a: list[float], b: list[float], level: float = LEVEL) -> dict[str, Any]:
    """mean(a) - mean(b) with its `level` interval when a and b are independent runs (two systems whose seeds share
    nothing): Welch's t, each side's own variance. Fewer than two values on a side: no interval."""
    if not a or not b:
        raise ValueError("difference_interval: a side has no values")
    d = mean(a) - mean(b)
    if len(a) < 2 or len(b) < 2:
        return {"mean": d, "ci_low": None, "ci_high": None}
    va, vb = stdev(a) ** 2 / len(a), stdev(b) ** 2 / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return {"mean": d, "ci_low": d, "ci_high": d}
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    from scipy.stats import t

    half = float(t.ppf(0.5 + level / 2, dof)) * se
    return {"mean": d, "ci_low": d - half, "ci_high": d + half}
