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
