"""Driver side of the persisted MinHash band index (layout in schemas/minhash_index.py).

No Beam here: open the index (check its parameters, find the committed generations, drop what a
killed run left), plan this run (which generations to read, which to write), commit
atomically. The Beam shell reads and writes the Parquet files named by the plan.

Rerunning a snapshot that is already in the index changes nothing: the snapshot is recognised
by its fingerprint (sha256 of its input files' contents and of the dedup-relevant config), the
run deduplicates against the generations committed *before* it, so it writes the same output
as the first time, and the index is left as it is.

One run at a time: `index_lock` holds an exclusive lock on `<index>/.lock` from `open_index` until
`commit`. Without it two refreshes would both plan `gen-N`, each delete the other's unlisted
generation as debris, and the last commit would hide the other's pages. The lock is a POSIX
`flock`: it is released when the holder dies, and it works on a local or NFSv4 file system, not on
object storage.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.manifest import StageBusy, atomic_write_json
from schemas.minhash_index import INDEX_FILE, INDEX_SCHEMA_VERSION

LOCK_FILE = ".lock"


class IndexLocked(StageBusy):
    """Another run holds the band index (it is between opening the index and committing to it)."""


def lock_holder(root: str | Path) -> str:
    """Who holds (or last held) the index lock, from what the holder wrote into the lock file."""
    try:
        info = json.loads((Path(root) / LOCK_FILE).read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} (since {info.get('since')}, {info.get('what', 'a corpus run')})"


@contextlib.contextmanager
def index_lock(root: str | Path, wait_seconds: float = 0.0, what: str = "", poll_seconds: float = 1.0):
    """Hold the index's exclusive lock; wait up to `wait_seconds` for another run to finish, then raise
    IndexLocked naming the holder."""
    import fcntl

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    with open(root / LOCK_FILE, "a+") as f:  # "a+": never truncate what the holder wrote
        announced = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f" after waiting {wait_seconds:.0f}s" if wait_seconds else ""
                    raise IndexLocked(f"{root}: index locked by {lock_holder(root)}{waited}; nothing was written. "
                                      "Wait for that run, or pass --index-wait SECONDS to queue behind it.") from None
                if not announced:
                    print(f"corpus: {root}: index locked by {lock_holder(root)}; waiting up to {wait_seconds:.0f}s",
                          flush=True)
                    announced = True
                time.sleep(min(poll_seconds, max(0.0, deadline - time.monotonic())))
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "what": what or "a corpus run"}))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)


class IndexMismatch(ValueError):
    """The index was built with parameters whose signatures or band keys do not compare with this run's."""


@dataclass
class IndexPlan:
    root: Path
    params: dict[str, Any]
    fingerprint: str
    read: list[str] = field(default_factory=list)
    """Committed generations this run deduplicates against, oldest first."""
    write: str | None = None
    """The generation this run writes (None: the snapshot is already indexed)."""
    committed: list[dict[str, Any]] = field(default_factory=list)

    def generation_dir(self, name: str) -> Path:
        return self.root / name

    def band_files(self) -> list[str]:
        return sorted(str(p) for g in self.read for p in (self.root / g / "bands").glob("band=*/*.parquet"))

    def doc_files(self) -> list[str]:
        return sorted(str(p) for g in self.read for p in (self.root / g / "docs").glob("*.parquet"))

    def generation_number(self, name: str) -> int:
        return int(name.split("-", 1)[1])


def snapshot_fingerprint(files: list[str], config: dict[str, Any]) -> str:
    """sha256 over the input files' contents (sorted by content hash, so moving them changes
    nothing) and the config that decides what is kept."""
    digests = []
    for f in files:
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        digests.append(h.hexdigest())
    h = hashlib.sha256()
    for d in sorted(digests):
        h.update(d.encode())
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    return h.hexdigest()


def read_index_file(root: Path) -> dict[str, Any] | None:
    path = root / INDEX_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("schema") != INDEX_SCHEMA_VERSION:
        raise IndexMismatch(f"{path}: schema {data.get('schema')!r}, this lmforge reads {INDEX_SCHEMA_VERSION!r}")
    return data


def check_params(path: Path, have: dict[str, Any], want: dict[str, Any]) -> None:
    diff = {k: (have.get(k), want.get(k)) for k in sorted(set(have) | set(want)) if have.get(k) != want.get(k)}
    if diff:
        lines = "; ".join(f"{k}: index has {a!r}, this run uses {b!r}" for k, (a, b) in diff.items())
        raise IndexMismatch(f"{path / INDEX_FILE} was built with other MinHash/LSH parameters, whose band keys do "
                            f"not compare with this run's ({lines}). Use a new --index directory, or rerun with "
                            "the index's parameters.")


def open_index(root: str | Path, params: dict[str, Any], fingerprint: str) -> IndexPlan:
    """Plan a run against the index at `root` (created if missing). Deletes generation
    directories that INDEX.json does not list: they are what a killed run left behind (call it
    under `index_lock`, or a concurrent run's generation would look like debris)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    data = read_index_file(root)
    committed = data["generations"] if data else []
    if data:
        check_params(root, data["params"], params)
    listed = {g["name"] for g in committed}
    for stale in sorted(root.glob("gen-*")):
        if stale.is_dir() and stale.name not in listed:
            shutil.rmtree(stale)
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
    gen_dir = plan.root / plan.write
    if not gen_dir.is_dir():  # a snapshot with nothing kept still commits an (empty) generation
        gen_dir.mkdir(parents=True)
    entry = {"name": plan.write, "fingerprint": plan.fingerprint, **summary}
    atomic_write_json(plan.root / INDEX_FILE, {"schema": INDEX_SCHEMA_VERSION, "params": plan.params,
                                               "generations": [*plan.committed, entry]})
    _fsync_dir(plan.root)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
