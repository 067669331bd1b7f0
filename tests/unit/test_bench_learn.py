"""`lmforge bench learn`'s verdict and report, from the per-seed losses it keeps (the runs themselves are the bench's)."""
from __future__ import annotations

import pytest

from bench.train.learn import LearnBenchConfig, render, summarise, verdict_line


def test_the_verdict_is_lmforge_within_the_trainers_spread_or_below():
    within = summarise({"lmforge": {"1": 6.10, "2": 6.20, "3": 6.15}, "hf_trainer": {"1": 6.05, "2": 6.22, "3": 6.12}})
    assert within["within_or_below"] and within["hf_trainer"] == {"mean": pytest.approx(6.13), "low": 6.05, "high": 6.22,
                                                                  "seeds": 3}
    assert "within the Trainer's spread over seeds" in verdict_line("tiny", within) and "**MET**" in verdict_line("tiny", within)
    worse = summarise({"lmforge": {"1": 6.40, "2": 6.45}, "hf_trainer": {"1": 6.05, "2": 6.22}})
    assert not worse["within_or_below"] and "above the Trainer's highest seed" in verdict_line("demo", worse)
    assert "**NOT MET**" in verdict_line("demo", worse)
    better = summarise({"lmforge": {"1": 5.9}, "hf_trainer": {"1": 6.0}})
    assert better["difference"] == pytest.approx(-0.1) and "below the Trainer's mean" in verdict_line("tiny", better)


def test_the_report_lists_every_seed_and_states_the_recipe():
    runs = {"lmforge": {"1": {"held_out_loss": 6.1, "seconds": 20.0}, "2": {"held_out_loss": 6.2, "seconds": 22.0}},
            "hf_trainer": {"1": {"held_out_loss": 6.0, "seconds": 25.0}, "2": {"held_out_loss": 6.3, "seconds": 27.0}}}
    summary = summarise({s: {k: v["held_out_loss"] for k, v in r.items()} for s, r in runs.items()})
    causal = {"lmforge": {"1": {"held_out_loss": 7.0, "seconds": 30.0}}, "hf_trainer": {"1": {"held_out_loss": 6.9,
                                                                                                 "seconds": 12.0}}}
    text = render({"cases": {"mlm tiny": {"objective": "mlm", "preset": "tiny", "runs": runs, "summary": summary,
                                          "steps": 1500, "code_id": "def", "measured_utc": "2026-11-28 21:57 UTC"},
                             "causal demo": {"objective": "causal", "preset": "demo", "runs": causal, "summary": summarise(
                                 {s: {k: v["held_out_loss"] for k, v in r.items()} for s, r in causal.items()})}},
                   "machine": "a CPU, 2 cores", "settings": {"steps": 300, "micro_batch_size": 16, "lr": 1e-3,
                                                             "code_id": "abc"}, "measured_utc": "2026-11-28 23:06 UTC",
                   "unigram_control": {"mlm": {"value": 7.0, "tokens": 2862}}})
    assert "| mlm | tiny | 1500 | lmforge | 6.150 (6.100-6.200) | 0.850 | 1: 6.100, 2: 6.200 | 21 |" in text
    assert "| mlm | tiny | 1500 | hf_trainer | 6.150 (6.000-6.300) | 0.850 | 1: 6.000, 2: 6.300 | 26 |" in text
    # a case from before cases had their own steps reads the settings'; no control measured for causal
    assert "| causal | demo | 300 | hf_trainer | 6.900 (6.900-6.900) | - | 1: 6.900 | 12 |" in text
    assert "Code abc, def (learn_code_id" in text and "cases measured 2026-11-28 21:57 UTC to 2026-11-28 23:06 UTC" in text
    # causal after mlm whatever order the cases were run in, and budgets smallest first
    assert text.index("| mlm | tiny |") < text.index("| causal | demo |")
    assert "token frequencies alone score 7.000 nats on the same 2,862 held-out tokens" in text
    assert "optimizer steps of 16 rows" in text and "mask variant 0" in text and "causal collator" in text
    assert "mlm tiny: lmforge 6.150" in text and "**MET**" in text
    assert "causal demo: lmforge 7.000 (7.000-7.000) against the Trainer's 6.900" in text and "**NOT MET**" in text


def test_the_masks_ablation_reads_between_the_two_systems():
    from bench.train.learn import masks_line

    s = summarise({"lmforge": {"1": 7.04, "2": 7.04}, "hf_trainer": {"1": 7.03, "2": 7.03},
                   "hf_trainer_k_masks": {"1": 7.039, "2": 7.041}})
    assert s["difference"] == pytest.approx(0.01)  # the verdict stays lmforge against the plain Trainer
    assert masks_line("mlm tiny, 300 steps", s) == (
        "mlm tiny, 300 steps, masks ablation: the Trainer on lmforge's precomputed masks (bench/train/learn_masks.py) 7.040 "
        "(7.039-7.041): +0.010 nats against the plain Trainer, +0.000 against lmforge.")
    s["hf_trainer_fixed_count"] = {"mean": 7.035, "low": 7.03, "high": 7.04, "seeds": 2}
    assert masks_line("mlm tiny, 300 steps", s, "hf_trainer_fixed_count").startswith(
        "mlm tiny, 300 steps, masks ablation: the Trainer on fresh masks of lmforge's fixed count")


def test_bad_settings_fail_in_one_line():
    with pytest.raises(ValueError, match="unknown presets"):
        LearnBenchConfig(presets=["huge"])
    with pytest.raises(ValueError, match="unknown systems"):
        LearnBenchConfig(systems=["megatron"])
    with pytest.raises(ValueError, match="unknown objectives"):
        LearnBenchConfig(objectives=["t5_span"])
    with pytest.raises(ValueError, match="--steps must be >= 2"):
        LearnBenchConfig(steps=1)


def test_the_transfer_check_pairs_each_model_with_its_twin_by_seed_and_says_the_cards_verdict():
    from bench.train.learn_transfer import case_rows
    from bench.train.learn_transfer import render as transfer_render

    def ft(seed, pre, twin):
        return {"metric": "accuracy", "test_examples": 2302,
                "scores": {"pretrained": {seed: pre}, "scratch": {seed: twin}, "majority": {"null": 0.44},
                           "tfidf_lr": {"null": 0.626}}}

    lm = {"mean": 6.868, "low": 6.856, "high": 6.892, "seeds": 3}
    case = {"objective": "mlm", "summary": {"lmforge": lm},
            "transfer": {"1": ft("1", 0.45, 0.57), "2": ft("2", 0.50, 0.56), "3": ft("3", 0.44, 0.56)}}
    metric, rows = case_rows(case)
    by = {r["row"]: r for r in rows}
    assert metric == "accuracy" and by["pretrained"]["per_seed"] == {"1": 0.45, "2": 0.50, "3": 0.44}
    assert by["scratch"]["seeds"] == 3 and by["majority"]["mean"] == 0.44
    text = "\n".join(transfer_render({"cases": {"mlm demo, 300 steps": case, "causal demo, 300 steps": {"objective": "causal"}},
                                      "unigram_control": {"mlm": {"value": 7.093, "tokens": 2862}}}))
    assert "| mlm demo, 300 steps | 6.868 | 0.225 | 0.463 (" in text and "| 0.440 | 0.626 |" in text
    assert "causal demo" not in text  # not fine-tuned: not in the table
    assert "- mlm demo, 300 steps: Pretraining did not pay: the fine-tuned model trailed its random-init twin" in text
    assert transfer_render({"cases": {"causal demo, 300 steps": {"objective": "causal"}}}) == []


def test_the_difference_has_welchs_interval_and_a_masks_variant_its_own_verdict():
    from scipy.stats import ttest_ind

    from common.stats import difference_interval

    lm, hf = [7.028, 7.046, 7.041], [7.035, 7.032, 7.024]
    d = difference_interval(lm, hf)
    # the interval excludes 0 exactly when Welch's two-sided test rejects at 5% (scipy's own, as a check)
    assert d["mean"] == pytest.approx(0.008) and d["ci_low"] < 0 < d["ci_high"]
    assert ttest_ind(lm, hf, equal_var=False).pvalue > 0.05
    far = difference_interval([7.20, 7.21, 7.22], hf)
    assert far["ci_low"] > 0 and ttest_ind([7.20, 7.21, 7.22], hf, equal_var=False).pvalue < 0.05
    assert difference_interval([7.0], hf)["ci_low"] is None
    s = summarise({"lmforge": dict(zip("123", lm)), "lmforge_bernoulli": {"1": 7.027, "2": 7.042, "3": 7.040},
                   "hf_trainer": dict(zip("123", hf))})
    assert s["interval"] == [pytest.approx(d["ci_low"]), pytest.approx(d["ci_high"])]
    line = verdict_line("mlm tiny, 300 steps", s, "lmforge_bernoulli")
    assert line.startswith("mlm tiny, 300 steps: lmforge with `--mask-count bernoulli` 7.036 (7.027-7.042)")
    assert "+0.006 nats (95% interval" in line and "**NOT MET**" in line


def test_the_mask_counts_cost_is_paired_by_seed():
    from bench.train.learn import count_line

    runs = {"lmforge": {"1": {"held_out_loss": 7.028}, "2": {"held_out_loss": 7.046}, "3": {"held_out_loss": 7.041}},
            "lmforge_bernoulli": {"1": {"held_out_loss": 7.027}, "2": {"held_out_loss": 7.042},
                                  "3": {"held_out_loss": 7.040}}}
    line = count_line("mlm tiny, 300 steps", {"runs": runs})
    assert line.startswith("mlm tiny, 300 steps, mask count: lmforge on `--mask-count bernoulli` shards minus lmforge")
    assert "paired by seed: -0.0020 nats (95% interval -0.0063 to +0.0023); per seed 1: -0.0010, 2: -0.0040, " \
           "3: -0.0010." in line


def test_a_rerun_case_keeps_earlier_seeds_and_systems_of_the_same_code():
    from bench.train.learn import merged

    earlier = {"code_id": "abc", "runs": {"lmforge": {"1": {"held_out_loss": 6.28}},
                                          "lmforge_bernoulli": {"1": {"held_out_loss": 6.27}}},
               "transfer": {"1": {"metric": "accuracy"}}}
    new = {"lmforge": {"4": {"held_out_loss": 6.26}}, "hf_trainer": {"4": {"held_out_loss": 6.27}}}
    runs, transfer = merged(earlier, "abc", new, {})
    assert {s: sorted(r) for s, r in runs.items()} == {"lmforge": ["1", "4"], "lmforge_bernoulli": ["1"],
                                                       "hf_trainer": ["4"]}
    assert transfer == {"1": {"metric": "accuracy"}}
    assert merged(earlier, "other code", new, {}) == (new, {})  # measured by other code: replaced whole
    assert merged(None, "abc", new, {})[0] is new
