"""The numbers a corpus ablation's report stands on: a mean with its interval over seeds, each arm's paired
difference to the baseline, and the plain sentence that says when the interval cannot tell them apart.

    interval([5.1, 5.3, 5.2])                      # {"mean", "ci_low", "ci_high", "n", "sd"}: Student's t, 95%
    paired({1: 5.0, 2: 5.2}, {1: 5.1, 2: 5.4})      # the arm minus the baseline, seed by seed, with its interval
    steps_for_budget(1_000_000, 1024)              # (977, 1_000_448): steps, and the tokens they train on

Paired over seeds because each seed fixes the model's initialisation and data order for every arm alike, so
the seed-to-seed spread, usually the larger part of the noise at a small budget, cancels in each difference.
With one seed there is no interval (n = 1: ci_low and ci_high are None) and the report says so.
`seeds_to_resolve` answers "what would tell them apart": the seeds at which the observed mean difference would
clear its 95% interval if the spread stayed as observed (None if the difference is 0 or already clear).
"""
from __future__ import annotations

import math
from typing import Any

from common.stats import LEVEL, interval, t_quantile

__all__ = ["LEVEL", "interval", "paired", "seeds_to_resolve", "sentence", "steps_for_budget", "t_quantile"]

def seeds_to_resolve(diff_mean: float, diff_sd: float | None, n: int, level: float = LEVEL,
                     most: int = 1000) -> int | None:
    """The fewest seeds at which |diff_mean| would exceed its interval's half-width, the spread as observed."""
    if not diff_mean or not diff_sd:
        return None
    for k in range(max(n, 2), most + 1):
        if t_quantile(k - 1, level) * diff_sd / math.sqrt(k) < abs(diff_mean):
            return None if k == n else k
    return most + 1


def seeds_phrase(k: int, most: int = 1000) -> str:
    """seeds_to_resolve in words: its cap (`most` + 1) says "more than `most`"."""
    return f"more than {most} seeds would resolve" if k > most else f"about {k} seeds would resolve"


def paired(arm: dict[int, float], baseline: dict[int, float], level: float = LEVEL) -> dict[str, Any]:
    """The arm minus the baseline over the seeds both have: mean, interval, whether it includes zero, and the
    seeds that would resolve it. ValueError if they share no seed."""
    seeds = sorted(set(arm) & set(baseline))
    if not seeds:
        raise ValueError("paired: the arm and the baseline share no seed")
    diffs = [arm[s] - baseline[s] for s in seeds]
    out = interval(diffs, level)
    lo, hi = out["ci_low"], out["ci_high"]
    out.update(seeds=seeds, includes_zero=None if lo is None else lo <= 0 <= hi,
               seeds_to_resolve=seeds_to_resolve(out["mean"], out["sd"], len(seeds), level) if lo is not None and lo <= 0 <= hi else None)
    return out


def sentence(metric: str, arm: str, d: dict[str, Any], lower_is_better: bool) -> str:
    """One line for the report: which way the arm moved the metric against the baseline, or that the interval
    cannot tell (with the seeds that would)."""
    if d["ci_low"] is None:
        return f"{arm}: {metric} {d['mean']:+.4f} against the baseline from one seed; no interval, so no verdict."
    span = f"{d['mean']:+.4f} (95% interval {d['ci_low']:+.4f} to {d['ci_high']:+.4f}, {d['n']} seeds)"
    if d["includes_zero"]:
        more = f"; {seeds_phrase(d['seeds_to_resolve'])} a difference this size at this spread" if d.get(
            "seeds_to_resolve") else ""
        return f"{arm}: no difference in {metric} from the baseline that this budget can show: {span}{more}."
    better = (d["mean"] < 0) == lower_is_better
    return f"{arm}: {metric} {'better' if better else 'worse'} than the baseline by {span}."


def steps_for_budget(token_budget: int, tokens_per_step: int) -> tuple[int, int]:
    """(optimizer steps, tokens they train on) for an equal token budget: the fewest steps reaching it."""
    if token_budget < 1 or tokens_per_step < 1:
        raise ValueError(f"token budget and tokens per step must be >= 1, got {token_budget} and {tokens_per_step}")
    steps = -(-token_budget // tokens_per_step)
    return steps, steps * tokens_per_step
