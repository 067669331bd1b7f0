"""Verifies what the build wrote and prints the summary (record counts, charsets, the broken files).

Not a source itself: reads every WARC file back with warcio, checks payloads and declared
lengths against the pages that went in, decodes each payload with its header charset, reports
what warcio and Python's gzip module make of the truncated record, and checks the size budget
(``samples/crawl/*.warc.gz`` under 12 MB, ``samples/`` under 20 MB, the tiny slice under 1.5 MB).
"""

from __future__ import annotations

import collections
import gzip
import io
import json
import re
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from .common import CRAWL, HERE, REPO, TINY
from .crawl import Broken
from .warc import read_warc, warc_bytes


def probe_cuts(valid_bytes: bytes, member: bytes) -> list:
    """For every cut length of `member`, what warcio does; returns [(first, last, outcome)]."""
    spans = []
    for cut in range(1, len(member)):
        try:
            n = 0
            for r in ArchiveIterator(io.BytesIO(valid_bytes + member[:cut])):
                r.content_stream().read()
                n += 1
            out = f"no exception ({n} records)"
        except Exception as e:  # noqa: BLE001
            out = f"{type(e).__module__}.{type(e).__name__}"
        if spans and spans[-1][2] == out:
            spans[-1][1] = cut
        else:
            spans.append([cut, cut, out])
    return spans


def check_broken(path: Path, n_valid: int) -> dict:
    recs, exc = read_warc(path)
    info = {"records_yielded": len(recs), "exception": None if exc is None else
            f"{type(exc).__module__}.{type(exc).__name__}: {exc}"}
    short = [(u, len(p), d) for u, p, _, d in recs if len(p) != d]
    info["short_records"] = short
    assert all(len(p) == d for _, p, _, d in recs[:n_valid]), "valid records must be complete"
    try:
        with gzip.open(path) as fh:
            while fh.read(1 << 20):
                pass
        info["gzip_module"] = "no error"
    except Exception as e:  # noqa: BLE001
        info["gzip_module"] = f"{type(e).__name__}: {e}"
    return info


def verify(outputs, broken: Broken, tiny_pages, dup_rows, versions):
    print()
    print("source versions:", json.dumps(versions, sort_keys=True))
    total_pages = 0
    by = collections.Counter()
    for name, pages in outputs.items():
        recs, exc = read_warc(CRAWL / name)
        assert exc is None, (name, exc)
        assert [r[0] for r in recs] == [p.url for p in pages], name
        for (_url, payload, ctype, declared), p in zip(recs, pages):
            assert payload == p.body and declared == len(payload)
            m = re.search(r"charset=([\w-]+)", ctype or "")
            if m:
                payload.decode({"x-mac-cyrillic": "mac_cyrillic"}.get(m.group(1), m.group(1)))
        total_pages += len(recs)
        for p in pages:
            by[(p.source, p.lang)] += 1
        print(f"  {name:28s} {len(recs):5d} response records  {(CRAWL / name).stat().st_size:>10,d} bytes")
    print(f"  total response records in samples/crawl (excluding broken): {total_pages}")
    for (src, lang), n in sorted(by.items()):
        print(f"    {src:14s} {lang:4s} {n:5d}")
    ru = sum(n for (_s, lang), n in by.items() if lang == "ru")
    print(f"  Russian share: {ru}/{total_pages} = {ru / total_pages:.1%}")
    kinds = collections.Counter(r.kind for r in dup_rows)
    print("  duplicate pairs:", dict(kinds))

    for path, n_valid in ((CRAWL / "broken-000.warc.gz", len(broken.valid)), (TINY / "broken.warc.gz", 3)):
        info = check_broken(path, n_valid)
        print(f"  {path.relative_to(REPO)}: warcio yielded {info['records_yielded']} records"
              f" ({n_valid} complete); exception: {info['exception']}")
        for u, got, declared in info["short_records"]:
            print(f"      short record {u}: {got} of {declared} payload bytes")
        print(f"      python gzip module on the whole file: {info['gzip_module']}")

    recs, exc = read_warc(TINY / "tiny.warc.gz")
    assert exc is None and len(recs) == len(tiny_pages)
    tl = collections.Counter(p.lang for p in tiny_pages)
    print(f"  tests/data/tiny/tiny.warc.gz: {len(recs)} pages, languages {dict(tl)}")
    size = lambda d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file())  # noqa: E731
    crawl_gz = sum(f.stat().st_size for f in CRAWL.glob("*.warc.gz"))
    # the committed sample: not the download cache, nor the bytecode of this package
    sample = sum(f.stat().st_size for f in HERE.rglob("*")
                 if f.is_file() and not {".cache", "__pycache__"} & set(f.relative_to(HERE).parts))
    print(f"  samples/crawl/*.warc.gz: {crawl_gz:,d} bytes; samples/ (without .cache): {sample:,d} bytes;"
          f" tests/data/tiny: {size(TINY):,d} bytes")
    assert crawl_gz < 12_000_000 and sample < 20_000_000 and size(TINY) < 1_500_000


def report_cuts(broken: Broken) -> None:
    """What warcio does with the truncated member cut at every length, in spans of the same outcome."""
    spans = probe_cuts(warc_bytes("", "", broken.valid, warcinfo=False), broken.member)
    print(f"  cutting the {len(broken.member)}-byte gzip member of {broken.victim.url} at every length"
          f" (broken-000 uses {len(broken.cut)}):")
    for first, last, out in spans:
        if not out.startswith("no exception"):
            print(f"      cut at {first}-{last} bytes -> {out}")
    print("      every other cut length -> no exception")
