"""Pure packing: token lists of documents -> fixed-length rows (HF `group_texts` style).

Each document is encoded as [CLS] tokens [SEP]; documents are concatenated in id order and cut
into rows of `seq_len`; the last row is padded. `doc_starts` records where each document's
[CLS] falls inside a row, so document boundaries survive packing.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class PackedRow:
    input_ids: list[int]
    length: int
    doc_starts: list[int]


def pack(docs: Iterable[list[int]], seq_len: int, cls_id: int, sep_id: int, pad_id: int) -> Iterator[PackedRow]:
    buf: list[int] = []
    starts: list[int] = []
    for ids in docs:
        starts.append(len(buf))
        buf.extend([cls_id, *ids, sep_id])
        while len(buf) >= seq_len:
            yield PackedRow(buf[:seq_len], seq_len, [s for s in starts if s < seq_len])
            buf = buf[seq_len:]
            starts = [s - seq_len for s in starts if s >= seq_len]
    if buf:
        n = len(buf)
        yield PackedRow(buf + [pad_id] * (seq_len - n), n, starts)
