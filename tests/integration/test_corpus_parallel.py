"""The corpus stage in multi_processing (2 worker processes) writes the bytes of in_memory: two
snapshots of the sample crawl through one band index, with C4 line dedup (issue 15 item 4; the
100k-document check is `lmforge bench scale --check-modes 3`, docs/BENCHMARKS.md)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CRAWL = ROOT / "samples" / "crawl"
SNAPSHOTS = ([CRAWL / "debian-docs-000.warc.gz", CRAWL / "news-000.warc.gz", CRAWL / "broken-000.warc.gz"],
             [CRAWL / "debian-docs-001.warc.gz", CRAWL / "debian-docs-000.warc.gz", CRAWL / "encodings-000.warc.gz"])


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "report.json", "report.html") and ".lock" not in p.parts
            and "report" not in p.parts and p.name != "INDEX.json"}


def _refresh(base: Path, beam_args: list[str]) -> dict[str, str]:
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.stage import run
    from schemas.manifest import read_manifest

    for k, files in enumerate(SNAPSHOTS):
        out = base / f"snap{k}"
        run(CorpusConfig(input=[str(f) for f in files], output=str(out), index=str(base / "index"), line_dedup=True, num_shards=3),
            beam_args)
        assert not (out / "_staging").exists()  # the staged texts and hashes are gone after the run
        assert read_manifest(out)["counts"]["in"] > 0
    return _tree(base)


@pytest.mark.slow
def test_multi_processing_writes_the_bytes_of_in_memory(tmp_path):
    ref = _refresh(tmp_path / "in_memory", [])
    got = _refresh(tmp_path / "multi", ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    assert any(k.startswith("snap1/duplicates/") for k in ref) and any(k.startswith("index/gen-00002/docs/") for k in ref)
    assert got == ref
