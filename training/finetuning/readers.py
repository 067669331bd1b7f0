"""Readers for a user's labelled data: JSONL, CSV/TSV, Parquet, a `datasets` save_to_disk directory,
and CoNLL-style token files. Pure Python over files; no model, no torch.

Each reader yields `Record`s (a row's values with the file and line it came from) and `Bad`s
(a row that cannot be read, with its reason), so the caller can leave single bad rows out and
count them. A problem with the whole file (it does not exist, it has no header, it is a format
we do not read) raises `DataError`, which names the file.

    for r in read_file("reviews.csv"):
        if isinstance(r, Bad): ...          # r.where, r.reason, r.detail
        else: r.values["text"]              # r.where == "reviews.csv:17"

Formats, by name: `*.jsonl` / `*.json` (one object per line; `.gz` too), `*.csv`, `*.tsv`
(header row first; TSV without quoting, as GLUE's files), `*.parquet`, a directory written by
`datasets.Dataset.save_to_disk` or `DatasetDict.save_to_disk` (a DatasetDict's split names
come along as each record's `split`), and for token tasks `*.conll`, `*.conllu`, `*.iob`,
`*.bio`, `*.tsv`/`*.txt` in CoNLL layout (`token<TAB>tag` per line, a blank line between
sentences; the token is the first field and the tag the last, `-DOCSTART-` lines skipped;
CoNLL-U takes FORM and UPOS and skips comments, multi-word ranges and empty nodes).
We considered `datasets.load_dataset("json"/"csv")`: it stops at the first bad row with an
Arrow error that names neither the line nor the column, which is what a user needs here.

A labelled file is untrusted input (the Prefect form can name any file under the data root), so every
reader holds a bounded amount of it, with the corpus readers' caps (pipelines/corpus/readers.py):
- a row over MAX_RECORD_BYTES (4 MiB: a JSON line, a CoNLL sentence, a Parquet or datasets row's
  cells) is left out as `row_too_large` with its size, never held whole (a gzip bomb's line is
  inflated and counted a piece at a time); a CSV row over it stops the file with a one-line error
  (a quoted field may span lines, so the rows after it cannot be found reliably);
- a Parquet row group over MAX_ROW_GROUP_BYTES uncompressed (Arrow decodes a page whole) stops the
  file with a one-line error, read from the footer before any of the group is;
- JSON nested deeper than MAX_DEPTH levels is left out as `too_deep` (Python's parser raises
  RecursionError at about 1,000 levels; a row of text, a label and token lists is 3 deep);
- CSV is streamed a line at a time, not read whole.
"""
from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.corpus.readers import MAX_RECORD_BYTES, MAX_ROW_GROUP_BYTES, Oversized, read_line_capped

MAX_DEPTH = 32
"""The deepest JSON nesting a labelled row may hold (the row's object is level 1)."""


class DataError(ValueError):
    """A labelled-data problem that stops the run; the message names the file (and line, column)."""


class TooFewRows(DataError):
    """A labelled file that is right but too small for a task: a split would be empty."""

    exit_code = 3
    """`lmforge labeled file`'s exit status for it, which a flow reads as "skip the task", not "fail"."""


@dataclass(frozen=True)
class Record:
    where: str
    """"file:line" (text formats) or "file:row N" (Parquet, datasets)."""
    values: dict[str, Any]
    split: str | None = None
    """The split a DatasetDict stored the row under; None otherwise."""


@dataclass(frozen=True)
class Bad:
    where: str
    reason: str
    """A short counter name: not_utf8, bad_json, not_an_object, malformed_row, ..."""
    detail: str = ""


TABLE_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".csv", ".tsv", ".parquet")
CONLL_SUFFIXES = (".conll", ".conllu", ".iob", ".bio", ".iob2", ".bioes", ".tsv", ".txt")


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".".join([""] + name.split(".")[-2:]) if name.endswith(".gz") else path.suffix.lower()


def is_datasets_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()
                              or (path / "state.json").exists())


def read_file(path: str | Path, conll: bool = False, max_record_bytes: int = MAX_RECORD_BYTES,
              max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> Iterator[Record | Bad]:
    """Records of one file (or datasets directory); `conll` reads sentence blocks for token tasks. A row
    over `max_record_bytes` is a Bad (a CSV one a DataError); a Parquet row group over `max_row_group_bytes`
    a DataError."""
    path, cap = Path(path), max_record_bytes
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if is_datasets_dir(path):
        yield from read_datasets_dir(path, cap)
        return
    if path.is_dir():
        raise DataError(f"{path}: a directory, but not one written by datasets' save_to_disk "
                        "(no dataset_info.json, state.json or dataset_dict.json); pass the data files instead")
    suffix = _suffix(path)
    if conll and suffix in CONLL_SUFFIXES:
        yield from read_conll(path, cap)
    elif suffix in (".jsonl", ".json", ".jsonl.gz", ".json.gz"):
        yield from read_jsonl(path, cap)
    elif suffix in (".csv", ".tsv"):
        yield from read_csv(path, "\t" if suffix == ".tsv" else ",", cap)
    elif suffix == ".parquet":
        yield from read_parquet(path, cap, max_row_group_bytes)
    else:
        kinds = "JSONL, CSV, TSV, Parquet, a datasets save_to_disk directory"
        raise DataError(f"{path}: unknown format {suffix or '(no suffix)'!r}; lmforge reads {kinds}, "
                        "and CoNLL files (.conll, .conllu, .iob, .bio, .txt) for --task tokens")


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


def too_large(size: Oversized, what: str, cap: int) -> str:
    counted = f"{size.size:,} bytes" if size.complete else f"at least {size.size:,} bytes (counting stopped)"
    return f"{what} is {counted}, over the {cap:,}-byte cap on one labelled row; not read"


def _lines(f, path: Path, cap: int) -> Iterator[tuple[int, bytes | Oversized]]:
    """(line number, the line's bytes or Oversized) per line, each read through the cap; a file that
    cannot be read on (a cut gzip stream) is a DataError naming the line."""
    n = 0
    while True:
        n += 1
        try:
            raw = read_line_capped(f, cap)
        except (EOFError, OSError, zlib.error) as e:
            raise DataError(f"{path}:{n}: cannot read on ({type(e).__name__}: {e})") from e
        if not raw:
            return
        yield n, raw


def depth_over(obj: Any, limit: int) -> bool:
    """Whether `obj` nests lists and objects more than `limit` levels deep, `obj` itself level 1 (iterative: no
    recursion)."""
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if d > limit:
            return True
        children = o.values() if isinstance(o, dict) else o if isinstance(o, list) else ()
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return False


def read_jsonl(path: Path, cap: int = MAX_RECORD_BYTES) -> Iterator[Record | Bad]:
    with _open_binary(path) as f:
        for n, raw in _lines(f, path, cap):
            where = f"{path}:{n}"
            if isinstance(raw, Oversized):
                yield Bad(where, "row_too_large", too_large(raw, "the line", cap))
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield Bad(where, "not_utf8", f"byte {e.start} of the line is {raw[e.start:e.start + 1]!r}")
                continue
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield Bad(where, "bad_json", f"{e.msg} at column {e.colno}")
                continue
            except RecursionError:
                yield Bad(where, "too_deep", f"JSON nested deeper than Python's parser reads (the cap is {MAX_DEPTH} levels)")
                continue
            if not isinstance(obj, dict):
                yield Bad(where, "not_an_object", f"a JSON {type(obj).__name__}, not an object")
                continue
            if depth_over(obj, MAX_DEPTH):
                yield Bad(where, "too_deep", f"JSON nested deeper than {MAX_DEPTH} levels")
                continue
            yield Record(where, obj)


class _CsvLines:
    """A CSV file's lines for csv.reader, decoded (bytes that are not UTF-8 as lone surrogates), read a
    line at a time through the cap; the lines of one row (a quoted field may span lines) together at
    most `cap` bytes, else a DataError. `row_done()` starts the next row's count."""

    def __init__(self, f, path: Path, cap: int):
        self.f, self.path, self.cap = f, path, cap
        self.n = self.row_bytes = 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        self.n += 1
        try:
            raw = read_line_capped(self.f, self.cap - self.row_bytes)
        except OSError as e:
            raise DataError(f"{self.path}:{self.n}: cannot read on ({type(e).__name__}: {e})") from e
        if isinstance(raw, Oversized):
            raise DataError(f"{self.path}:{self.n}: {too_large(Oversized(raw.size + self.row_bytes), 'the row', self.cap)}; "
                            "the rows after it cannot be found reliably (a quoted field may span lines), so the file "
                            "is not read on: shorten or remove that row")
        if not raw:
            raise StopIteration
        if self.n == 1 and raw.startswith(b"\xef\xbb\xbf"):  # Excel's byte-order mark
            raw = raw[3:]
        self.row_bytes += len(raw)
        return raw.decode("utf-8", errors="surrogateescape")

    def row_done(self) -> None:
        self.row_bytes = 0


def read_csv(path: Path, delimiter: str, cap: int = MAX_RECORD_BYTES) -> Iterator[Record | Bad]:
    """A header row, then rows; a row with another number of fields than the header is left out.

    Bytes that are not UTF-8 decode to lone surrogates (surrogateescape), so a bad line costs its
    row only; the row is then left out as not_utf8, naming the field. Streamed: a row (its lines
    together) over `cap` bytes stops the file with a DataError, having held at most `cap` of it.
    """
    if csv.field_size_limit() < cap:  # the csv module's default (128 KiB) would stop a row the cap lets through
        csv.field_size_limit(cap)
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    with open(path, "rb") as f:
        lines = _CsvLines(f, path, cap)
        reader = csv.reader(lines, delimiter=delimiter, quoting=quoting, strict=False)
        yield from _csv_rows(path, delimiter, reader, lines)


def _csv_rows(path: Path, delimiter: str, reader, lines: _CsvLines) -> Iterator[Record | Bad]:
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: empty file (a header row naming the columns is expected)") from None
    except csv.Error as e:
        raise DataError(f"{path}:1: cannot read the header row ({e})") from e
    lines.row_done()
    header = [h.strip() for h in header]
    if any(_has_surrogates(h) for h in header):
        raise DataError(f"{path}:1: the header row is not UTF-8")
    if len(set(header)) != len(header):
        raise DataError(f"{path}:1: duplicate column names in the header {header}")
    line = reader.line_num
    while True:
        start = line + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # e.g. a NUL byte; the reader cannot go on reliably
            raise DataError(f"{path}:{reader.line_num}: malformed {'TSV' if delimiter == chr(9) else 'CSV'} ({e})") from e
        line = reader.line_num
        lines.row_done()
        where = f"{path}:{start}"
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            yield Bad(where, "malformed_row", f"{len(row)} fields, the header has {len(header)}")
            continue
        bad = next((h for h, c in zip(header, row) if _has_surrogates(c)), None)
        if bad is not None:
            yield Bad(where, "not_utf8", f"column {bad!r} holds bytes that are not UTF-8")
            continue
        yield Record(where, dict(zip(header, row)))


def _has_surrogates(s: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in s)


def read_parquet(path: Path, cap: int = MAX_RECORD_BYTES, max_row_group_bytes: int = MAX_ROW_GROUP_BYTES
                 ) -> Iterator[Record | Bad]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path, buffer_size=1 << 20)  # column chunks read in 1 MiB pieces, not whole
    except Exception as e:  # pyarrow raises ArrowInvalid and OSError for damaged files
        raise DataError(f"{path}: not a readable Parquet file ({e})") from e
    n = 0
    for g in range(pf.num_row_groups):
        group = pf.metadata.row_group(g)
        size = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
        if size > max_row_group_bytes:
            raise DataError(f"{path}: row group {g} (rows {n + 1:,} to {n + group.num_rows:,}) is {size:,} bytes "
                            f"uncompressed, over the {max_row_group_bytes:,} lmforge decodes at once; rewrite the file "
                            "with smaller row groups (pq.write_table(table, path, row_group_size=10_000))")
        try:
            for batch in pf.iter_batches(batch_size=1024, row_groups=[g]):
                yield from _arrow_rows(batch, n, cap, lambda i: f"{path}:row {i}")
                n += batch.num_rows
        except DataError:
            raise
        except Exception as e:  # noqa: BLE001 - a damaged page: pyarrow's own errors, named with the row group
            raise DataError(f"{path}: row group {g} cannot be read ({type(e).__name__}: {e})") from e


def row_bytes(batch) -> list[int]:
    """Each row's bytes in its string, binary and list-of-string columns (from Arrow's offsets: no cell becomes
    a Python object); other columns count 8 bytes a value."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    total = np.zeros(batch.num_rows, dtype=np.int64)
    for col in batch.columns:
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            total += pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            values = pc.list_flatten(col)
            parents = pc.list_parent_indices(col).to_numpy(zero_copy_only=False)
            vt = values.type
            if pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_binary(vt):
                sizes = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
            else:
                sizes = np.full(len(values), 8, dtype=np.int64)  # numbers, or lists deeper still (counted, not weighed)
            np.add.at(total, parents, sizes)
        else:
            total += 8
    return total.tolist()


def _arrow_rows(batch, first: int, cap: int, where, split: str | None = None) -> Iterator[Record | Bad]:
    """A record batch's rows, numbered from first + 1; a row over `cap` bytes is a Bad and never becomes Python
    objects."""
    import pyarrow as pa

    sizes = row_bytes(batch)
    big = [i for i, s in enumerate(sizes) if s > cap]
    keep = batch if not big else batch.filter(pa.array([s <= cap for s in sizes]))
    rows = iter(keep.to_pylist())
    for i, size in enumerate(sizes):
        if size > cap:
            yield Bad(where(first + i + 1), "row_too_large", too_large(Oversized(size), "the row", cap))
        else:
            yield Record(where(first + i + 1), next(rows), split)


def read_datasets_dir(path: Path, cap: int = MAX_RECORD_BYTES) -> Iterator[Record | Bad]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:  # datasets raises FileNotFoundError and its own errors
        raise DataError(f"{path}: datasets.load_from_disk failed ({e})") from e
    parts = ds.items() if isinstance(ds, datasets.DatasetDict) else [(None, ds)]
    for split, part in parts:
        n = 0
        name = f"{path}{'/' + split if split else ''}"
        for table in part.with_format("arrow").iter(batch_size=1024):  # memory-mapped; rows become Python per batch
            for batch in table.to_batches():
                yield from _arrow_rows(batch, n, cap, lambda i, name=name: f"{name}:row {i}", split)
                n += batch.num_rows


def read_conll(path: Path, cap: int = MAX_RECORD_BYTES) -> Iterator[Record | Bad]:
    """One Record per sentence: values {"tokens": [...], "tags": [...]}, where = its first line. A sentence
    over `cap` bytes (its lines together) is a Bad; its tokens are not kept past the cap."""
    conllu = path.suffix.lower() == ".conllu"
    tokens: list[str] = []
    tags: list[str] = []
    start, bad, held = 0, None, 0

    def flush():
        if bad is not None:
            return bad
        return Record(f"{path}:{start}", {"tokens": list(tokens), "tags": list(tags)}) if tokens else None

    with _open_binary(path) as f:
        for n, raw in _lines(f, path, cap):
            size = raw.size if isinstance(raw, Oversized) else len(raw)
            if (bad is None or bad.reason != "row_too_large") and held + size > cap:
                start = start or n
                bad = Bad(f"{path}:{start}", "row_too_large",
                          too_large(Oversized(held + size, complete=False), "the sentence", cap))
                tokens, tags = [], []
            held += size
            if bad is not None and bad.reason == "row_too_large":
                if isinstance(raw, Oversized) or raw.strip():
                    continue
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                line = None
                if bad is None:
                    bad = Bad(f"{path}:{n}", "not_utf8", f"byte {e.start} of the line is {raw[e.start:e.start + 1]!r}")
                start = start or n
                continue
            if not line.strip():
                out = flush()
                if out is not None:
                    yield out
                tokens, tags, start, bad, held = [], [], 0, None, 0
                continue
            if conllu and line.startswith("#"):
                continue
            fields = line.split("\t") if "\t" in line else line.split()
            if fields[0] == "-DOCSTART-":
                continue
            start = start or n
            if conllu:
                if len(fields) != 10:
                    bad = bad or Bad(f"{path}:{n}", "malformed_row", f"{len(fields)} fields, CoNLL-U has 10")
                    continue
                if "-" in fields[0] or "." in fields[0]:  # multi-word token range / empty node
                    continue
                tokens.append(fields[1])
                tags.append(fields[3])
                continue
            if len(fields) < 2:
                bad = bad or Bad(f"{path}:{n}", "malformed_row", "expected token<TAB>tag")
                continue
            tokens.append(fields[0])
            tags.append(fields[-1])
    out = flush()
    if out is not None:
        yield out
