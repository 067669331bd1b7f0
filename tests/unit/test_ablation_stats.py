"""flows.ablation.stats: intervals over seeds, paired differences, the report's sentences, steps for a budget."""
from __future__ import annotations

import math

import pytest

from flows.ablation.stats import interval, paired, seeds_to_resolve, sentence, steps_for_budget


def test_interval_is_students_t_over_seeds():
    r = interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, t(0.975, 2) = 4.3027: half-width 4.3027 / sqrt(3)
    assert r["mean"] == 2.0 and r["sd"] == 1.0 and r["n"] == 3
    assert math.isclose(r["ci_high"] - 2.0, 4.302653 / math.sqrt(3), rel_tol=1e-5)
    one = interval([5.0])
    assert one["ci_low"] is None and one["ci_high"] is None
    with pytest.raises(ValueError):
        interval([])


def test_pairing_cancels_the_seed_spread():
    base = {1: 5.0, 2: 6.0, 3: 7.0}  # a large seed-to-seed spread
    arm = {1: 4.9, 2: 5.91, 3: 6.89}  # lower by ~0.1 at every seed
    d = paired(arm, base)
    assert d["includes_zero"] is False and d["ci_high"] < 0 and d["seeds"] == [1, 2, 3]
    assert not (interval(list(arm.values()))["ci_high"] < interval(list(base.values()))["ci_low"])  # unpaired: overlap
    assert "better than the baseline by -0.1000" in sentence("held-out loss", "no-near-dedup", d, lower_is_better=True)


def test_no_difference_is_said_with_the_seeds_that_would_tell():
    d = paired({1: 5.0, 2: 5.3, 3: 4.9}, {1: 5.1, 2: 5.1, 3: 5.1})
    assert d["includes_zero"] is True and d["seeds_to_resolve"] and d["seeds_to_resolve"] > 3
    text = sentence("accuracy", "no-gopher", d, lower_is_better=False)
    assert text.startswith("no-gopher: no difference in accuracy from the baseline") and "seeds would resolve" in text
    assert seeds_to_resolve(0.0, 1.0, 3) is None
    with pytest.raises(ValueError, match="share no seed"):
        paired({1: 1.0}, {2: 1.0})


def test_one_seed_gives_no_verdict():
    d = paired({1: 4.0}, {1: 5.0})
    assert d["includes_zero"] is None and "no verdict" in sentence("loss", "x", d, lower_is_better=True)


def test_steps_for_an_equal_token_budget():
    assert steps_for_budget(1_000_000, 1024) == (977, 1_000_448)
    assert steps_for_budget(1024, 1024) == (1, 1024)
    with pytest.raises(ValueError):
        steps_for_budget(0, 1024)
