"""Driver side of the persisted MinHash band index (layout in schemas/minhash_index.py).

No Beam here: open the index (check its parameters, find the committed generations, drop what a
killed run left), plan this run (which generations to read, which to write), commit
atomically. The Beam shell reads and writes the Parquet files named by the plan.

Rerunning a snapshot that is already in the index changes nothing: the snapshot is recognised
by its fingerprint (sha256 of its input files' contents and of the dedup-relevant config), the
run deduplicates against the generations committed *before* it, so it writes the same output
as the first time, and the index is left as it is.

One run at a time: `index_lock` holds `<index>/.lock` from `open_index` until `commit`. Without it
two refreshes would both plan `gen-N`, each delete the other's unlisted generation as debris, and
the last commit would hide the other's pages. On a local or NFSv4 disk the lock is a POSIX `flock`,
released when the holder dies; on object storage it is a lease object (schemas.storage.exclusive).

The commit is INDEX.json, written last (after every file of the new generation) and read first:
a local atomic rename, or one object put on object storage, where a generation folder that
INDEX.json does not list is what a killed run left and is deleted by the next run.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from schemas import storage
from schemas.manifest import StageBusy, atomic_write_json
from schemas.minhash_index import INDEX_FILE, INDEX_SCHEMA_VERSION

LOCK_FILE = ".lock"


class IndexLocked(StageBusy):
    """Another run holds the band index (it is between opening the index and committing to it)."""


def lock_holder(root: str | os.PathLike) -> str:
    """Who holds (or last held) a local index's lock, from what the holder wrote into the lock file."""
    try:
        info = json.loads(storage.read_text(storage.join(root, LOCK_FILE)) or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} (since {info.get('since')}, {info.get('what', 'a corpus run')})"


def index_lock(root: str | os.PathLike, wait_seconds: float = 0.0, what: str = "", poll_seconds: float = 1.0):
    """Hold the index's exclusive lock; wait up to `wait_seconds` for another run to finish, then raise
    IndexLocked naming the holder."""
    return storage.exclusive(root, what=what or "a corpus run", wait_seconds=wait_seconds, poll_seconds=poll_seconds,
                             busy=IndexLocked, announce="corpus: ",
                             message="{folder}: index locked by {holder}{waited}; nothing was written. "
                                     "Wait for that run, or pass --index-wait SECONDS to queue behind it.")


class IndexMismatch(ValueError):
    """The index was built with parameters whose signatures or band keys do not compare with this run's."""


@dataclass
class IndexPlan:
    root: str
    params: dict[str, Any]
    fingerprint: str
    read: list[str] = field(default_factory=list)
    """Committed generations this run deduplicates against, oldest first."""
    write: str | None = None
    """The generation this run writes (None: the snapshot is already indexed)."""
    committed: list[dict[str, Any]] = field(default_factory=list)

    def generation_dir(self, name: str) -> str:
        return storage.join(self.root, name)

    def band_files(self) -> list[str]:
        return sorted(f for g in self.read for f in storage.files_under(storage.join(self.root, g, "bands"), "band=*/*.parquet"))

    def doc_files(self) -> list[tuple[str, int]]:
        """(file, generation number) of every docs file of the generations read."""
        return sorted((f, self.generation_number(g)) for g in self.read
                      for f in storage.files_under(storage.join(self.root, g, "docs"), "*.parquet"))

    def generation_number(self, name: str) -> int:
        return int(name.split("-", 1)[1])


def snapshot_fingerprint(files: list[str], config: dict[str, Any]) -> str:
    """sha256 over the input files' contents (sorted by content hash, so moving them changes
    nothing) and the config that decides what is kept."""
    digests = []
    for f in files:
        h = hashlib.sha256()
        digests.append(storage.sha256(f))
    h = hashlib.sha256()
    for d in sorted(digests):
        h.update(d.encode())
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    return h.hexdigest()


def read_index_file(root: str | os.PathLike) -> dict[str, Any] | None:
    path = storage.join(root, INDEX_FILE)
    if not storage.is_file(path):
        return None
    data = json.loads(storage.read_text(path))
    if data.get("schema") != INDEX_SCHEMA_VERSION:
        raise IndexMismatch(f"{path}: schema {data.get('schema')!r}, this lmforge reads {INDEX_SCHEMA_VERSION!r}")
    return data


def check_params(path: str, have: dict[str, Any], want: dict[str, Any]) -> None:
    diff = {k: (have.get(k), want.get(k)) for k in sorted(set(have) | set(want)) if have.get(k) != want.get(k)}
    if diff:
        lines = "; ".join(f"{k}: index has {a!r}, this run uses {b!r}" for k, (a, b) in diff.items())
        raise IndexMismatch(f"{storage.join(path, INDEX_FILE)} was built with other MinHash/LSH parameters, whose band keys do "
                            f"not compare with this run's ({lines}). Use a new --index directory, or rerun with "
                            "the index's parameters.")


def open_index(root: str | os.PathLike, params: dict[str, Any], fingerprint: str) -> IndexPlan:
    """Plan a run against the index at `root` (created if missing). Deletes generation
    directories that INDEX.json does not list: they are what a killed run left behind (call it
    under `index_lock`, or a concurrent run's generation would look like debris)."""
    root = str(root)
    storage.make_dirs(root)
    data = read_index_file(root)
    committed = data["generations"] if data else []
    if data:
        check_params(root, data["params"], params)
    listed = {g["name"] for g in committed}
    on_disk = {storage.relative(f, root).split("/", 1)[0] for f in storage.files_under(root)}
    if not storage.is_remote(root):  # an empty local generation folder holds no file
        on_disk |= {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    for stale in sorted(d for d in on_disk if d.startswith("gen-") and d not in listed):
        storage.remove_tree(storage.join(root, stale))
    plan = IndexPlan(root=root, params=params, fingerprint=fingerprint, committed=committed)
    earlier = []
    for g in committed:
        if g["fingerprint"] == fingerprint:
            plan.read = earlier
            return plan
        earlier.append(g["name"])
    plan.read = earlier
    plan.write = f"gen-{len(committed) + 1:05d}"
    return plan


def commit(plan: IndexPlan, summary: dict[str, Any]) -> None:
    """Make the generation written by this run visible: one atomic rename of INDEX.json."""
    if plan.write is None:
        return
    storage.make_dirs(plan.generation_dir(plan.write))  # a snapshot with nothing kept still commits an (empty) generation
    entry = {"name": plan.write, "fingerprint": plan.fingerprint, **summary}
    atomic_write_json(storage.join(plan.root, INDEX_FILE), {"schema": INDEX_SCHEMA_VERSION, "params": plan.params,
                                                            "generations": [*plan.committed, entry]})
    storage.sync_dir(plan.root)
