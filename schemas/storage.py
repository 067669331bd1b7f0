"""Where stage files live: a local folder or object storage (s3://, gs://, hdfs://, ...), through one API.

Local paths go straight to the OS (atomic writes are a temporary file + rename, as before).
Anything with a scheme goes through Beam's `FileSystems`, which covers S3 (`apache-beam[aws]`;
`--s3_endpoint_url` and friends for S3-compatible stores), GCS (`apache-beam[gcp]`) and HDFS
(`apache-beam[hadoop]`). `configure(beam_args)` hands the pipeline's options to the driver
process too, so the driver reads and writes the same store as the workers with the same
credentials and endpoint.

Object stores have no directories and no atomic rename, but a single object appears whole or
not at all. So on object storage:
- a file is written with one create/close (never a temporary name + rename);
- a "directory" is a key prefix: listing is a prefix match, removing it deletes every object
  under it;
- what makes a set of files valid is a small object written last and read first (a stage's
  manifest.json, the band index's INDEX.json).

Locks: `exclusive(folder)` holds `<folder>/.lock` with `flock` on a local disk (released when the
holder dies). On object storage it is a lease: the run writes `<folder>/.lock/<unique>.json`, lists
the prefix, and proceeds only if its lease is the only one; otherwise it deletes its own and
retries until `wait_seconds` runs out. With a store that lists what was written before (S3, GCS
are strongly consistent) two runs can never both proceed: whichever listed second sees the
other's lease. A lease outlives a killed holder: the error names the object to delete.
"""
from __future__ import annotations

import contextlib
import fnmatch
import glob as _glob
import hashlib
import json
import os
import posixpath
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def is_remote(path: str | os.PathLike) -> bool:
    """True for paths with a scheme other than file:// (s3://, gs://, hdfs://, ...)."""
    s = str(path)
    return "://" in s and not s.startswith("file://")


def _local(path: str | os.PathLike) -> str:
    s = str(path)
    return s[len("file://"):] if s.startswith("file://") else s


def join(base: str | os.PathLike, *parts: str) -> str:
    if is_remote(base):
        return posixpath.join(str(base).rstrip("/"), *parts)
    return os.path.join(_local(base), *parts)


def name(path: str | os.PathLike) -> str:
    return posixpath.basename(str(path).rstrip("/"))


def parent(path: str | os.PathLike) -> str:
    if is_remote(path):
        return posixpath.dirname(str(path).rstrip("/"))
    return os.path.dirname(_local(path).rstrip("/")) or "."


def relative(path: str, root: str) -> str:
    """`path` relative to the folder `root` (both local or both remote)."""
    root = str(root).rstrip("/") + "/"
    if is_remote(root):
        if not path.startswith(root):
            raise ValueError(f"{path} is not under {root}")
        return path[len(root):]
    return os.path.relpath(os.path.abspath(_local(path)), os.path.abspath(_local(root)))


def configure(beam_args: list[str] | None) -> None:
    """Give the driver process the store options of `beam_args` (endpoint, credentials, region)."""
    if not beam_args:
        return
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    FileSystems.set_options(PipelineOptions(list(beam_args)))


def _fs():
    from apache_beam.io.filesystems import FileSystems

    _share_s3_clients()
    if FileSystems._pipeline_options is None:  # no Beam arguments (a stage without Beam, e.g. the tokenizer):
        from apache_beam.options.pipeline_options import PipelineOptions  # the store's default credentials

        FileSystems.set_options(PipelineOptions([]))  # (AWS_* / GOOGLE_* environment, instance roles)
    return FileSystems


_S3_CLIENTS: dict[tuple, Any] = {}


def _share_s3_clients() -> None:
    """Beam 2.77 builds a new boto3 session and client for every S3 operation (S3FileSystem makes an
    S3IO per call): 0.2 s each, spent loading botocore's JSON models, which made a small corpus run
    on s3:// 5x slower than on a local disk. Clients are thread-safe and keyed here by their
    options, so one per process and endpoint is built (in this process: the driver, or a worker that
    writes through this module; Beam's own reads elsewhere keep their behaviour)."""
    try:
        from apache_beam.io.aws.clients.s3 import boto3_client
    except ImportError:  # apache-beam[aws] not installed: s3:// fails with Beam's own message
        return
    if getattr(boto3_client.Client, "_lmforge_shared", False):
        return
    original = boto3_client.Client.__init__

    def shared_init(self, options):
        from apache_beam.options.pipeline_options import PipelineOptions, S3Options

        opts = options.view_as(S3Options).get_all_options() if isinstance(options, PipelineOptions) else dict(options)
        key = tuple(sorted((k, str(v)) for k, v in opts.items() if k.startswith("s3_")))
        if key not in _S3_CLIENTS:
            original(self, options)
            _S3_CLIENTS[key] = self.client
            return
        self.client = _S3_CLIENTS[key]
        self._download_request, self._download_stream, self._download_pos = None, None, 0

    boto3_client.Client.__init__ = shared_init
    boto3_client.Client._lmforge_shared = True


def exists(path: str | os.PathLike) -> bool:
    if is_remote(path):
        return bool(_fs().exists(str(path)))
    return os.path.exists(_local(path))


def is_file(path: str | os.PathLike) -> bool:
    if is_remote(path):
        return exists(path)
    return os.path.isfile(_local(path))


def glob(pattern: str) -> list[str]:
    """Files matching a glob (`**` crosses folders), sorted."""
    if is_remote(pattern):
        return sorted(m.path for m in _fs().match([pattern])[0].metadata_list)
    return sorted(f for f in _glob.glob(_local(pattern), recursive=True) if os.path.isfile(f))


def files_under(folder: str | os.PathLike, pattern: str = "**") -> list[str]:
    """Files under `folder` whose path relative to it matches `pattern` (fnmatch; `*` also crosses
    `/`, so use the depth you mean: "*/*.parquet"), sorted; hidden files (a part starting with
    ".") are left out. A missing folder has no files."""
    folder = str(folder)
    if is_remote(folder):
        base = folder.rstrip("/") + "/"
        found = [m.path for m in _fs().match([base + "**"])[0].metadata_list]
        rels = [p[len(base):] for p in found]
    else:
        root = Path(_local(folder))
        if not root.is_dir():
            return []
        rels = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
        base = str(root) + os.sep
    keep = [r for r in rels if not any(part.startswith(".") for part in r.split("/"))
            and (pattern == "**" or (fnmatch.fnmatch(r, pattern) and r.count("/") == pattern.count("/")))]
    return sorted(base + r for r in keep)


def read_bytes(path: str | os.PathLike) -> bytes:
    if is_remote(path):
        with _fs().open(str(path), compression_type="uncompressed") as f:
            return f.read()
    with open(_local(path), "rb") as f:
        return f.read()


def read_text(path: str | os.PathLike) -> str:
    return read_bytes(path).decode("utf-8")


@contextlib.contextmanager
def open_read(path: str | os.PathLike) -> Iterator[Any]:
    """A seekable binary reader (pyarrow reads Parquet footers by seeking)."""
    if is_remote(path):
        with _fs().open(str(path), compression_type="uncompressed") as f:
            yield f
    else:
        with open(_local(path), "rb") as f:
            yield f


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Readers never see half a file: a temporary name + fsync + rename on a local disk, one
    object put (whole or nothing) on object storage."""
    if is_remote(path):
        f = _fs().create(str(path), mime_type="application/octet-stream", compression_type="uncompressed")
        try:
            f.write(data)
        finally:
            f.close()
        return
    p = Path(_local(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj: Any, **dumps: Any) -> None:
    write_bytes(path, (json.dumps(obj, **({"indent": 2, "sort_keys": True} | dumps)) + "\n").encode())


def remove(path: str | os.PathLike) -> None:
    """Delete a file if it exists."""
    if is_remote(path):
        if exists(path):
            _fs().delete([str(path)])
    else:
        Path(_local(path)).unlink(missing_ok=True)


def remove_tree(folder: str | os.PathLike) -> None:
    """Delete a folder (every object under the prefix) if it exists."""
    if is_remote(folder):
        objects = [m.path for m in _fs().match([str(folder).rstrip("/") + "/**"])[0].metadata_list]
        for start in range(0, len(objects), 500):
            _fs().delete(objects[start:start + 500])
    else:
        shutil.rmtree(_local(folder), ignore_errors=True)


def make_dirs(folder: str | os.PathLike) -> None:
    """A local directory; nothing to do on object storage (prefixes exist through their objects)."""
    if not is_remote(folder):
        os.makedirs(_local(folder), exist_ok=True)


def size(path: str | os.PathLike) -> int:
    if is_remote(path):
        found = _fs().match([str(path)])[0].metadata_list
        if not found:
            raise FileNotFoundError(f"{path}: no such object")
        return int(found[0].size_in_bytes)
    return os.path.getsize(_local(path))


def sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open_read(path) as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def parquet_file(path: str | os.PathLike):
    """pyarrow ParquetFile for a local path or an object (read whole: shards are tens of MB)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if is_remote(path):
        return pq.ParquetFile(pa.BufferReader(read_bytes(path)))
    return pq.ParquetFile(_local(path))


def sync_dir(folder: str | os.PathLike) -> None:
    """fsync a local directory (makes a rename inside it durable); object stores need nothing."""
    if is_remote(folder):
        return
    fd = os.open(_local(folder), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Busy(RuntimeError):
    """Another run holds the folder's lock."""


def _holder(info: dict[str, Any]) -> str:
    if not info:
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} (since {info.get('since')}, {info.get('what') or 'a run'})"


def _me(what: str) -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "what": what}


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike, *, what: str = "", wait_seconds: float = 0.0, poll_seconds: float = 1.0,
              busy: type[Exception] = Busy, message: str = "{folder}: locked by {holder}{waited}; nothing was written.",
              announce: str = "") -> Iterator[None]:
    """Hold `folder`'s lock while the block runs; wait up to `wait_seconds` for another holder, then
    raise `busy` with `message` (formatted with folder, holder and waited)."""
    deadline = time.monotonic() + wait_seconds
    announced = False

    def waiting(holder: str) -> None:
        nonlocal announced
        if time.monotonic() >= deadline:
            waited = f" after waiting {wait_seconds:.0f}s" if wait_seconds else ""
            raise busy(message.format(folder=folder, holder=holder, waited=waited)) from None
        if announce and not announced:
            print(f"{announce}{folder}: locked by {holder}; waiting up to {wait_seconds:.0f}s", flush=True)
            announced = True
        time.sleep(min(poll_seconds, max(0.0, deadline - time.monotonic())))

    if is_remote(folder):
        lease_dir = join(folder, ".lock")
        mine = join(lease_dir, f"{time.time_ns():020d}-{uuid.uuid4().hex}.json")
        while True:
            write_json(mine, _me(what))
            others = [p for p in _fs().match([lease_dir + "/*.json"])[0].metadata_list if p.path != mine]
            if not others:
                break
            remove(mine)
            try:
                info = json.loads(read_text(others[0].path))
            except Exception:  # noqa: BLE001 - only for the message
                info = {}
            waiting(_holder(info) + f"; if that run is dead, delete {others[0].path}")
        try:
            yield
        finally:
            remove(mine)
        return

    import fcntl

    make_dirs(folder)
    lock = os.path.join(_local(folder), ".lock")
    with open(lock, "a+") as f:  # "a+": never truncate what the holder wrote
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                try:
                    info = json.loads(Path(lock).read_text() or "{}")
                except (OSError, ValueError):
                    info = {}
                waiting(_holder(info))
        f.seek(0)
        f.truncate()
        f.write(json.dumps(_me(what)))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)
