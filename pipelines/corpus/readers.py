"""Pure readers: one input file -> RawDocument and Quarantined records, streamed.

WARC/WET go through warcio (a kept library; fastwarc is faster but warcio's error messages
name the failure and it reads both gzip-per-record and plain files). A record that cannot be
read becomes a Quarantined with its byte offset; after a broken gzip member the rest of the
file cannot be located reliably, so reading that file stops there, and the quarantine record
says so.

Every record is read through a cap (MAX_RECORD_BYTES, the stage's --max-record-bytes): at most
cap+1 bytes of a WARC record's decoded payload, of a JSON line, of a Parquet text cell are ever
held; a record over the cap is quarantined as `payload_too_large` with its size, and the rest of it
is read in SKIP_CHUNK pieces and counted, never held. Arrow decodes a Parquet page whole, and a
page holds at least one whole cell, so the cap cannot stop it mid-cell: a row group whose text
column is over MAX_ROW_GROUP_BYTES uncompressed (the footer says so before any of it is read) is
quarantined whole, as one record naming the row group and its rows.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message

try:
    import zstandard
except ImportError:  # an install without it (the lent GPU machines' image): only .zst input needs it
    zstandard = None

from schemas import storage
from schemas.records import Quarantined, RawDocument

ZSTD_ERRORS = (zstandard.ZstdError,) if zstandard else ()

WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".wat", ".wat.gz", ".arc.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".jsonl.zst")

# Non-document WARC record types: they describe a crawl, they are not pages.
NON_DOCUMENT_TYPES = ("warcinfo", "request", "metadata", "revisit")

MAX_RECORD_BYTES = 4 << 20
"""Default cap on one record's payload, 4 MiB. Common Crawl keeps the first 1 MiB of a payload (the record then
says `WARC-Truncated: length`), so every Common Crawl record passes; a crawl of one's own holds real pages
over 1 MiB (4 of the bundled sample's news pages are 1.1 to 2.9 MB of HTML, inline scripts and styles), which a
1 MiB cap would quarantine. Only a payload strictly over the cap is quarantined, never read whole. The same number
bounds a JSON line (with its JSON escaping) and a Parquet text cell; past Gopher's 100,000-word limit (~600 kB
of English) a text would be dropped anyway."""

MAX_ROW_GROUP_BYTES = 128 << 20
"""Default bound on a Parquet row group's text column, uncompressed. Arrow decodes a page whole
and a page holds at least one whole cell, so a row group costs about 4 times its size while read
(the page, and the Arrow buffer it is decoded into, grown by doubling): measured, a row group of
one 130 MB cell peaks at 0.6 GB RSS, one of 250 MB at 1.0 GB. 128 MiB passes the row groups of
Hugging Face's Parquet conversions (100 MB at most) and datatrove's (1,000 documents). pyarrow
and pandas write a whole table as one row group by default: such a file over the bound is
quarantined until rewritten with smaller row groups (`pq.write_table(t, f, row_group_size=10_000)`)
or the bound is raised."""

SKIP_CHUNK = 1 << 20  # the rest of an oversized record is read and counted 1 MiB at a time
COUNT_UP_TO = 1 << 32
"""Counting the rest of an oversized WARC payload stops after 4 GiB (a few seconds of inflating):
a payload with an HTTP Content-Encoding can be a decompression bomb (deflate inside the record's
gzip: up to 1032 x 1032 times its size). warcio then skips the record's stored bytes itself."""


@dataclass(frozen=True)
class Oversized:
    """A record over the cap, not read: the bytes counted, and whether that is its whole size."""

    size: int
    complete: bool = True

    def detail(self, what: str, cap: int) -> str:
        size = f"{self.size:,} bytes" if self.complete else f"at least {self.size:,} bytes (counting stopped)"
        return f"{what} is {size}, over max_record_bytes={cap:,}; not read"


def read_capped(read: Callable[[int], bytes], cap: int) -> bytes | Oversized:
    """The stream's bytes when there are at most `cap`; else Oversized, the rest read in SKIP_CHUNK
    pieces and counted up to COUNT_UP_TO. Holds at most cap+1 bytes (plus one chunk)."""
    parts, n = [], 0
    while n <= cap and (piece := read(cap + 1 - n)):
        parts.append(piece)
        n += len(piece)
    if n <= cap:
        return b"".join(parts)
    del parts
    while n < COUNT_UP_TO:
        piece = read(SKIP_CHUNK)
        if not piece:
            return Oversized(n)
        n += len(piece)
    return Oversized(n, complete=False)


def read_line_capped(f: io.BufferedIOBase, cap: int) -> bytes | Oversized:
    """The next line (b"" at the end) when it holds at most `cap` bytes before its newline; else
    Oversized, the rest of the line read in SKIP_CHUNK pieces up to its newline and counted (it
    must be read to find the next line, so the count is always whole)."""
    line = f.readline(cap + 1)
    if len(line) <= cap or line.endswith(b"\n"):
        return line
    n = len(line)
    while piece := f.readline(SKIP_CHUNK):
        if piece.endswith(b"\n"):
            return Oversized(n + len(piece) - 1)
        n += len(piece)
    return Oversized(n)


def kind_of(path: str) -> str:
    name = os.path.basename(path).lower()
    if name.endswith(WARC_SUFFIXES):
        return "warc"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    raise ValueError(f"{path}: unknown input kind (expected one of {WARC_SUFFIXES + JSONL_SUFFIXES + ('.parquet',)})")


def read_file(path: str, skipped: dict[str, int] | None = None, max_record_bytes: int = MAX_RECORD_BYTES,
              max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> Iterator[RawDocument | Quarantined]:
    """Every document or quarantined record in `path`; `skipped` counts non-document records by type.
    A record over `max_record_bytes`, a Parquet row group over `max_row_group_bytes`: payload_too_large."""
    try:
        size = storage.size(path)
    except OSError as e:
        yield Quarantined(path, 0, "unreadable_file", f"{type(e).__name__}: {e}")
        return
    if size == 0:
        yield Quarantined(path, 0, "empty_file", "zero-byte input file")
        return
    try:
        kind = kind_of(path)
    except ValueError as e:
        yield Quarantined(path, 0, "unsupported_file", str(e))
        return
    if kind == "warc":
        yield from read_warc(path, skipped if skipped is not None else {}, max_record_bytes)
    elif kind == "jsonl":
        yield from read_jsonl(path, max_record_bytes)
    else:
        yield from read_parquet(path, max_record_bytes, max_row_group_bytes)


def _content_type(http_headers) -> tuple[str, str | None]:
    raw = http_headers.get_header("Content-Type") if http_headers else None
    if not raw:
        return "application/octet-stream", None
    msg = Message()
    msg["content-type"] = raw
    return msg.get_content_type(), msg.get_param("charset")


def read_warc(path: str, skipped: dict[str, int], max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[RawDocument | Quarantined]:
    from warcio.archiveiterator import ArchiveIterator

    with storage.open_read(path) as f:
        it = ArchiveIterator(f)
        offset = 0  # start of the record being read (warcio's get_record_offset() reads the record to its end)
        try:
            for rec in it:
                rtype = rec.rec_type
                if rtype in NON_DOCUMENT_TYPES:
                    skipped[rtype] = skipped.get(rtype, 0) + 1
                    continue
                # The decoded payload (warcio undoes HTTP chunking and Content-Encoding), capped.
                body = read_capped(rec.content_stream().read, max_record_bytes)
                offset = it.get_record_offset()  # reads what is left of the record's stored bytes
                missing = getattr(rec.raw_stream, "limit", 0)  # bytes the header promised but the file lacks
                if missing:
                    yield Quarantined(path, offset, "truncated_record",
                                      f"{rtype} record ends {missing} bytes short of its Content-Length {rec.length}",
                                      rec.rec_headers.get_header("WARC-Record-ID") or "")
                    continue
                rid = rec.rec_headers.get_header("WARC-Record-ID") or f"{os.path.basename(path)}:{offset}"
                if isinstance(body, Oversized):
                    yield Quarantined(path, offset, "payload_too_large",
                                      body.detail(f"{rtype} payload (WARC Content-Length {rec.length:,})", max_record_bytes), rid)
                    continue
                url = rec.rec_headers.get_header("WARC-Target-URI") or ""
                if rtype == "response":
                    ctype, charset = _content_type(rec.http_headers)
                    yield RawDocument(rid, url, path, offset, html=body, charset=charset, content_type=ctype)
                elif rtype in ("conversion", "resource"):
                    ctype = (rec.rec_headers.get_header("Content-Type") or "text/plain").split(";")[0].strip()
                    if ctype != "text/plain":
                        yield RawDocument(rid, url, path, offset, html=body, content_type=ctype)
                        continue
                    try:
                        text = body.decode("utf-8")
                    except UnicodeDecodeError as e:
                        yield Quarantined(path, offset, "undecodable", f"WET text is not UTF-8: {e}", rid)
                        continue
                    yield RawDocument(rid, url, path, offset, content_type="text/plain", text=text)
                else:
                    skipped[rtype] = skipped.get(rtype, 0) + 1
            # warcio ends quietly when a gzip member is cut before its WARC headers are complete:
            # bytes left after the last complete record are a record we could not read.
            left = storage.size(path) - it.offset
            if left > 0 and f.seek(it.offset) >= 0 and _has_data(f, left):
                yield Quarantined(path, it.offset, "truncated_gzip",
                                  f"{left} bytes after the last complete record are not a readable WARC record")
        except Exception as e:  # noqa: BLE001 - any read failure is quarantined, never a crash
            # Truncated gzip members surface as EOFError, zlib.error or (cut inside the WARC
            # headers) an AttributeError from warcio; malformed headers as ArchiveLoadFailed.
            # Either way the rest of this file cannot be located.
            reason = "truncated_gzip" if _gzip_member_cut(path, it.offset) else "malformed_warc"
            yield Quarantined(path, it.offset, reason, f"{type(e).__name__}: {e}; rest of file not read")


def _has_data(f, n: int) -> bool:
    """Whether the next `n` bytes of `f` hold anything but blank lines and NUL padding (read in chunks)."""
    while n > 0 and (piece := f.read(min(n, SKIP_CHUNK))):
        if piece.strip(b"\r\n\x00"):
            return True
        n -= len(piece)
    return False


def _gzip_member_cut(path: str, offset: int) -> bool:
    """True if the gzip member starting at `offset` ends before its end-of-stream marker."""
    with storage.open_read(path) as f:
        f.seek(offset)
        head = f.read(2)
        if head != b"\x1f\x8b":
            return False
        f.seek(offset)
        d = zlib.decompressobj(wbits=31)
        while not d.eof and (chunk := f.read(1 << 16)):
            try:
                d.decompress(chunk)
            except zlib.error:
                return True
        return not d.eof


@contextlib.contextmanager
def _open_bytes(path: str) -> Iterator[io.BufferedIOBase]:
    """The file's bytes, decompressed by suffix, as a stream whose readline(size) stops at `size`
    (a text wrapper's readline would read a whole line, however long)."""
    with storage.open_read(path) as raw:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:  # inflates only what is asked for
                yield stream
        elif path.endswith(".zst"):
            if zstandard is None:
                raise RuntimeError(f"{path}: reading .zst needs the zstandard package (pip install zstandard)")
            # zstandard's reader has no readline; io.BufferedReader adds one
            with io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw), SKIP_CHUNK) as stream:
                yield stream
        else:
            yield raw


def read_jsonl(path: str, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[RawDocument | Quarantined]:
    """JSON lines with `text` and optionally `id` and `url`; ids are preserved as given. A line over
    `max_record_bytes` (UTF-8 bytes before its newline) is quarantined as payload_too_large."""
    with _open_bytes(path) as f:
        lineno = 0
        while True:
            lineno += 1
            try:
                line = read_line_capped(f, max_record_bytes)
                if isinstance(line, Oversized):
                    yield Quarantined(path, lineno, "payload_too_large", line.detail("line", max_record_bytes))
                    continue
                line = line.decode("utf-8")
            except (UnicodeDecodeError, EOFError, OSError, *ZSTD_ERRORS) as e:
                yield Quarantined(path, lineno, "unreadable_line", f"{type(e).__name__}: {e}; rest of file not read")
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield Quarantined(path, lineno, "invalid_json", str(e))
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                yield Quarantined(path, lineno, "missing_text", "line has no string field 'text'")
                continue
            rid = str(obj.get("id") or f"{os.path.basename(path)}:{lineno}")
            yield RawDocument(rid, str(obj.get("url") or ""), path, lineno, content_type="text/plain", text=obj["text"])


def read_parquet(path: str, max_record_bytes: int = MAX_RECORD_BYTES,
                 max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> Iterator[RawDocument | Quarantined]:
    """Rows with `text` and optionally `id` and `url`, a row group at a time. A row group whose text
    column is over `max_row_group_bytes` uncompressed (from the footer) is quarantined unread, as
    one record; a cell over `max_record_bytes` (UTF-8 bytes) is quarantined without becoming a str."""
    import pyarrow.parquet as pq

    with storage.open_read(path) as fh:
        try:
            # buffer_size: column chunks are read in 1 MiB pieces; 0 (the default) reads one whole
            pf = pq.ParquetFile(fh, buffer_size=1 << 20)
        except Exception as e:  # noqa: BLE001 - any unreadable footer is a quarantine, not a crash
            yield Quarantined(path, 0, "unreadable_parquet", f"{type(e).__name__}: {e}")
            return
        names = pf.schema_arrow.names
        if "text" not in names:
            yield Quarantined(path, 0, "wrong_schema", f"no 'text' column (columns: {names})")
            return
        row = 0
        for g in range(pf.num_row_groups):
            group = pf.metadata.row_group(g)
            size = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns)
                       if group.column(c).path_in_schema.split(".")[0] == "text")
            if size > max_row_group_bytes:
                yield Quarantined(path, row, "payload_too_large",
                                  f"row group {g} (rows {row:,} to {row + group.num_rows - 1:,}, {group.num_rows:,} rows): its "
                                  f"text column is {size:,} bytes uncompressed, over max_row_group_bytes={max_row_group_bytes:,}; not read")
                row += group.num_rows
                continue
            for batch in pf.iter_batches(batch_size=1024, row_groups=[g], columns=[c for c in ("id", "url", "text") if c in names]):
                yield from _batch_records(path, batch, row, max_record_bytes)
                row += batch.num_rows


def _batch_records(path: str, batch, first_row: int, cap: int) -> Iterator[RawDocument | Quarantined]:
    """A Parquet record batch's rows; text cells over `cap` bytes are nulled in Arrow before the rows
    become Python objects, and quarantined."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = batch.column("text")
    sizes: list[int | None] = [None] * batch.num_rows
    if pa.types.is_string(text.type) or pa.types.is_large_string(text.type):
        lengths = pc.binary_length(text)
        sizes = lengths.to_pylist()
        text = pc.if_else(pc.greater(lengths, cap), pa.scalar(None, text.type), text)
        batch = batch.set_column(batch.schema.get_field_index("text"), "text", text)
    for row, (rec, size) in enumerate(zip(batch.to_pylist(), sizes), start=first_row):
        rid = str(rec.get("id") or f"{os.path.basename(path)}:{row}")
        if size is not None and size > cap:
            yield Quarantined(path, row, "payload_too_large", Oversized(size).detail("text cell", cap), rid)
        elif not isinstance(rec.get("text"), str):
            yield Quarantined(path, row, "missing_text", "null text")
        else:
            yield RawDocument(rid, rec.get("url") or "", path, row, content_type="text/plain", text=rec["text"])
