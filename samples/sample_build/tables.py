"""Writes ``samples/manifest.tsv`` (one line per response record) and ``samples/duplicates.tsv``.

Not a source itself: the tables run across every source's pages. The duplicate pairs are the
twins the Debian source chose on purpose plus every other pair of identical payloads or
identical extracted texts, each with the Jaccard similarity of their 5-word shingles.
"""

from __future__ import annotations

import collections
import re
from typing import NamedTuple

from .common import HERE, Page, sha1, write_if_changed
from .crawl import Broken


class DupPair(NamedTuple):
    """One row of duplicates.tsv."""

    kind: str          # "exact" (same bytes), "same-text" (same extracted text) or "near"
    jaccard: float     # of the two texts' 5-word shingles, rounded to 3 places
    a: Page
    b: Page
    why: str           # the package pair, or "identical payload" / "identical extracted text"


def shingles(text: str, n: int = 5) -> set:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}


def jaccard(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / max(1, len(sa | sb))


def write_manifest(outputs: dict[str, list[Page]], broken: Broken) -> dict[str, str]:
    """Write manifest.tsv; return {url: file} for the pages in ``outputs``."""
    manifest = ["file\turl\tsource\tpackage\tlang\theader_charset\tpayload_bytes\tpayload_sha1\ttext_chars\torigin"]
    where = {}
    for name, pages in outputs.items():
        for p in pages:
            where[p.url] = name
            manifest.append("\t".join([name, p.url, p.source, p.package, p.lang, p.charset or "-",
                                       str(len(p.body)), sha1(p.body), str(len(p.text)), p.origin]))
    for p in broken.valid:
        manifest.append("\t".join(["broken-000.warc.gz", p.url, p.source, p.package, p.lang, p.charset,
                                   str(len(p.body)), sha1(p.body), str(len(p.text)), p.origin]))
    victim = broken.victim
    manifest.append("\t".join(["broken-000.warc.gz", victim.url, victim.source, victim.package, victim.lang,
                               victim.charset, str(len(victim.body)), sha1(victim.body),
                               str(len(victim.text)), victim.origin + " [TRUNCATED gzip member]"]))
    write_if_changed(HERE / "manifest.tsv", ("\n".join(manifest) + "\n").encode("utf-8"))
    return where


def duplicate_pairs(outputs: dict[str, list[Page]], pairs) -> list[DupPair]:
    """The package twins + any other identical payloads / texts, sorted by (kind, why, url_a)."""
    all_pages = [p for ps in outputs.values() for p in ps]
    rows: list[DupPair] = []
    seen = set()

    def add_pair(a, b, why):
        key = tuple(sorted((a.url, b.url)))
        if key in seen:
            return
        seen.add(key)
        if a.body == b.body:
            kind = "exact"
        elif a.text == b.text:
            kind = "same-text"
        else:
            kind = "near"
        rows.append(DupPair(kind, round(jaccard(a.text, b.text), 3), a, b, why))

    for a, b, why in pairs:
        add_pair(a, b, why)
    # payloads first, then texts: a pair with the same bytes is listed once, as "identical payload"
    for key, why in ((lambda p: sha1(p.body), "identical payload"),
                     (lambda p: sha1(p.text), "identical extracted text")):
        groups = collections.defaultdict(list)
        for p in all_pages:
            groups[key(p)].append(p)
        for ps in groups.values():
            for q in ps[1:]:
                add_pair(ps[0], q, why)
    rows.sort(key=lambda r: (r.kind, r.why, r.a.url))
    return rows


def write_duplicates(rows: list[DupPair], where: dict[str, str]) -> None:
    lines = ["kind\ttext_jaccard_5gram\turl_a\tfile_a\turl_b\tfile_b\twhy"]
    for kind, j, a, b, why in rows:
        lines.append("\t".join([kind, f"{j:.3f}", a.url, where[a.url], b.url, where[b.url], why]))
    write_if_changed(HERE / "duplicates.tsv", ("\n".join(lines) + "\n").encode("utf-8"))
