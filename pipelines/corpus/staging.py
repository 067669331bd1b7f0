"""Staged documents: what the corpus pipeline keeps out of its shuffles.

The cleaning step writes each input batch's kept documents (text, metadata and exact shingle
hashes) to one Parquet file under `<output>/_staging/`, one row group per output shard, and
sends on only slim records (id, where it was read, rank, band keys, the staged file's name).
The steps that need text or hashes read them back from there, a file at a time:

    near-dedup confirmation   the hashes of candidate nodes only (~10-20% of documents)
    data writer               shard s of each staged file its kept documents came from
    index writer              the hashes of the kept documents of index shard s, likewise

So no shuffle carries text, and shingle hashes cross the near-dedup joins only for candidate
nodes (the documents in a candidate pair). On the DirectRunner, which holds every shuffle's
bytes in memory until the pipeline ends, text and every document's hashes were most of the
stage's memory; on a distributed runner they were most of its shuffle bytes (docs/SCALE.md 1.3:
9.5 KB per document before, 5.3 KB after, measured). The driver deletes the folder after the run, and
before a run (a killed run's leftovers). A file's name and bytes depend only on its input
batch, so a retried bundle rewrites the same file.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas import storage
from schemas.records import CLEAN_DOC_SCHEMA

STAGING = "_staging"

STAGED_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.int32(), nullable=False),  # pipelines.io.shard_of(id, num_shards)
        *CLEAN_DOC_SCHEMA,  # the document as data/ stores it
        pa.field("offset", pa.int64()),
        pa.field("hashes", pa.list_(pa.uint64())),  # dedup.shingle_hashes; null without near dedup
    ]
)
_SHARDS_KEY = b"lmforge.staged_shards"


def staging_dir(out: str) -> str:
    return storage.join(out, STAGING)


def staged_name(source: str, batch: int) -> str:
    """A batch's file name: its input file (hashed: names must not nest folders) and batch number."""
    return f"{hashlib.sha1(source.encode()).hexdigest()[:16]}-{batch:06d}.parquet"


def write_staged(out: str, name: str, rows: list[dict[str, Any]]) -> None:
    """Rows (with "shard") written as one row group per shard, in shard order; one object put."""
    rows = sorted(rows, key=lambda r: (r["shard"], r["source"] or "", r["offset"] or 0))
    shards = sorted({r["shard"] for r in rows})
    sink = pa.BufferOutputStream()
    schema = STAGED_SCHEMA.with_metadata({_SHARDS_KEY: json.dumps(shards).encode()})
    with pq.ParquetWriter(sink, schema, compression="zstd", compression_level=1) as w:
        for s in shards:
            w.write_table(pa.Table.from_pylist([r for r in rows if r["shard"] == s], schema=schema))
    storage.write_bytes(storage.join(staging_dir(out), name), sink.getvalue().to_pybytes())


def read_staged(out: str, name: str, shards: Iterable[int] | None = None, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of a staged file, only those of `shards` if given (their row groups alone are read)."""
    pf = storage.parquet_file(storage.join(staging_dir(out), name))
    order = json.loads(pf.schema_arrow.metadata[_SHARDS_KEY])
    groups = range(len(order)) if shards is None else [order.index(s) for s in sorted(set(shards)) if s in order]
    for g in groups:
        yield from pf.read_row_group(g, columns=columns).to_pylist()


def staged_rows(out: str, refs: Iterable[dict[str, Any]], shard: int, columns: list[str]) -> Iterator[tuple[dict, dict]]:
    """(ref, staged row) for every ref (a record naming "staged", "source", "offset", "id"), reading the
    row group of `shard` of each staged file once. A ref whose row is not there is an error: the
    records were staged by this run, so the folder was changed under it."""
    by_file: dict[str, dict[tuple[str, int], dict]] = {}
    for ref in refs:
        by_file.setdefault(ref["staged"], {})[where(ref)] = ref
    cols = list(dict.fromkeys(["id", "source", "offset", *columns]))
    for name in sorted(by_file):
        wanted = by_file[name]
        for row in read_staged(out, name, [shard], columns=cols):
            ref = wanted.get(where(row))
            if ref is not None and ref["id"] == row["id"]:
                del wanted[where(row)]
                yield ref, row
        if wanted:
            first = next(iter(wanted.values()))
            raise RuntimeError(f"{len(wanted)} kept record(s) not found in their staged file {name} under "
                               f"{staging_dir(out)} (first: {first['id']} at {where(first)}); the staging folder was "
                               "changed during the run")


def where(row: dict[str, Any]) -> tuple[str, int]:
    """Where a record was read: (source, offset), unique per record (ids may repeat)."""
    return row["source"], row["offset"]
