"""The card's contamination line, from the corpus manifest behind the card's shards."""
from __future__ import annotations

import json

from schemas.manifest import Manifest, write_manifest
from training.evaluation.card_contamination import contamination, lines


def _run(tmp_path, mode: str | None, found_test: int):
    labeled = tmp_path / "labeled" / "vader"
    labeled.mkdir(parents=True)
    (labeled / "data.jsonl").write_text("")
    task = tmp_path / "card-task.json"
    task.write_text(json.dumps({"data": [str(labeled / "data.jsonl")]}))
    counts, extra = {"in": 10}, {}
    if mode:
        extra["decontamination"] = {"files": [str(labeled)], "mode": mode, "n_grams": 12}
        counts["contamination"] = {"vader": {"items": 4647, "too_short": 1251, "found": found_test,
                                             "found_by_split": {"test": found_test} if found_test else {},
                                             "pages_dropped": found_test if mode == "drop" else 0,
                                             "pages_kept": found_test if mode == "mark" else 0}}
    write_manifest(tmp_path / "corpus", Manifest(stage="corpus", config={}, counts=counts, extra=extra))
    write_manifest(tmp_path / "shards", Manifest(stage="shards", config={"corpus": str(tmp_path / "corpus")}))
    return contamination(str(tmp_path / "shards"), str(task))


def test_a_checked_clean_corpus(tmp_path):
    c = _run(tmp_path, "drop", 0)
    assert c["checked"] and c["task"] == "vader" and c["test_items_in_pretraining"] == 0
    text = " ".join(lines(c))
    assert "vader: 3,396 of 4,647 validation and test items checkable" in text and "found in the crawl: none" in text
    assert "Contaminated split" not in text


def test_items_found_and_kept_flag_the_split(tmp_path):
    c = _run(tmp_path, "mark", 3)
    assert c["test_items_in_pretraining"] == 3
    assert "**Contaminated split:** 3 test items of vader are in the pretraining data" in " ".join(lines(c))


def test_items_found_and_dropped_do_not(tmp_path):
    c = _run(tmp_path, "drop", 3)
    text = " ".join(lines(c))
    assert c["test_items_in_pretraining"] == 0 and "found in the crawl: 3 test (3 pages, dropped)" in text


def test_unchecked_and_unknown(tmp_path):
    assert "was not checked" in " ".join(lines(_run(tmp_path, None, 0)))
    assert contamination(None) is None and "not known" in lines(None)[0]
