"""A user's own data, as `lmforge run` or the Prefect deployment takes it: an English-only JSONL crawl (the tiny
slice's English pages as id/url/text) and a labelled CSV of tweets with its own column names and no split column
(VADER's tweets), some of whose test and train items were planted into the crawl; and what its run must show.
tests/integration/test_dag_e2e.py runs it once for the session's whole-DAG checks, the deployment's and the
credential scan's, and checks it with `check_user_run`."""
from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures import english_pages, tweets_csv

SMALL = {"finetune": {"max_train": 300, "max_test": 200, "max_validation": 100},
         "card": {"probe": True, "cost_repeats": 1}}
"""The tiny preset, a smaller fine-tune and one cost repeat; probing on (the card picks the corpus's languages)."""


def user_case(work: Path) -> tuple[dict, dict]:
    """The English JSONL crawl with planted tweets, and the tweets CSV, written under `work`: the flow's parameters
    for them, and what was planted."""
    from training.finetuning.dataset import Columns, load_task

    tweets_csv(work / "tweets.csv")
    # the split the labeled stage will make (seeded, stratified: training.finetuning.prepare), to plant from
    task = load_task("classification", Columns(text="tweet", label="sentiment"), data=[str(work / "tweets.csv")],
                     split_seed=0)
    long_enough = [ex for ex in task.test if len(ex.text.split()) >= 16], [ex for ex in task.train
                                                                           if len(ex.text.split()) >= 16]
    planted = {"test": long_enough[0][:2], "train": long_enough[1][:2]}
    pages = english_pages()
    for split, items in planted.items():
        for i, ex in enumerate(items):
            page = pages[len(pages) // 2 + 3 * i + (1 if split == "train" else 0)]
            page["text"] += "\n\nShared on our wall today: " + ex.text
            page["planted"] = split
    with (work / "wiki.jsonl").open("w", encoding="utf-8") as f:
        for p in pages:
            f.write(json.dumps({k: p[k] for k in ("id", "url", "text")}) + "\n")
    params = {"crawl": [str(work / "wiki.jsonl")], "labeled": str(work / "tweets.csv"), "text_column": "tweet",
              "label_column": "sentiment", "overrides": SMALL}
    return params, {"pages": pages, "planted": planted}


def check_user_run(run: Path, facts: dict) -> None:
    """What a finished run of `user_case`'s data must show: the labelled file made a task folder, the planted test
    items found in the crawl and their pages dropped, the card with the task's controls and English probing."""
    import pyarrow.parquet as pq

    from schemas.manifest import read_manifest

    # the labelled file, a task folder like a known source's: its splits made and written down, its checksum kept
    lab = read_manifest(run / "labeled" / "tweets")
    assert lab["config"]["columns"]["text"] == "tweet" and len(lab["extra"]["source"]["sha256"]) == 64
    assert "stratified by label" in lab["extra"]["splits_from"]["test"]
    rows = [json.loads(line) for line in (run / "labeled" / "tweets" / "data.jsonl").open()]
    split_of = {row["text"]: row["split"] for row in rows}
    for split, items in facts["planted"].items():
        assert all(split_of[ex.text] == split for ex in items)
    # its validation and test items checked against the crawl without any option: planted test pages dropped
    corpus = read_manifest(run / "corpus")
    found = corpus["counts"]["contamination"]["tweets"]
    assert found["found_by_split"].get("test", 0) == 2 and found["found_by_split"].get("train", 0) == 0
    assert found["pages_dropped"] == 2
    dropped = {row["id"]: row["reason"] for f in (run / "corpus" / "dropped").glob("*.parquet")
               for row in pq.read_table(f, columns=["id", "reason"]).to_pylist()}
    for p in facts["pages"]:  # a train item's page may still fall to a quality rule, not to decontamination
        if p.get("planted"):
            assert (dropped.get(p["id"]) == "contaminated") == (p["planted"] == "test"), (p["id"], dropped.get(p["id"]))
    assert set(corpus["counts"]["kept_by_language"]) == {"en"}
    # the card: fine-tuned on the user's task with its controls, contamination stated, probing in the corpus's
    # languages only (no Russian in it: skipped, with the reason)
    card = json.loads((run / "card" / "report.json").read_text())
    teacher = next(e for e in card["models"] if e["name"] == "teacher")["quality"]
    probed = set(teacher.get("probing") or {}) | set(teacher.get("probing_skipped") or {})
    assert probed == {"en"}, teacher.get("probing_skipped")
    text = (run / "card" / "report.md").read_text()
    assert "tweets" in text and ("Probing skipped: en:" in text or "Probing teacher (en" in text)
    report = json.loads((run / "eval" / "report.json").read_text())
    assert set(report["finetune"]["test"]) >= {"pretrained", "scratch", "majority", "tfidf_lr"}
    # the card opens with its verdict: corpus, task, the scores beside the controls with intervals, one sentence;
    # its scores are the eval report's, and it names no path outside the run folder
    head = text.split("| model | kind |")[0]
    assert head.startswith("# lmforge evaluation card") and "**Corpus:**" in head and "**Task:** tweets.csv" in head
    assert "**Verdict:** " in head and "![quality_cost](quality_cost.png)" in head
    assert "**Tokenizer fit:** " in head and "unknown tokens on the test text" in head  # how the vocabulary fits it
    # the pretrained model's loss beside what token frequencies alone score on the same held-out tokens
    assert "**Pretrained model** (" in head and "for token frequencies alone (the unigram control)" in head
    summary = json.loads((run / "card" / "report.json").read_text())["summary"]
    means = {r["row"]: r["mean"] for r in summary["scores"]}
    assert means == {k: report["finetune"]["test"][k] for k in means} and set(means) >= {"pretrained", "scratch"}
    assert all(r["low"] is not None for r in summary["scores"]), summary["scores"]  # an interval on every row
    assert str(run) not in text and "`finetune/hf`" in text
    # the saved model's score on the card is the one the fine-tune gave its seed: scored the same way, at its length
    metrics = json.loads((run / "finetune" / "metrics.json").read_text())
    seed, metric = str(metrics["saved"]["seed"]), metrics["primary_metric"]
    tuned = next(e for e in card["models"] if e["name"] == "fine-tuned")["quality"]["task"]
    assert abs(tuned["metrics"][metric] - metrics["rows"]["pretrained"]["scores"]["test"][metric]["per_seed"][seed]) < 1e-6
