"""Hostile inputs keep `lmforge corpus` in bounded memory (issue 38): a 4.7 MB WARC.gz whose one
page is 1 GiB of HTML, and a .jsonl.gz (4.7 MB) and a .jsonl.zst (0.1 MB) whose one line is 1 GiB,
built here by streaming compression (never 1 GiB in memory). Each oversized record is quarantined
as payload_too_large with its size, the normal record after it is kept, and counts reconcile.

Peak RSS of `lmforge corpus`, measured on 2 cores with 23 GB (ru_maxrss), on these records:
  before the cap (readers read a whole record or line):  WARC.gz alone 8.4 GB (309 s); .jsonl.gz
                                                         alone killed by the kernel at 20.7 GB
  with the cap (--max-record-bytes, default 1 MiB):      all three files 0.53 GB (33 s), the same
                                                         as on samples/crawl/news-000.warc.gz (0.54 GB)
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PAYLOAD = 1 << 30  # 1 GiB: a page Common Crawl would have cut at 1 MiB
CHUNK = 1 << 20

# Three real, distinct texts (the Debian Social Contract, the GNU Manifesto's opening, the Python
# tutorial's), long enough for the quality rules to keep them.
TEXTS = [
    "Debian will remain one hundred percent free, and we provide the guidelines that we use to decide whether a work is "
    "free. We will support our users who develop and run non-free works on Debian, but we will never make the system "
    "depend on them. We will give back to the free software community, sending bug fixes and improvements to the "
    "upstream authors of the software. We will not hide problems, and we will keep our entire bug report database open "
    "for public view at all times for everyone.",
    "GNU, which stands for Gnu's Not Unix, is the name for the complete Unix-compatible software system which I am "
    "writing so that I can give it away free to everyone who can use it. Several other volunteers are helping me. "
    "Contributions of time, money, programs and equipment are greatly needed. So far we have an Emacs text editor "
    "with Lisp for writing editor commands, a source level debugger, and a yacc-compatible parser generator.",
    "Python is an easy to learn, powerful programming language. It has efficient high-level data structures and a "
    "simple but effective approach to object-oriented programming. Python's elegant syntax and dynamic typing, "
    "together with its interpreted nature, make it an ideal language for scripting and rapid application development "
    "in many areas on most platforms. The interpreter and the extensive standard library are freely available.",
]


def repeated(unit: bytes, total: int) -> Iterator[bytes]:
    """`total` bytes of `unit` repeated (total a multiple of len(unit)), in chunks of about CHUNK."""
    assert total % len(unit) == 0
    block = unit * (CHUNK // len(unit))
    left = total
    while left:
        piece = block[:left]
        left -= len(piece)
        yield piece


def _fit(unit: bytes, total: int) -> int:
    return total - total % len(unit)


def warc_member(out, uri: str, body_len: int, body: Iterator[bytes]) -> None:
    """One WARC response record as its own gzip member, written as the body streams in (zlib level 9)."""
    http = f"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {body_len}\r\n\r\n".encode()
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{zlib.crc32(uri.encode()):08x}>\r\n"
            f"WARC-Target-URI: {uri}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(http) + body_len}\r\n\r\n").encode()
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out.write(z.compress(head + http))
    for piece in body:
        out.write(z.compress(piece))
    out.write(z.compress(b"\r\n\r\n") + z.flush())


def page(text: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>{text}</p></body></html>".encode()


def write_warc(path: Path, payload: int, after: str) -> int:
    """A `payload`-byte page of repeated paragraphs, then a normal page; returns the big page's size."""
    unit = b"<p>" + TEXTS[0].encode() + b"</p>\n"
    size = _fit(unit, payload)
    with path.open("wb") as f:
        warc_member(f, "https://bomb.invalid/", size, repeated(unit, size))
        warc_member(f, "https://a.invalid/", len(page(after)), iter([page(after)]))
    return size


def write_jsonl(f, payload: int, tag: str, after: str) -> int:
    """One line of about `payload` bytes, then a normal line; returns the big line's size."""
    unit = (TEXTS[0] + " ").encode()
    text = _fit(unit, payload)
    head, tail = b'{"id": "bomb-' + tag.encode() + b'", "text": "', b'"}\n'
    f.write(head)
    for piece in repeated(unit, text):
        f.write(piece)
    f.write(tail)
    f.write((json.dumps({"id": f"{tag}-1", "text": after}) + "\n").encode())
    return len(head) + text + len(tail) - 1  # the line without its newline


def hostile_inputs(folder: Path, payload: int = PAYLOAD) -> dict[str, int]:
    """The three files, each an oversized record then a normal one (the reader must find it past
    the big one); returns file name -> the size of its oversized record."""
    import zstandard

    folder.mkdir()
    sizes = {"bomb.warc.gz": write_warc(folder / "bomb.warc.gz", payload, TEXTS[0])}
    with gzip.open(folder / "bomb.jsonl.gz", "wb", compresslevel=9) as f:
        sizes["bomb.jsonl.gz"] = write_jsonl(f, payload, "gz", TEXTS[1])
    with (folder / "bomb.jsonl.zst").open("wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as f:
        sizes["bomb.jsonl.zst"] = write_jsonl(f, payload, "zst", TEXTS[2])
    return sizes


# A fresh interpreter runs the stage and reports its child's peak: RUSAGE_CHILDREN is the maximum
# over every child a process has waited for, and pytest's own earlier children may have been larger.
PEAK_OF = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def corpus_peak_rss(args: list[str]) -> int:
    """Run `lmforge corpus ARGS` in its own process; its peak resident memory in bytes."""
    cmd = [sys.executable, "-c", PEAK_OF, sys.executable, "-m", "lmforge.cli", "corpus", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return int(p.stdout.strip().splitlines()[-1]) * 1024  # ru_maxrss is in KiB on Linux


@pytest.mark.slow
def test_oversized_records_are_quarantined_in_bounded_memory(tmp_path):
    import pyarrow.parquet as pq

    from schemas.manifest import read_manifest

    sizes = hostile_inputs(tmp_path / "in")
    out = tmp_path / "out"
    peak = corpus_peak_rss(["--input", str(tmp_path / "in"), "--output", str(out)])
    assert peak < 1 << 30, f"lmforge corpus peaked at {peak / (1 << 30):.2f} GiB on 1 GiB records"

    c = read_manifest(out)["counts"]
    assert c["in"] == c["kept"] + sum(c["dropped"].values()) + c["duplicates"] + c["quarantined"] == 6
    assert c["quarantined_by_reason"] == {"payload_too_large": 3}
    kept = [r for f in (out / "data").glob("*/*.parquet") for r in pq.read_table(f, columns=["source"]).to_pylist()]
    assert sorted(Path(r["source"]).name for r in kept) == sorted(sizes)  # the record after each big one

    rep = json.loads((out / "report.json").read_text())
    assert rep["outcomes"]["reconciles"] and rep["quarantined_by_reason"] == {"payload_too_large": 3}
    shown = {Path(x["source"]).name: x["detail"] for x in rep["quarantined_examples"]["payload_too_large"]}
    assert shown.keys() == sizes.keys()
    html = (out / "report.html").read_text()
    for name, size in sizes.items():  # the real size, counted while the rest was skipped
        assert f" is {size:,} bytes, over max_record_bytes=4,194,304" in shown[name]
        assert f"{size:,} bytes" in html
