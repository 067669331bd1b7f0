"""The cleaning an ablation's dedup-only arms share (flows.ablation.cleaning): who shares, with what options, and
counts that reconcile; the corpus stage's applied_steps. The documents an arm keeps through the shared cleaning
equal a corpus stage's over the crawl: tests/integration/test_ablate.py."""
from __future__ import annotations

import pytest

from flows.ablation.arms import ARM_PRESETS, nest_options, resolve_arms
from flows.ablation.cleaning import after_cleaning, cleaning_options, merged_counts, share_cleaning


def plan_arms(names, crawl=("tests/data/tiny/tiny.warc.gz",), own=None):
    own = own or {}
    return {a.name: {"crawl": list(own.get(a.name, crawl)), "corpus": {"num_shards": 1, "line_dedup": True,
                                                                      **nest_options(a.corpus)}}
            for a in resolve_arms(names, list(crawl))}


def test_arms_that_differ_only_in_dedup_share_one_cleaning_and_the_others_read_the_crawl():
    arms = plan_arms(["baseline", "no-near-dedup", "no-quality-rules", "no-dedup", "no-gopher"])
    shared = share_cleaning(arms)
    assert list(shared) == ["baseline"] and shared["baseline"]["arms"] == ["baseline", "no-near-dedup", "no-dedup"]
    assert [n for n, a in arms.items() if a.get("cleaned")] == ["baseline", "no-near-dedup", "no-dedup"]
    c = shared["baseline"]["corpus"]
    assert (c["exact_dedup"], c["near_dedup"], c["line_dedup"], c["pii"]["enabled"]) == (False, False, False, False)
    # the same options over another crawl: not the same cleaning; one arm alone: none
    assert share_cleaning(plan_arms(["baseline", "no-near-dedup"], own={"no-near-dedup": ["samples/crawl"]})) == {}
    assert share_cleaning(plan_arms(["baseline", "no-quality-rules"])) == {}


def test_each_arm_over_the_cleaning_skips_what_it_ran_and_runs_language_id_dedup_and_pii():
    from pipelines.corpus.config import CorpusConfig

    opts = after_cleaning({"num_shards": 1, "decontaminate": {"files": ["ref.jsonl"], "n": 12}})
    assert opts["decontaminate"] == {"files": [], "n": 12}
    assert set(opts["applied_steps"]) == {"url_filter", "c4", "gopher_repetition", "gopher_quality", "fineweb",
                                          "decontaminate"}
    CorpusConfig(input=["x"], output="y", applied_steps=opts["applied_steps"])
    with pytest.raises(ValueError, match="applied_steps: language_id not a step that can be skipped"):
        CorpusConfig(input=["x"], output="y", applied_steps=["language_id"])


def test_a_big_crawl_is_cleaned_into_more_files_so_each_reads_back_in_bounded_memory(tmp_path):
    big = tmp_path / "crawl.warc.gz"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # sparse: 300 MiB by size
    assert cleaning_options({"num_shards": 2}, [str(big)])["num_shards"] == 5
    assert cleaning_options({"num_shards": 2}, [str(tmp_path / "none")])["num_shards"] == 2


def test_counts_merge_and_must_reconcile():
    cleaned = {"in": 100, "kept": 60, "dropped": {"c4_too_few_sentences": 30, "empty_text": 8}, "duplicates": 0,
               "quarantined": 2, "quarantined_by_reason": {"undecodable": 2},
               "contamination": {"reference": {"pages_dropped": 1}}}
    arm = {"in": 60, "kept": 50, "dropped": {"line_dedup_c4_no_lines_left": 1}, "duplicates": 9,
           "duplicates_by_kind": {"exact": 4, "near": 5}, "quarantined": 0}
    m = merged_counts(cleaned, arm, "arm x")
    assert m["in"] == m["kept"] + sum(m["dropped"].values()) + m["duplicates"] + m["quarantined"] == 100
    assert m["contamination"] == cleaned["contamination"] and m["duplicates_by_kind"] == arm["duplicates_by_kind"]
    with pytest.raises(ValueError, match="arm x: the arm read 59 documents, the cleaning kept 60"):
        merged_counts(cleaned, {**arm, "in": 59}, "arm x")


def test_every_preset_arm_resolves_its_sharing():
    arms = plan_arms(list(ARM_PRESETS))
    shared = share_cleaning(arms)
    assert {tuple(c["arms"]) for c in shared.values()} == {("baseline", "no-near-dedup", "no-exact-dedup", "no-dedup")}
