"""Known labelled sources converted to the files finetune reads, on the real bundled files."""
from __future__ import annotations

import json
from pathlib import Path

from pipelines.labeled.registry import prepare
from pipelines.labeled.splits import split_of
from schemas.manifest import read_manifest, verify_outputs
from training.finetuning.dataset import Columns, load_task

ROOT = Path(__file__).resolve().parents[2]


def test_vader_counts_reconcile_and_finetune_reads_it(tmp_path):
    out = prepare("vader", tmp_path / "vader", ROOT / "samples/labeled/vader")
    lines = sum(1 for f in (ROOT / "samples/labeled/vader").glob("*_GroundTruth.txt")
                for ln in f.read_text().splitlines() if ln.strip())
    counts = read_manifest(out)["counts"]
    assert lines == 23_703 == counts["negative"] + counts["neutral"] + counts["positive"]
    assert lines == counts["train_examples"] + counts["validation_examples"] + counts["test_examples"]
    assert 0.08 < counts["test_examples"] / lines < 0.12
    verify_outputs(out)
    assert "MIT" in (out / "LICENCE.txt").read_text()
    cfg = json.loads((out / "finetune.json").read_text())
    data = load_task(cfg["task"], Columns(text=cfg["text_column"], label=cfg["label_column"]), data=cfg["data"])
    assert data.labels == ["negative", "neutral", "positive"]
    assert data.splits_from["test"].startswith("column 'split'") and len(data.test) == counts["test_examples"]
    row = json.loads((out / "data.jsonl").read_text().splitlines()[0])
    assert row["split"] == split_of(row["id"]) and row["label"] == ("positive" if row["score"] >= 0.5 else
                                                                     "negative" if row["score"] <= -0.5 else "neutral")


DATA = ROOT / "tests" / "data" / "labeled"


def test_reuters_arff_becomes_three_topics(tmp_path):
    from pipelines.labeled.reuters import read_arff

    rows = read_arff(DATA / "weka" / "ReutersGrain-train.arff")
    assert len(rows) == 40 and rows[0][0].startswith("BAHIA COCOA REVIEW Showers continued")
    assert "\n" in rows[0][0] and "\\n" not in rows[0][0]  # weka's escapes are undone
    out = prepare("reuters", tmp_path / "reuters", DATA / "weka")
    counts = read_manifest(out)["counts"]
    assert counts["train_examples"] == counts["test_examples"] == 40
    grain = sum(c for _, c in rows) + sum(c for _, c in read_arff(DATA / "weka" / "ReutersGrain-test.arff"))
    assert counts["corn"] + counts["grain"] - counts["corn_not_grain"] == grain
    cfg = json.loads((out / "finetune.json").read_text())
    assert cfg["select_metric"] == "macro_f1"
    first = json.loads((out / "data.jsonl").read_text().splitlines()[0])
    assert first["split"] == "train" and first["label"] in ("corn", "grain", "other")


def test_wsj_pos_lines_become_tagged_sentences(tmp_path):
    out = prepare("wsj_pos", tmp_path / "wsj", DATA / "pattern")
    rows = [json.loads(x) for x in (out / "data.jsonl").read_text().splitlines()]
    assert len(rows) == 80
    assert rows[0]["tokens"][:3] == ["Pierre", "Vinken", ","] and rows[0]["tags"][:3] == ["NNP", "NNP", ","]
    assert all(len(r["tokens"]) == len(r["tags"]) for r in rows)
    assert read_manifest(out)["counts"]["tokens"] == sum(len(r["tokens"]) for r in rows)


def test_lee_pairs_split_by_document(tmp_path):
    from pipelines.labeled.lee_pairs import doc_split

    out = prepare("lee_pairs", tmp_path / "lee", DATA / "gensim-4.4.0" / "gensim" / "test" / "test_data")
    rows = [json.loads(x) for x in (out / "data.jsonl").read_text().splitlines()]
    assert len(rows) == 50 * 49 // 2 and all(0.0 <= r["score"] <= 1.0 for r in rows)
    train_docs = {r["text"] for r in rows if r["split"] == "train"} | {r["text_pair"] for r in rows if r["split"] == "train"}
    assert sum(doc_split(i) == "test" for i in range(50)) >= 4
    for r in rows:  # no pair in train mentions a test or validation document
        i, j = (int(x) for x in r["id"].split("-")[1:])
        if r["split"] == "train":
            assert doc_split(i) == doc_split(j) == "train"
        if r["split"] == "test":
            assert "test" in (doc_split(i), doc_split(j))
    assert len(train_docs) < 50
    assert "LESSER GENERAL PUBLIC LICENSE" in (out / "LICENCE.txt").read_text()
    cfg = json.loads((out / "finetune.json").read_text())
    assert cfg["task"] == "regression" and cfg["text_pair_column"] == "text_pair"
