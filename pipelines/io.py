"""Small file helpers shared by the Beam shells: input expansion and deterministic atomic writers."""
from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas import storage
from schemas.manifest import atomic_write_bytes


def expand_inputs(patterns: list[str]) -> list[str]:
    """Files named by paths, folders (recursively; on object storage: key prefixes) or globs; sorted;
    a pattern matching nothing is an error. Hidden files (names starting with ".") in folders are left out."""
    files: set[str] = set()
    for pat in patterns:
        if storage.is_remote(pat) and not any(c in pat for c in "*?["):
            found = [pat] if storage.is_file(pat) else storage.files_under(pat)
        elif not storage.is_remote(pat) and Path(pat).is_dir():
            found = [str(f) for f in Path(pat).rglob("*") if f.is_file() and not f.name.startswith(".")]
        elif not storage.is_remote(pat) and Path(pat).is_file():
            found = [str(Path(pat))]
        else:
            found = storage.glob(pat)
        if not found:
            raise FileNotFoundError(f"input {pat!r} matches no file")
        files.update(found)
    return sorted(files)


def shard_of(key: str, num_shards: int) -> int:
    """Stable across processes and runs (Python's hash() is salted per process)."""
    return zlib.crc32(key.encode()) % num_shards


def write_parquet_rows(path: str | Path, rows: list[dict[str, Any]], schema: pa.Schema, sort_key: str | None = "id") -> str:
    """Rows sorted by `sort_key` (None: as given), written to a temporary name and renamed:
    same rows -> same bytes."""
    if sort_key is not None:
        rows = sorted(rows, key=lambda r: r[sort_key])
    table = pa.Table.from_pylist(rows, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    return str(path)


def write_jsonl_rows(path: str | Path, rows: list[dict[str, Any]], sort_key: str = "id") -> str:
    rows = sorted(rows, key=lambda r: tuple(str(r.get(k, "")) for k in (sort_key, "source", "offset")))
    data = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_bytes(path, data.encode())
    return str(path)


def parquet_rows(path: str | Path) -> int:
    return storage.parquet_file(path).metadata.num_rows


def read_records(path: Path) -> Iterator[tuple[str, dict]]:
    """(where, record) of a JSONL, CSV or Parquet file of records (an evaluation set, a reference set); where is
    "line N" or "row N", 1-based. A line that is not a JSON object, or a file that cannot be read, is a ValueError
    naming the file and line."""
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            for n, rec in enumerate(pq.read_table(path).to_pylist(), 1):
                yield f"row {n}", rec
        elif name.endswith(".csv"):
            with path.open(encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f)
                yield from ((f"line {reader.line_num}", rec) for rec in reader)
        elif name.endswith((".jsonl", ".json")):
            with path.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            rec = json.loads(line)
                        except ValueError:
                            rec = None
                        if not isinstance(rec, dict):
                            raise ValueError(f"{path}:line {n}: not a JSON object")
                        yield f"line {n}", rec
        else:
            raise ValueError(f"{path}: not an evaluation set (expected .jsonl, .csv or .parquet)")
    except (OSError, UnicodeDecodeError, pa.ArrowException) as e:
        raise ValueError(f"{path}: cannot read the evaluation set ({e})") from None
