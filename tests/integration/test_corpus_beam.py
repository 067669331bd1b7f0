"""The corpus stage's Beam pipeline on real pages (multi-process DirectRunner)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny"


@pytest.mark.slow
def test_corpus_reconciles_quarantines_and_is_deterministic(tmp_path):
    import pyarrow.parquet as pq

    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.stage import run
    from schemas.manifest import read_manifest

    inputs = [str(TINY / "tiny.warc.gz"), str(TINY / "broken.warc.gz"), str(TINY / "*.wet")]
    outs = [run(CorpusConfig(input=inputs, output=str(tmp_path / f"c{i}"), line_dedup=True)) for i in range(2)]
    m1, m2 = read_manifest(outs[0]), read_manifest(outs[1])
    c = m1["counts"]
    assert c["in"] == c["kept"] + sum(c["dropped"].values()) + c["duplicates"] + c["quarantined"] > 100
    # Same input and config -> byte-identical files.
    assert [(o["path"], o["sha256"]) for o in m1["outputs"]] == [(o["path"], o["sha256"]) for o in m2["outputs"]]

    q = [json.loads(line) for f in sorted((outs[0] / "quarantine").glob("part-*.jsonl")) for line in f.read_text().splitlines()]
    broken = [r for r in q if r["source"].endswith("broken.warc.gz")]
    assert len(broken) == 1 and broken[0]["offset"] > 0 and "Content-Length" in broken[0]["detail"]
    # The KOI8-R page sent without any charset is decoded by detection, not quarantined.
    assert not any(r["reason"] == "undecodable" for r in q)

    dups = [r for f in sorted((outs[0] / "duplicates").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    kept_ids = set()
    for f in (outs[0] / "data").glob("*/*.parquet"):
        kept_ids.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    assert dups and all(d["id"] not in kept_ids for d in dups)
    # Every cluster is named by, and keeps, its representative, which is in the output; near
    # duplicates were verified against it (exact shingle Jaccard >= the threshold).
    assert all(d["kept_id"] == d["cluster_id"] and d["kept_id"] in kept_ids and d["kept_generation"] is None for d in dups)
    assert all(d["similarity"] >= 0.8 for d in dups)
    assert m1["extra"]["beam_metrics"].get("line_dedup_lines_removed", 0) >= 1  # C4 line dedup ran
    assert m1["extra"]["near_dedup_clusters"]["unconverged_nodes"] == 0
    assert {d["kind"] for d in dups} == {"exact", "near"}
    # Beam's own counters agree with the files.
    assert m1["extra"]["beam_metrics"].get("in") == c["in"]


@pytest.mark.slow
def test_url_filter_pii_and_decontamination_in_the_stage(tmp_path):
    """Real news pages with a blocked URL, the handbook's addresses and a VADER test sentence planted:
    each step's outcome is counted, the contaminated page names its item, and counts reconcile."""
    import pyarrow.parquet as pq

    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.stage import run
    from pipelines.labeled.registry import prepare
    from schemas.manifest import read_manifest
    from tests.fixtures import VADER, planted_pages

    vader = prepare("vader", tmp_path / "vader", VADER)
    planted = planted_pages(tmp_path / "planted.jsonl", vader)
    inputs = [str(tmp_path / "planted.jsonl"), str(TINY / "tiny.warc.gz")]
    dropped_run = run(CorpusConfig(input=inputs, output=str(tmp_path / "drop"), decontaminate={"files": [str(vader)]}))
    c = read_manifest(dropped_run)["counts"]
    assert c["in"] == c["kept"] + sum(c["dropped"].values()) + c["duplicates"] + c["quarantined"]
    assert c["dropped"]["url_domain"] == 1 and c["dropped"]["contaminated"] == 1
    assert c["noted"]["pii_email"] >= 1 and c["noted"]["pii_ipv4"] >= 1
    assert c["contamination"]["vader"]["found"] == 1 and c["contamination"]["vader"]["pages_dropped"] == 1
    rows = [r for f in (dropped_run / "dropped").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    by_id = {r["id"]: r for r in rows}
    assert by_id["planted-url"]["detail"] == "pornhub.com"
    assert json.loads(by_id["planted-test"]["detail"])["items"] == [["vader", "test", planted["item"]]]
    texts = [t for f in (dropped_run / "data").glob("*/*.parquet") for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()]
    assert not any("admin@falcot.com" in t or "212.94.201.10" in t for t in texts)
    assert any("email@example.com" in t for t in texts)

    marked = run(CorpusConfig(input=inputs, output=str(tmp_path / "mark"), decontaminate={"files": [str(vader)], "mode": "mark"}))
    m = read_manifest(marked)["counts"]
    assert "contaminated" not in m["dropped"] and m["kept"] == c["kept"] + 1 and m["noted"]["contaminated"] == 1
    assert m["contamination"]["vader"]["pages_kept"] == 1
    matches = [json.loads(x) for f in (marked / "matches").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert [(r["id"], r["action"]) for r in matches] == [("planted-test", "kept")]
    assert "Evaluation items found in the crawl" in (marked / "report.html").read_text()

    # a finished corpus checked again without re-cleaning: the marked one holds the item, the other not
    from pipelines.corpus.contamination import ContaminationConfig
    from pipelines.corpus.contamination import run as check

    again = check(ContaminationConfig(corpus=str(marked), output=str(tmp_path / "check"), decontaminate={"files": [str(vader)]}))
    report = json.loads((again / "report.json").read_text())
    assert report["tasks"]["vader"]["found_by_split"] == {"test": 1} and report["documents"] == m["kept"]
    assert [json.loads(x)["id"] for x in (again / "matches.jsonl").read_text().splitlines()] == ["planted-test"]
    clean = check(ContaminationConfig(corpus=str(dropped_run), output=str(tmp_path / "check2"), decontaminate={"files": [str(vader)]}))
    assert json.loads((clean / "report.json").read_text())["tasks"]["vader"]["found"] == 0
