"""Two refreshes on one band index at once: one waits for the other (or fails naming the holder),
the index lists two distinct generations, and rerunning either snapshot keeps its pages."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_corpus_incremental import TINY, _kept, _split_warc

ROOT = Path(__file__).resolve().parents[2]


def _corpus(snap: Path, out: Path, index: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lmforge.cli", "corpus", "--input", str(snap), "--output", str(out),
                             "--index", str(index), "--num-shards", "1", *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_concurrent_refreshes_serialise_on_the_index(tmp_path):
    from pipelines.corpus.index import index_lock
    from schemas.manifest import read_manifest

    index = tmp_path / "index"
    snap1, snap2 = tmp_path / "snap1", tmp_path / "snap2"
    _split_warc(TINY / "tiny.warc.gz", snap1 / "crawl.warc.gz", snap2 / "crawl.warc.gz")

    # Without --index-wait a run that finds the index held fails at once, names the holder and writes nothing.
    with index_lock(index, what="the test"):
        p = _corpus(snap1, tmp_path / "refused", index)
        _, err = p.communicate(timeout=300)
    assert p.returncode == 2, err
    assert f"index locked by pid {os.getpid()}" in err and "the test" in err and "--index-wait" in err
    assert not (tmp_path / "refused" / "manifest.json").exists()
    assert not (index / "INDEX.json").exists() and not list(index.glob("gen-*"))

    # Two refreshes started together: the second to reach the index queues behind the first.
    runs = {name: _corpus(snap, tmp_path / name, index, "--index-wait", "600")
            for name, snap in (("a", snap1), ("b", snap2))}
    outs = {}
    for name, p in runs.items():
        outs[name], err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    assert sum("waiting up to 600s" in o for o in outs.values()) == 1, outs
    gens = json.loads((index / "INDEX.json").read_text())["generations"]
    assert [g["name"] for g in gens] == ["gen-00001", "gen-00002"]
    assert len({g["fingerprint"] for g in gens}) == 2
    assert sorted(p.name for p in index.glob("gen-*")) == ["gen-00001", "gen-00002"]
    wrote = {n: read_manifest(tmp_path / n)["extra"]["index"]["wrote"] for n in runs}
    assert sorted(wrote.values()) == ["gen-00001", "gen-00002"]

    # Rerunning either snapshot finds it indexed and keeps exactly its pages again (not its own
    # pages as duplicates of themselves).
    for name, snap in (("a", snap1), ("b", snap2)):
        p = _corpus(snap, tmp_path / f"{name}-again", index)
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        first = sorted(r["id"] for r in _kept(tmp_path / name))
        assert first and sorted(r["id"] for r in _kept(tmp_path / f"{name}-again")) == first
        assert read_manifest(tmp_path / f"{name}-again")["extra"]["index"]["wrote"] is None
    assert [g["name"] for g in json.loads((index / "INDEX.json").read_text())["generations"]] == ["gen-00001", "gen-00002"]
