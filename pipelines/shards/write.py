"""Pure writing of shard files: a shard group's table -> Arrow IPC streams of at most a target size.

The rows of one (split, shard) group are cut into consecutive parts of about equal size, each
serialised as its own stream file no larger than `target_bytes` (a single row larger than the
target is a part of its own). Cuts are chosen from a per-row size estimate, then checked
against the real serialised size (one more part if any is over), so the cut depends only on
the rows: same rows, same files, same bytes. MosaicML streaming also cuts shards at a size
limit (`size_limit`, 64 MB by default, filled greedily); its writer does not produce Arrow,
so this is written here.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROWS_PER_BATCH = 1024
"""Rows per Arrow record batch: at seq_len 128 and 10 variants a batch is ~1.7 MB."""


def stream_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=ROWS_PER_BATCH)
    return sink.getvalue().to_pybytes()


def stream_size(table: pa.Table) -> int:
    """Bytes `stream_bytes(table)` would take, counted without keeping them (pa.MockOutputStream)."""
    sink = pa.MockOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=ROWS_PER_BATCH)
    return sink.size()


def _list_bytes(col: pa.ChunkedArray | pa.Array, item: int) -> np.ndarray:
    """Per row: a 4-byte offset plus `item` bytes per element of a list<primitive> column."""
    return 4 + item * pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)


def _nested_bytes(col: pa.ChunkedArray | pa.Array, item: int, rows: int) -> np.ndarray:
    """Per row of a list<list<primitive>> column: offsets for the outer and every inner list, plus the values."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    inner = pc.list_flatten(col)
    parent = pc.list_parent_indices(col).to_numpy(zero_copy_only=False)
    per_inner = 4 + item * pc.list_value_length(inner).to_numpy(zero_copy_only=False).astype(np.int64)
    return 4 + np.bincount(parent, weights=per_inner, minlength=rows).astype(np.int64)


def row_bytes(table: pa.Table) -> np.ndarray:
    """Estimated serialised bytes of every row (buffers only; framing is `_overhead`)."""
    n = table.num_rows
    est = _list_bytes(table["input_ids"], 4) + 4 + _list_bytes(table["doc_starts"], 4)
    est = est + _nested_bytes(table["mask_positions"], 2, n) + _nested_bytes(table["mask_tokens"], 4, n)
    return est


BATCH_OVERHEAD = 600 + 20 * 8
"""Per record batch: its metadata message (~600 bytes here) and the 8-byte padding of ~20 buffers."""


def split_parts(table: pa.Table, target_bytes: int) -> list[bytes]:
    """Consecutive row ranges of `table` of about equal size, each as stream bytes of at most `target_bytes`.

    The group is cut into the fewest parts the estimate allows, at the row boundaries nearest to
    equal shares (a 4.5 MiB group at a 4 MiB target: two 2.25 MiB files, not 4 and 0.5), and
    one more part is tried while any part is over the target. A single row larger than the target
    is a part of its own. An empty table gives one empty stream, so a group with no rows still has
    a readable file.
    """
    n = table.num_rows
    if n == 0:
        return [stream_bytes(table)]
    cum = np.concatenate([[0], np.cumsum(row_bytes(table))])
    head = stream_size(table.schema.empty_table())  # the schema message and end-of-stream marker
    # Each part repeats the schema message; each record batch adds its framing (a row takes at
    # least 64 bytes, so a part holds at most target / 64 rows).
    per_part = max(1, target_bytes - head - BATCH_OVERHEAD * -(-min(n, target_bytes // 64) // ROWS_PER_BATCH))
    parts_wanted = min(n, max(1, -(-int(cum[-1]) // per_part)))
    while True:
        if parts_wanted >= n:
            cuts = np.arange(n + 1)
        else:
            cuts = np.unique(np.concatenate([[0], np.searchsorted(cum, cum[-1] * np.arange(1, parts_wanted) / parts_wanted), [n]]))
        parts = [stream_bytes(table.slice(a, b - a)) for a, b in zip(cuts[:-1], cuts[1:])]
        if all(len(p) <= target_bytes or b - a == 1 for p, a, b in zip(parts, cuts[:-1], cuts[1:])) or parts_wanted >= n:
            return parts
        parts_wanted += 1
