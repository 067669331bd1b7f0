"""Which crawl snapshot a recurring refresh takes next (pure: folders and the band index's INDEX.json).

A crawl root holds one folder per snapshot (`CC-MAIN-2026-40/`, `2026-11-23/`, ...), taken in name
order. A snapshot is done once a generation of the band index carries its name (`lmforge corpus
--snapshot NAME` records it at commit). A refresh takes the oldest snapshot not yet done, or the
one named.
"""
from __future__ import annotations

import re
from pathlib import Path

from pipelines.corpus.index import read_index_file

SNAPSHOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def list_snapshots(crawl_root: str | Path) -> list[str]:
    root = Path(crawl_root)
    if not root.is_dir():
        raise FileNotFoundError(f"crawl_root {root}: no such folder (it should hold one folder per crawl snapshot)")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and SNAPSHOT_NAME.match(p.name))


def indexed_snapshots(index: str | Path) -> dict[str, str]:
    """Snapshot name -> the generation that holds it."""
    data = read_index_file(index)
    return {g["snapshot"]: g["name"] for g in (data or {}).get("generations", []) if g.get("snapshot")}


def next_snapshot(crawl_root: str | Path, index: str | Path, named: str = "") -> tuple[str | None, str]:
    """(snapshot to take or None, why). A named snapshot is taken even when indexed: the corpus stage
    then finds it already in the index and the refresh stops after it."""
    snaps = list_snapshots(crawl_root)
    done = indexed_snapshots(index)
    if named:
        if named not in snaps:
            raise FileNotFoundError(f"snapshot {named!r} is not a folder of {crawl_root} (it has: {', '.join(snaps) or 'none'})")
        return named, f"named; {'already in the index as ' + done[named] if named in done else 'not yet in the index'}"
    todo = [s for s in snaps if s not in done]
    if not todo:
        return None, f"every snapshot of {crawl_root} is in the index ({len(snaps)}: {', '.join(snaps) or 'none'})"
    return todo[0], f"the oldest of {len(todo)} snapshot(s) not yet in the index"
