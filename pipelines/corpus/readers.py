"""Pure readers: one input file -> RawDocument and Quarantined records, streamed.

WARC/WET go through warcio (a kept library; fastwarc is faster but warcio's error messages
name the failure and it reads both gzip-per-record and plain files). A record that cannot be
read becomes a Quarantined with its byte offset; after a broken gzip member the rest of the
file cannot be located reliably, so reading that file stops there, and the quarantine record
says so.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from email.message import Message

from schemas import storage
from schemas.records import Quarantined, RawDocument

WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".wat", ".wat.gz", ".arc.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".jsonl.zst")

# Non-document WARC record types: they describe a crawl, they are not pages.
NON_DOCUMENT_TYPES = ("warcinfo", "request", "metadata", "revisit")


def kind_of(path: str) -> str:
    name = os.path.basename(path).lower()
    if name.endswith(WARC_SUFFIXES):
        return "warc"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    raise ValueError(f"{path}: unknown input kind (expected one of {WARC_SUFFIXES + JSONL_SUFFIXES + ('.parquet',)})")


def read_file(path: str, skipped: dict[str, int] | None = None) -> Iterator[RawDocument | Quarantined]:
    """Every document or quarantined record in `path`; `skipped` counts non-document records by type."""
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
        yield from read_warc(path, skipped if skipped is not None else {})
    elif kind == "jsonl":
        yield from read_jsonl(path)
    else:
        yield from read_parquet(path)


def _content_type(http_headers) -> tuple[str, str | None]:
    raw = http_headers.get_header("Content-Type") if http_headers else None
    if not raw:
        return "application/octet-stream", None
    msg = Message()
    msg["content-type"] = raw
    return msg.get_content_type(), msg.get_param("charset")


def read_warc(path: str, skipped: dict[str, int]) -> Iterator[RawDocument | Quarantined]:
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
                body = rec.content_stream().read()
                missing = getattr(rec.raw_stream, "limit", 0)  # bytes the header promised but the file lacks
                offset = it.get_record_offset()
                if missing:
                    yield Quarantined(path, offset, "truncated_record",
                                      f"{rtype} record ends {missing} bytes short of its Content-Length {rec.length}",
                                      rec.rec_headers.get_header("WARC-Record-ID") or "")
                    continue
                rid = rec.rec_headers.get_header("WARC-Record-ID") or f"{os.path.basename(path)}:{offset}"
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
            if left > 0 and f.seek(it.offset) >= 0 and f.read(left).strip(b"\r\n\x00"):
                yield Quarantined(path, it.offset, "truncated_gzip",
                                  f"{left} bytes after the last complete record are not a readable WARC record")
        except Exception as e:  # noqa: BLE001 - any read failure is quarantined, never a crash
            # Truncated gzip members surface as EOFError, zlib.error or (cut inside the WARC
            # headers) an AttributeError from warcio; malformed headers as ArchiveLoadFailed.
            # Either way the rest of this file cannot be located.
            reason = "truncated_gzip" if _gzip_member_cut(path, it.offset) else "malformed_warc"
            yield Quarantined(path, it.offset, reason, f"{type(e).__name__}: {e}; rest of file not read")


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
def _open_text(path: str) -> Iterator[io.TextIOBase]:
    with storage.open_read(path) as raw:
        if path.endswith(".gz"):
            stream = gzip.GzipFile(fileobj=raw, mode="rb")
        elif path.endswith(".zst"):
            import zstandard

            stream = zstandard.ZstdDecompressor().stream_reader(raw)
        else:
            stream = raw
        with io.TextIOWrapper(stream, encoding="utf-8", errors="strict") as text:
            yield text


def read_jsonl(path: str) -> Iterator[RawDocument | Quarantined]:
    """JSON lines with `text` and optionally `id` and `url`; ids are preserved as given."""
    with _open_text(path) as f:
        lineno = 0
        while True:
            lineno += 1
            try:
                line = f.readline()
            except (UnicodeDecodeError, EOFError, OSError) as e:
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


def read_parquet(path: str) -> Iterator[RawDocument | Quarantined]:

    try:
        pf = storage.parquet_file(path)
    except Exception as e:  # noqa: BLE001 - any unreadable footer is a quarantine, not a crash
        yield Quarantined(path, 0, "unreadable_parquet", f"{type(e).__name__}: {e}")
        return
    names = pf.schema_arrow.names
    if "text" not in names:
        yield Quarantined(path, 0, "wrong_schema", f"no 'text' column (columns: {names})")
        return
    row = 0
    for batch in pf.iter_batches(batch_size=1024, columns=[c for c in ("id", "url", "text") if c in names]):
        for rec in batch.to_pylist():
            text = rec.get("text")
            if not isinstance(text, str):
                yield Quarantined(path, row, "missing_text", "null text")
            else:
                rid = str(rec.get("id") or f"{os.path.basename(path)}:{row}")
                yield RawDocument(rid, rec.get("url") or "", path, row, content_type="text/plain", text=text)
            row += 1
