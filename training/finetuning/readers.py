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
"""
from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


def read_file(path: str | Path, conll: bool = False) -> Iterator[Record | Bad]:
    """Records of one file (or datasets directory); `conll` reads sentence blocks for token tasks."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if is_datasets_dir(path):
        yield from read_datasets_dir(path)
        return
    if path.is_dir():
        raise DataError(f"{path}: a directory, but not one written by datasets' save_to_disk "
                        "(no dataset_info.json, state.json or dataset_dict.json); pass the data files instead")
    suffix = _suffix(path)
    if conll and suffix in CONLL_SUFFIXES:
        yield from read_conll(path)
    elif suffix in (".jsonl", ".json", ".jsonl.gz", ".json.gz"):
        yield from read_jsonl(path)
    elif suffix in (".csv", ".tsv"):
        yield from read_csv(path, "\t" if suffix == ".tsv" else ",")
    elif suffix == ".parquet":
        yield from read_parquet(path)
    else:
        kinds = "JSONL, CSV, TSV, Parquet, a datasets save_to_disk directory"
        raise DataError(f"{path}: unknown format {suffix or '(no suffix)'!r}; lmforge reads {kinds}, "
                        "and CoNLL files (.conll, .conllu, .iob, .bio, .txt) for --task tokens")


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


def read_jsonl(path: Path) -> Iterator[Record | Bad]:
    with _open_binary(path) as f:
        for n, raw in enumerate(f, 1):
            where = f"{path}:{n}"
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
            if not isinstance(obj, dict):
                yield Bad(where, "not_an_object", f"a JSON {type(obj).__name__}, not an object")
                continue
            yield Record(where, obj)


def read_csv(path: Path, delimiter: str) -> Iterator[Record | Bad]:
    """A header row, then rows; a row with another number of fields than the header is left out.

    Bytes that are not UTF-8 decode to lone surrogates (surrogateescape), so a bad line costs its
    row only; the row is then left out as not_utf8, naming the field.
    """
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):  # Excel's byte-order mark
        data = data[3:]
    text = data.decode("utf-8", errors="surrogateescape")
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting, strict=False)
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: empty file (a header row naming the columns is expected)") from None
    except csv.Error as e:
        raise DataError(f"{path}:1: cannot read the header row ({e})") from e
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


def read_parquet(path: Path) -> Iterator[Record | Bad]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid and OSError for damaged files
        raise DataError(f"{path}: not a readable Parquet file ({e})") from e
    n = 0
    for batch in pf.iter_batches(batch_size=4096):
        for values in batch.to_pylist():
            n += 1
            yield Record(f"{path}:row {n}", values)


def read_datasets_dir(path: Path) -> Iterator[Record | Bad]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:  # datasets raises FileNotFoundError and its own errors
        raise DataError(f"{path}: datasets.load_from_disk failed ({e})") from e
    parts = ds.items() if isinstance(ds, datasets.DatasetDict) else [(None, ds)]
    for split, part in parts:
        for n, values in enumerate(part, 1):
            yield Record(f"{path}{'/' + split if split else ''}:row {n}", values, split)


def read_conll(path: Path) -> Iterator[Record | Bad]:
    """One Record per sentence: values {"tokens": [...], "tags": [...]}, where = its first line."""
    conllu = path.suffix.lower() == ".conllu"
    tokens: list[str] = []
    tags: list[str] = []
    start, bad = 0, None

    def flush():
        if bad is not None:
            return bad
        return Record(f"{path}:{start}", {"tokens": list(tokens), "tags": list(tags)}) if tokens else None

    with _open_binary(path) as f:
        for n, raw in enumerate(f, 1):
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
                tokens, tags, start, bad = [], [], 0, None
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
