"""A corpus ablation's arms (flows.ablation.arms): presets and option objects resolved to real corpus configs,
bad arms refused in one line before anything runs."""
from __future__ import annotations

import pytest

from flows.ablation.arms import ARM_PRESETS, QUALITY_FAMILIES, changed, resolve_arms

CRAWL = ["samples/crawl"]


def test_presets_resolve_and_say_what_they_change():
    arms = resolve_arms(list(ARM_PRESETS), CRAWL)
    by = {a.name: a for a in arms}
    assert changed(by["no-near-dedup"], by["baseline"]) == {"near_dedup": (True, False)}
    off = changed(by["no-quality-rules"], by["baseline"])
    assert set(off) == {f"{f}_enabled" for f in QUALITY_FAMILIES} and all(v == (True, False) for v in off.values())
    assert changed(by["baseline"], by["baseline"]) == {}


def test_an_arm_as_options_nested_or_flat_and_its_own_crawl():
    arms = resolve_arms(["baseline", {"name": "strict-gopher", "corpus": {"gopher_quality": {"min_words": 100}}},
                         {"name": "flat", "corpus": {"jaccard_threshold": 0.7}},
                         {"name": "other-crawl", "crawl": ["tests/data/tiny"]}], CRAWL)
    assert changed(arms[1], arms[0]) == {"gopher_quality_min_words": (50, 100)}
    assert changed(arms[2], arms[0]) == {"jaccard_threshold": (0.8, 0.7)}
    assert changed(arms[3], arms[0]) == {"crawl": ("the ablation's", ["tests/data/tiny"])}


@pytest.mark.parametrize("arms, message", [
    (["baseline", {"name": "x", "corpus": {"near_dedupe": False}}], "arm 'x': no corpus option 'near_dedupe'; did you "
                                                                    "mean 'near_dedup'?"),
    (["baseline", {"name": "x", "corpus": {"gopher_quality": {"enabeld": False}}}],
     "no corpus option 'gopher_quality_enabeld'; did you mean 'gopher_quality_enabled'?"),
    (["baseline", "no-near-dupe"], "no arm preset 'no-near-dupe'; did you mean 'no-near-dedup'?"),
    (["baseline", {"name": "same", "corpus": {"near_dedup": True}}], "arms 'baseline' and 'same' are the same "
                                                                     "configuration"),
    (["baseline", "baseline"], "the name 'baseline' is given twice"),
    (["no-near-dedup"], "none is named 'baseline'"),
    (["baseline", {"name": "x", "corpus": {"output": "/tmp/x"}}], "output is the ablation's to set"),
    (["baseline", {"name": "x", "corpus": {"jaccard_threshold": 2.0}}], "arm 'x': jaccard_threshold must be in (0, 1]"),
    (["baseline", {"name": "x", "seeds": [1]}], "arm 'x': unknown key(s) seeds"),
    ([], "none given"),
])
def test_bad_arms_are_refused_in_one_line(arms, message):
    with pytest.raises(ValueError) as e:
        resolve_arms(arms, CRAWL)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_ablations_own_options_are_checked_before_anything_runs(tmp_path):
    import json

    from flows.ablation.ablate import AblationConfig, plan_lines

    ref = tmp_path / "ref.jsonl"
    ref.write_text(json.dumps({"id": "a", "url": "u", "text": "a reference text"}) + "\n")
    cfg = AblationConfig(crawl=CRAWL, reference=str(ref), arms=["baseline", "no-gopher"])
    assert plan_lines(cfg)[2] == ("- no-gopher: gopher_quality_enabled True -> False, "
                                  "gopher_repetition_enabled True -> False")
    for bad, said in (({"reference": str(tmp_path / "none.jsonl")}, "no such file"),
                      ({"reference": str(tmp_path / "ref.txt")}, "expected a .jsonl file"),
                      ({"tokenizer_arm": "no-near-dedup"}, "tokenizer_arm 'no-near-dedup' is not one of the arms"),
                      ({"seeds": [1, 1]}, "seeds must be distinct"), ({"preset": "huge"}, "preset must be one of")):
        with pytest.raises(ValueError, match=said):
            AblationConfig(**{"crawl": CRAWL, "reference": str(ref), "arms": ["baseline", "no-gopher"], **bad})
    ref.write_text('{"id": "a"}\n')
    with pytest.raises(ValueError, match="line 1: expected a JSON object with a text string"):
        AblationConfig(crawl=CRAWL, reference=str(ref))


def test_the_arm_families_are_the_cleaning_chains():
    from flows.ablation.arms import QUALITY_FAMILIES, nest_options
    from pipelines.corpus.steps.registry import step_configs

    assert set(QUALITY_FAMILIES) < set(step_configs())
    assert nest_options({"gopher_quality_enabled": False, "near_dedup": False}) == {
        "gopher_quality": {"enabled": False}, "near_dedup": False}
