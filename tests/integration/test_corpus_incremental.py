"""Incremental refresh: a second snapshot is deduplicated against the band index of the first,
the index grows by one generation atomically, and rerunning a snapshot changes nothing."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny"


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _split_warc(src: Path, dst_even: Path, dst_odd: Path) -> None:
    """Two crawl snapshots from one: alternate gzip members (records), bytes unchanged."""
    from warcio.archiveiterator import ArchiveIterator

    data = src.read_bytes()
    spans = []
    with open(src, "rb") as fh:
        it = ArchiveIterator(fh)
        for _ in it:
            spans.append((it.get_record_offset(), it.get_record_length()))
    head, rest = spans[0], spans[1:]  # warcinfo goes to both
    for dst, parity in ((dst_even, 0), (dst_odd, 1)):
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(b"".join(data[o:o + n] for o, n in [head, *(sp for i, sp in enumerate(rest) if i % 2 == parity)]))


def _kept(out: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [r for f in sorted((out / "data").glob("*/*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.mark.slow
def test_second_snapshot_dedups_against_index_and_rerun_changes_nothing(tmp_path):
    import pyarrow.parquet as pq

    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.index import IndexMismatch
    from pipelines.corpus.stage import run
    from schemas.manifest import read_manifest

    index = tmp_path / "index"
    snap1, snap2 = tmp_path / "snap1", tmp_path / "snap2"
    _split_warc(TINY / "tiny.warc.gz", snap1 / "crawl.warc.gz", snap2 / "crawl.warc.gz")
    first = run(CorpusConfig(input=[str(snap1)], output=str(tmp_path / "s1"), index=str(index)))
    published = sorted(_kept(first), key=lambda r: r["id"])
    assert len(published) > 10
    assert [g["name"] for g in json.loads((index / "INDEX.json").read_text())["generations"]] == ["gen-00001"]

    # Snapshot 2: the other half of the crawl, plus a recrawl that copies one page of snapshot
    # 1 exactly and edits another slightly.
    exact, edited = published[3], published[7]
    words = edited["text"].split(" ")
    words[len(words) // 2] = "(updated)"
    (snap2 / "recrawl.jsonl").write_text(
        json.dumps({"id": "recrawl-exact", "url": exact["url"], "text": exact["text"]}) + "\n"
        + json.dumps({"id": "recrawl-edited", "url": edited["url"], "text": " ".join(words)}) + "\n")

    second = run(CorpusConfig(input=[str(snap2)], output=str(tmp_path / "s2"), index=str(index)))
    dups = {d["id"]: d for f in sorted((second / "duplicates").glob("part-*.parquet")) for d in pq.read_table(f).to_pylist()}
    assert dups["recrawl-exact"]["kept_id"] == exact["id"] and dups["recrawl-exact"]["kept_generation"] == 1
    assert dups["recrawl-exact"]["kind"] == "exact"
    assert dups["recrawl-edited"]["kept_id"] == edited["id"] and dups["recrawl-edited"]["kept_generation"] == 1
    assert dups["recrawl-edited"]["kind"] == "near" and dups["recrawl-edited"]["similarity"] >= 0.8
    m2 = read_manifest(second)
    assert m2["counts"]["kept"] >= 1 and m2["extra"]["index"]["read"] == ["gen-00001"]
    assert m2["extra"]["index"]["wrote"] == "gen-00002"
    index_after_two = _tree(index)
    assert any(k.startswith("gen-00002/bands/band=") for k in index_after_two)

    # Rerun snapshot 2 (e.g. a retried refresh): same files, index untouched. A generation a
    # killed run left behind is not listed in INDEX.json and is removed.
    (index / "gen-00003" / "bands").mkdir(parents=True)
    (index / "gen-00003" / "bands" / "half-written.parquet").write_bytes(b"PAR1")
    again = run(CorpusConfig(input=[str(snap2)], output=str(tmp_path / "s2-again"), index=str(index)))
    m3 = read_manifest(again)
    assert [(o["path"], o["sha256"]) for o in m3["outputs"]] == [(o["path"], o["sha256"]) for o in m2["outputs"]]
    assert m3["extra"]["index"]["wrote"] is None and m3["extra"]["index"]["read"] == ["gen-00001"]
    assert _tree(index) == index_after_two

    # Band keys made with other MinHash parameters do not compare: refuse, naming the difference.
    with pytest.raises(IndexMismatch, match="num_perm"):
        run(CorpusConfig(input=[str(snap2)], output=str(tmp_path / "s4"), index=str(index), num_perm=64))
