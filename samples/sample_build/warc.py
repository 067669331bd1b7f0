"""Writing and reading the sample's WARC files with warcio.

Not a source itself: every ``Page`` from every source becomes a gzip-per-record WARC response
record here. WARC-Date and WARC-Record-ID are derived from the URL and warcio writes gzip
members with mtime 0, so the bytes are the same on every run.
"""

from __future__ import annotations

import datetime as dt
import io
import uuid
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from .common import Page, sha1

BASE_DATE = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def warc_date(url: str) -> str:
    """A fixed date in May 2024 derived from the URL."""
    seconds = int(sha1("date:" + url)[:8], 16) % (30 * 86400)
    return (BASE_DATE + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_id(url: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>"


def write_record(writer: WARCWriter, page: Page) -> None:
    http = StatusAndHeaders("200 OK", [("Content-Type", page.content_type),
                                       ("Content-Length", str(len(page.body)))],
                            protocol="HTTP/1.1")
    rec = writer.create_warc_record(page.url, "response", payload=io.BytesIO(page.body),
                                    http_headers=http,
                                    warc_headers_dict={"WARC-Date": warc_date(page.url),
                                                       "WARC-Record-ID": record_id(page.url)})
    writer.write_record(rec)


def write_warcinfo(writer: WARCWriter, filename: str, description: str) -> None:
    # "samples/build_sample.py" is the entry point that writes every file, so it stays the
    # software named here even though this module does the writing.
    fields = (f"software: lmforge samples/build_sample.py\r\n"
              f"format: WARC File Format 1.0\r\n"
              f"isPartOf: lmforge-sample\r\n"
              f"description: {description}\r\n").encode()
    rec = writer.create_warc_record("", "warcinfo", payload=io.BytesIO(fields), length=len(fields),
                                    warc_content_type="application/warc-fields",
                                    warc_headers_dict={
                                        "WARC-Date": BASE_DATE.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                        "WARC-Record-ID": record_id("warcinfo:" + filename),
                                        "WARC-Filename": filename})
    writer.write_record(rec)


def warc_bytes(filename: str, description: str, pages, warcinfo=True) -> bytes:
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    if warcinfo:
        write_warcinfo(w, filename, description)
    for p in pages:
        write_record(w, p)
    return buf.getvalue()


def record_member(page: Page) -> bytes:
    buf = io.BytesIO()
    write_record(WARCWriter(buf, gzip=True), page)
    return buf.getvalue()


def crawl_order(pages):
    """A fixed pseudo-random order (like a crawl), independent of selection order."""
    return sorted(pages, key=lambda p: sha1("order:" + p.url))


def read_warc(path: Path):
    """Return (records, exception) reading with warcio; records are (url, payload, ctype, declared)."""
    recs, exc = [], None
    try:
        with open(path, "rb") as fh:
            for r in ArchiveIterator(fh):
                if r.rec_type != "response":
                    continue
                declared = int(r.http_headers.get_header("Content-Length") or -1)
                payload = r.content_stream().read()
                recs.append((r.rec_headers.get_header("WARC-Target-URI"), payload,
                             r.http_headers.get_header("Content-Type"), declared))
    except Exception as e:  # noqa: BLE001 - we report whatever warcio raises
        exc = e
    return recs, exc
