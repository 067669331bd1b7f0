"""Writes ``tests/data/tiny/``: a ~120-page slice of the sample for fast end-to-end tests.

Not a source itself: it picks from every source's pages -- near- and exact-duplicate pairs,
Russian pages, legacy encodings and a bad record, news pages with gold texts, then English
pages up to 120 -- and adds a three-record broken file, one Common Crawl WET fixture, a
manifest with the reason each page is there, and the gold texts of its news pages.
"""

from __future__ import annotations

import collections

from . import warc_npm
from .common import TINY, Page, sha1, write_if_changed
from .crawl import Broken
from .newspaper4k import write_gold_index
from .tables import DupPair
from .warc import crawl_order, warc_bytes

TARGET = 120
WET_FIXTURE = "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.wet"


def build_tiny(cands, deb_sel, dup_rows: list[DupPair], news, enc):
    """~120 pages: near-dup and exact-dup pairs, Russian pages, encodings, news with gold."""
    small = lambda p: len(p.body) < 40_000  # noqa: E731 - keep the slice small
    notes = {}
    chosen: list[Page] = []

    def take(p, label):
        if p.url not in notes:
            chosen.append(p)
            notes[p.url] = label

    def pick_pairs(kind, why, n, lo=0.0, hi=1.01):
        rows = [r for r in dup_rows if r.kind == kind and r.why == why and lo <= r.jaccard < hi
                and small(r.a) and small(r.b)]
        rows.sort(key=lambda r: sha1("tiny:" + r.a.url))
        for r in rows[:n]:
            tag = f"{r.kind}-pair:{sha1(r.a.url)[:8]} (text jaccard {r.jaccard:.3f})"
            take(r.a, tag)
            take(r.b, tag)

    lo_pair = "libreoffice-help-en-us/libreoffice-help-en-gb"
    ig_pair = "installation-guide-amd64/installation-guide-arm64"
    gimp_pair = "gimp-help-en/gimp-help-en-gb"
    pick_pairs("near", lo_pair, 4, 0.8, 1.0)
    pick_pairs("near", ig_pair, 3, 0.8, 1.0)
    pick_pairs("same-text", lo_pair, 1)
    pick_pairs("exact", gimp_pair, 3)
    pick_pairs("exact", ig_pair, 2)
    # news exact duplicate (same HTML file under two names in newspaper4k)
    for r in dup_rows:
        if r.kind == "exact" and r.a.source == "newspaper4k":
            take(r.a, f"exact-pair:{sha1(r.a.url)[:8]} (news)")
            take(r.b, f"exact-pair:{sha1(r.a.url)[:8]} (news)")

    sel_by_pkg = collections.defaultdict(list)
    for p in deb_sel:
        sel_by_pkg[p.package].append(p)

    def singles(pkg, n, label, pred=lambda p: True):
        ps = sorted((p for p in sel_by_pkg[pkg] if small(p) and pred(p) and p.url not in notes),
                    key=lambda p: sha1("tiny:" + p.url))
        for p in ps[:n]:
            take(p, label)

    n_ru = sum(1 for p in chosen if p.lang == "ru")
    singles("libreoffice-help-ru", 8, "russian")
    singles("gimp-help-ru", 6, "russian")
    singles("installation-guide-amd64", 2, "russian", lambda p: p.lang == "ru")
    singles("installation-guide-arm64", 2, "russian", lambda p: p.lang == "ru")
    singles("debian-handbook", max(0, 20 - n_ru - 18), "russian", lambda p: p.lang == "ru")

    for p in enc:
        rel = p.url.split("chardet-tests.invalid/", 1)[1]
        if rel in ("KOI8-R/_ude_1.txt", "SHIFT_JIS/_chromium_Shift-JIS_with_no_encoding_specified.html"):
            take(p, f"encoding: true charset in header ({p.charset})")
        if rel == "KOI8-R/_chromium_KOI8-R_with_no_encoding_specified.html":
            take(p, "bad: non-UTF-8 bytes, no charset in header or body (true charset koi8-r)")

    for p in sorted(news, key=lambda p: p.url):
        stem = p.origin.rsplit("/", 1)[-1][:-5]
        if stem in ("chinese_article_002", "japanese_article2", "arabic_article"):
            take(p, "news with gold text")

    singles("debian-handbook", 3, "english", lambda p: p.lang == "en")
    singles("installation-guide-amd64", 6, "english", lambda p: p.lang == "en")
    singles("gimp-help-en", 20, "english")
    singles("libreoffice-help-en-us", max(0, TARGET - len(chosen)), "english")
    return chosen, notes


def write_tiny(tiny_pages: list[Page], notes: dict[str, str], gold: dict, broken: Broken) -> None:
    write_if_changed(TINY / "tiny.warc.gz",
                     warc_bytes("tiny.warc.gz", "lmforge tiny test slice of samples/crawl",
                                crawl_order(tiny_pages)))
    write_if_changed(TINY / "broken.warc.gz",
                     warc_bytes("broken.warc.gz", "", broken.valid[:3], warcinfo=False) + broken.cut)
    write_if_changed(TINY / WET_FIXTURE, (warc_npm.FIXTURES / WET_FIXTURE).read_bytes())
    tiny_manifest = ["url\tsource\tpackage\tlang\theader_charset\tpayload_sha1\tlabel"]
    for p in crawl_order(tiny_pages):
        tiny_manifest.append("\t".join([p.url, p.source, p.package, p.lang, p.charset or "-",
                                        sha1(p.body), notes.get(p.url, "")]))
    write_if_changed(TINY / "manifest.tsv", ("\n".join(tiny_manifest) + "\n").encode("utf-8"))
    tgold = {}
    for p in tiny_pages:
        if p.url in gold:
            stem, data = gold[p.url]
            write_if_changed(TINY / "gold" / f"{stem}.txt", data)
            tgold[p.url] = f"{stem}.txt"
    write_gold_index(TINY / "gold", tgold)
