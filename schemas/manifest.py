"""Stage manifests: `<run>/<stage>/manifest.json`, written last, atomically.

A manifest says what a stage read (with the sha256 of each input manifest), how it was
configured, what it counted and which files it wrote (with sizes and sha256). A stage
directory without a manifest is incomplete, whatever else it holds.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

MANIFEST_SCHEMA = "lmforge.manifest/v1"
MANIFEST_NAME = "manifest.json"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary name in the same directory, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    p = Path(path)
    m = p / MANIFEST_NAME if p.is_dir() else None
    return InputRef(str(path), sha256_file(m) if m is not None and m.exists() else None)


def describe_outputs(stage_dir: str | os.PathLike, files: list[str | os.PathLike]) -> list[OutputFile]:
    """Path, size and sha256 of each file (hashed on a few threads: hashlib releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    stage_dir = Path(stage_dir)

    def located(f: Path) -> Path:
        # absolute, or relative to the working directory through stage_dir (as `stage_dir / name`
        # gives when stage_dir itself is relative), or relative to stage_dir
        if f.is_absolute() or f.parts[:len(stage_dir.parts)] == stage_dir.parts:
            return f
        return stage_dir / f

    full = sorted({located(Path(f)).absolute() for f in files})
    root = stage_dir.absolute()
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        digests = list(pool.map(sha256_file, full))
    return [OutputFile(str(f.relative_to(root)), f.stat().st_size, d) for f, d in zip(full, digests)]


def write_manifest(stage_dir: str | os.PathLike, manifest: Manifest) -> Path:
    path = Path(stage_dir) / MANIFEST_NAME
    atomic_write_json(path, asdict(manifest))
    return path


def read_manifest(stage_dir: str | os.PathLike) -> dict[str, Any]:
    """Read a stage's manifest; a missing one means the stage did not finish."""
    path = Path(stage_dir) / MANIFEST_NAME
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: the stage at {stage_dir} has not finished (or never ran)"
        )
    data = json.loads(path.read_text())
    if data.get("schema") != MANIFEST_SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r}, expected {MANIFEST_SCHEMA!r}")
    return data


def verify_outputs(stage_dir: str | os.PathLike) -> None:
    """Raise ValueError naming the first output whose size or sha256 differs from the manifest."""
    stage_dir = Path(stage_dir)
    for o in read_manifest(stage_dir)["outputs"]:
        p = stage_dir / o["path"]
        if not p.exists():
            raise ValueError(f"{p}: listed in the manifest but missing")
        if p.stat().st_size != o["bytes"] or sha256_file(p) != o["sha256"]:
            raise ValueError(f"{p}: checksum mismatch against {stage_dir / MANIFEST_NAME}")


class StageBusy(RuntimeError):
    """Another process is writing the same stage directory."""


def stage_lock(stage_dir: str | os.PathLike):
    """Hold `<stage_dir>/.lock` (an exclusive flock) while a stage writes there, so two runs pointed at
    one output folder fail fast instead of mixing their files. The lock dies with the process."""
    import contextlib
    import fcntl

    @contextlib.contextmanager
    def held():
        path = Path(stage_dir)
        path.mkdir(parents=True, exist_ok=True)
        with open(path / ".lock", "w") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StageBusy(f"{path}: another process is writing this stage directory (it holds {path / '.lock'}); "
                                "wait for it or choose another --output") from None
            yield

    return held()
