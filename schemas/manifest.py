"""Stage manifests: `<run>/<stage>/manifest.json`, written last, atomically.

A manifest says what a stage read (with the sha256 of each input manifest), how it was
configured, what it counted and which files it wrote (with sizes and sha256). A stage
directory without a manifest is incomplete, whatever else it holds.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from common.redact import redact
from schemas import storage

MANIFEST_SCHEMA = "lmforge.manifest/v1"
MANIFEST_NAME = "manifest.json"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    return storage.sha256(path, chunk)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Readers never see half a file: temporary name + rename locally, one object put on object storage."""
    storage.write_bytes(path, data)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n").encode())


def _jsonable(o: Any) -> Any:
    if is_dataclass(o):
        return asdict(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


@dataclass
class InputRef:
    """A file or stage directory a stage read."""

    path: str
    """Where it was read from (as given)."""
    manifest_sha256: str | None = None
    """sha256 of the producing stage's manifest.json, when the input is a stage output."""


@dataclass
class OutputFile:
    path: str
    """Path relative to the stage directory."""
    bytes: int
    sha256: str


@dataclass
class Manifest:
    stage: str
    """Stage name: corpus, tokenizer, shards, pretrain, finetune, distill, evaluate."""
    config: dict[str, Any]
    """The stage's typed config, as a plain dict."""
    inputs: list[InputRef] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    """Record counts; for the corpus: in = kept + sum(dropped) + duplicates + quarantined."""
    outputs: list[OutputFile] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Stage-specific facts (metrics, timings, library versions)."""
    schema: str = MANIFEST_SCHEMA
    created_unix: float = field(default_factory=time.time)
    wall_seconds: float | None = None


def input_ref(path: str | os.PathLike) -> InputRef:
    """Reference an input; if it is a stage directory, pin its manifest's hash."""
    m = storage.join(path, MANIFEST_NAME)
    return InputRef(str(path), sha256_file(m) if storage.is_file(m) else None)


def describe_outputs(stage_dir: str | os.PathLike, files: list[str | os.PathLike]) -> list[OutputFile]:
    """Path, size and sha256 of each file (hashed on a few threads: hashlib releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    if storage.is_remote(stage_dir):
        full = sorted({str(f) if storage.is_remote(f) else storage.join(stage_dir, str(f)) for f in files})
        rels = [storage.relative(f, str(stage_dir)) for f in full]
    else:
        stage_dir = Path(stage_dir)

        def located(f: Path) -> Path:
            # absolute, or relative to the working directory through stage_dir (as `stage_dir / name`
            # gives when stage_dir itself is relative), or relative to stage_dir
            if f.is_absolute() or f.parts[:len(stage_dir.parts)] == stage_dir.parts:
                return f
            return stage_dir / f

        paths = sorted({located(Path(f)).absolute() for f in files})
        root = stage_dir.absolute()
        full, rels = [str(f) for f in paths], [str(f.relative_to(root)) for f in paths]
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        digests = list(pool.map(sha256_file, full))
        sizes = list(pool.map(storage.size, full))
    return [OutputFile(r, n, d) for r, n, d in zip(rels, sizes, digests)]


def write_manifest(stage_dir: str | os.PathLike, manifest: Manifest) -> str | Path:
    path = storage.join(stage_dir, MANIFEST_NAME)
    atomic_write_json(path, redact(asdict(manifest)))  # a manifest travels with its data: no credential in it
    return path if storage.is_remote(path) else Path(path)


def read_manifest(stage_dir: str | os.PathLike) -> dict[str, Any]:
    """Read a stage's manifest; a missing one means the stage did not finish."""
    path = storage.join(stage_dir, MANIFEST_NAME)
    if not storage.is_file(path):
        raise FileNotFoundError(
            f"{path} does not exist: the stage at {stage_dir} has not finished (or never ran)"
        )
    data = json.loads(storage.read_text(path))
    if data.get("schema") != MANIFEST_SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r}, expected {MANIFEST_SCHEMA!r}")
    return data


def verify_outputs(stage_dir: str | os.PathLike) -> None:
    """Raise ValueError naming the first output whose size or sha256 differs from the manifest."""
    for o in read_manifest(stage_dir)["outputs"]:
        p = storage.join(stage_dir, o["path"])
        if not storage.is_file(p):
            raise ValueError(f"{p}: listed in the manifest but missing")
        if storage.size(p) != o["bytes"] or sha256_file(p) != o["sha256"]:
            raise ValueError(f"{p}: checksum mismatch against {storage.join(stage_dir, MANIFEST_NAME)}")


class StageBusy(RuntimeError):
    """Another process is writing the same stage directory."""


def stage_lock(stage_dir: str | os.PathLike, what: str = ""):
    """Hold `<stage_dir>/.lock` while a stage writes there, so two runs pointed at one output folder
    fail fast instead of mixing their files (schemas.storage.exclusive: a flock that dies with the
    process on a local disk, a lease object on object storage)."""
    return storage.exclusive(stage_dir, what=what, busy=StageBusy,
                             message="{folder}: another process is writing this stage directory ({holder}); "
                                     "wait for it or choose another --output")
