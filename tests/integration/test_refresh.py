"""Three recurring refreshes on a split of the tiny crawl, through the real stages (preset tiny)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures import files_holding
from tests.integration.test_corpus_incremental import TINY, _kept, _split_warc

ROOT = Path(__file__).resolve().parents[2]
PLANTED = "planted-session-token-5Hn1"


@pytest.mark.slow
def test_three_refreshes(tmp_path, monkeypatch, capfd, prefect_api):
    import pyarrow.parquet as pq

    from flows.refresh import lmforge_refresh
    from schemas.manifest import read_manifest

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", f"{ROOT}:{tmp_path}")
    monkeypatch.setenv("AWS_SESSION_TOKEN", PLANTED)  # a credential the worker holds: it reaches no output
    crawl = tmp_path / "crawl"
    s1, s2 = crawl / "2026-10", crawl / "2026-11"
    _split_warc(TINY / "tiny.warc.gz", s1 / "crawl.warc.gz", s2 / "crawl.warc.gz")
    kw = dict(run_name="weekly", runs_dir=str(tmp_path / "runs"), crawl_root=str(crawl),
              dedup_index=str(tmp_path / "state" / "minhash_index"), preset="tiny",
              replay_fraction=0.5, nproc=1)  # one pretraining process: the DAG's two are test_dag_e2e's
    base = tmp_path / "runs" / "weekly"

    first = lmforge_refresh(**kw)
    assert first["snapshot"] == "2026-10" and first["status"] == "refreshed" and first["previous"] is None
    run1 = {p: p.stat().st_mtime_ns for p in (base / "2026-10").rglob("*") if p.is_file()}
    kept1 = _kept(base / "2026-10" / "corpus")
    # snapshot 2 also recrawls a page snapshot 1 kept
    page = kept1[0]
    (s2 / "recrawl.jsonl").write_text(json.dumps({"id": "recrawl", "url": page["url"], "text": page["text"]}) + "\n")

    second = lmforge_refresh(**kw)
    run2 = base / "2026-11"
    assert second["snapshot"] == "2026-11" and second["previous"] == str(base / "2026-10")
    dups = {d["id"]: d for f in (run2 / "corpus" / "duplicates").glob("*.parquet") for d in pq.read_table(f).to_pylist()}
    assert dups["recrawl"]["kept_generation"] == 1 and dups["recrawl"]["kept_id"] == page["id"]
    assert read_manifest(run2 / "corpus")["counts"]["duplicates_by_generation"].get("gen-00001", 0) >= 1
    # run 1's tokenizer adopted, its model continued
    tok = read_manifest(run2 / "tokenizer")["config"]
    assert tok["from_model"] == str(base / "2026-10" / "pretrain" / "hf")
    assert read_manifest(run2 / "pretrain")["config"]["init_from"] == str(base / "2026-10" / "pretrain" / "hf")
    def vocab(stage: Path) -> dict:
        return json.loads((stage / "tokenizer.json").read_text())["model"]["vocab"]

    assert vocab(run2 / "tokenizer") == vocab(base / "2026-10" / "tokenizer")
    # half of snapshot 1's kept pages replayed into snapshot 2's shards
    shards2 = read_manifest(run2 / "shards")
    assert 0 < shards2["counts"]["replayed_documents"] < len(kept1)
    assert str(base / "2026-10" / "corpus") in {i["path"] for i in shards2["inputs"]}
    report = json.loads((run2 / "eval" / "report.json").read_text())
    assert report["previous"]["path"] == str(base / "2026-10" / "pretrain" / "hf") and report["previous"]["mlm_loss"] > 0
    assert (base / "latest").resolve() == run2.resolve()

    # every snapshot indexed: nothing to do
    third = lmforge_refresh(**kw)
    assert third["status"] == "nothing new" and "every snapshot" in third["why"]
    # a snapshot already indexed, named by another refresh: the corpus stage finds it in the index, the rest is skipped
    other = lmforge_refresh(**{**kw, "run_name": "other", "snapshot": "2026-10"})
    assert other["status"] == "nothing new" and "already in the band index" in other["why"]
    assert (tmp_path / "runs" / "other" / "2026-10" / "corpus" / "manifest.json").exists()
    assert not (tmp_path / "runs" / "other" / "2026-10" / "tokenizer").exists()
    # the first snapshot's outputs are untouched
    assert {p: p.stat().st_mtime_ns for p in (base / "2026-10").rglob("*") if p.is_file()} == run1
    gens = json.loads((tmp_path / "state" / "minhash_index" / "INDEX.json").read_text())["generations"]
    assert [(g["name"], g["snapshot"]) for g in gens] == [("gen-00001", "2026-10"), ("gen-00002", "2026-11")]
    out, err = capfd.readouterr()
    assert not files_holding(PLANTED, tmp_path, texts={"stdout": out, "stderr": err})
