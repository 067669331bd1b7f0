"""The URL filter and PII steps against datatrove's URLFilter and PIIFormatter, on the same inputs.

URLs (all real, none made up):
  crawl      the sample crawl's page URLs and every absolute link (href) on its HTML pages: Debian
             documentation, the news pages of newspaper4k's tests and the Common Crawl 2014 sample
  ut1        UT1-listed domains (every 4,559th line of the list, so about 1,000), each as http://DOMAIN/
             and as https://www.DOMAIN/index.html: what the domain and subdomain rules must catch
  ut1_urls   every 20th entry of UT1's URL list, with the http:// a crawler records in front
Both sides use the same Public Suffix List (tldextract's bundled snapshot: datatrove's extractor is
swapped for lmforge's, so a live list fetched by one side cannot make them differ).

PII: every extracted page of the sample crawl, and the same pages with addresses planted (one e-mail
address made of the page's own words and one public IPv4 address per paragraph, seeded). datatrove's
formatter cycles its placeholders across documents, lmforge's within one (steps/pii.py), so
datatrove's is started afresh for each page; lmforge's IPv6 rule is off for the identity check and
counted on its own.
"""
from __future__ import annotations

import random
import re
import tarfile
import time
from collections import Counter
from typing import Any

from pipelines.corpus.readers import read_file
from pipelines.corpus.steps.pii import PiiConfig, scrub
from pipelines.corpus.steps.url_filter import (
    ARCHIVE,
    UrlFilterConfig,
    assets_dir,
    suffix_extractor,
    url_decision,
    url_lists,
)
from pipelines.io import expand_inputs
from schemas.records import RawDocument

HREF = re.compile(rb'href\s*=\s*["\'](https?://[^"\'\s<>]+)["\']', re.I)
WORD = re.compile(r"[a-z]{3,12}")
# datatrove's reason -> lmforge's, for the same rule
SAME_RULE = {"domain": "url_domain", "subdomain": "url_subdomain", "url": "url_listed", "hard_blacklisted": "url_banned_word",
             "soft_blacklisted": "url_soft_banned_words", "blacklisted_subword": "url_banned_subword"}


def why(ours: str | None, theirs: str | None) -> str:
    """The reason for each kind of difference seen, or UNEXPLAINED."""
    if ours == "url_listed" and theirs is None:
        return ("on UT1's URL list without its scheme: lmforge also compares the URL without it; datatrove compares "
                "only the URL as given, which no list entry (host/path) ever equals")
    if ours == "url_listed" and theirs is not None:
        return ("both drop: lmforge's URL-list rule fires (see above) before the word rules that drop it in datatrove")
    return "UNEXPLAINED"


def crawl_urls(crawl: list[str]) -> list[str]:
    urls: set[str] = set()
    for path in expand_inputs(crawl):
        for rec in read_file(path):
            if isinstance(rec, RawDocument):
                if rec.url:
                    urls.add(rec.url)
                urls.update(m.group(1).decode("utf-8", "replace") for m in HREF.finditer(rec.html or b""))
    return sorted(urls)


def ut1_urls() -> tuple[list[str], list[str]]:
    with tarfile.open(assets_dir() / ARCHIVE, "r:gz") as tar:
        domains = tar.extractfile("domains").read().decode().splitlines()[::4559]
        urls = tar.extractfile("urls").read().decode().splitlines()[::20]
    return ([u for d in domains for u in (f"http://{d}/", f"https://www.{d}/index.html")], [f"http://{u}" for u in urls])


def datatrove_url_filter():
    from datatrove.pipeline.filters import URLFilter

    f = URLFilter()
    f.tldextractor = suffix_extractor()  # the same Public Suffix List as lmforge's, never fetched
    f.download_data()
    return f


def compare_urls(sets: dict[str, list[str]]) -> dict[str, Any]:
    from datatrove.data import Document

    theirs_filter, cfg = datatrove_url_filter(), UrlFilterConfig()
    out: dict[str, Any] = {}
    for name, urls in sets.items():
        url_decision(urls[0], cfg)  # lists loaded before timing
        t = time.perf_counter()
        ours = [url_decision(u, cfg) for u in urls]
        ours_s = time.perf_counter() - t
        t = time.perf_counter()
        theirs = []
        for u in urls:
            r = theirs_filter.filter(Document(text="", id="u", metadata={"url": u}))
            theirs.append(None if r is True else r[1])
        theirs_s = time.perf_counter() - t
        classes, examples, same_rule = Counter(), {}, 0
        for u, a, b in zip(urls, ours, theirs):
            key = (str(a) if a else None, SAME_RULE.get(b) if b else None)
            same_rule += key[0] == key[1]
            if key[0] != key[1]:
                classes[key] += 1
                examples.setdefault(key, u)
        agree = sum(1 for a, b in zip(ours, theirs) if (a is None) == (b is None))
        lists = url_lists(cfg)
        both_keep = [u for u, a, b in zip(urls, ours, theirs) if a is None and b is None]
        www_of_listed = sum(1 for u in both_keep if (h := suffix_extractor()(u).fqdn).startswith("www.") and lists.domain_listed(h[4:]))
        out[name] = {"urls": len(urls), "agree": agree, "agreement": agree / len(urls), "same_rule": same_rule / len(urls),
                     "both_keep": len(both_keep), "both_keep_www_of_listed_host": www_of_listed,
                     "dropped_lmforge": sum(a is not None for a in ours), "dropped_datatrove": sum(b is not None for b in theirs),
                     "by_rule_lmforge": dict(Counter(str(a) for a in ours if a)),
                     "differences": [{"lmforge": a, "datatrove": b, "n": n, "example": examples[(a, b)],
                                      "why": why(a, b)} for (a, b), n in classes.most_common()],
                     "urls_per_s": {"lmforge": len(urls) / ours_s, "datatrove": len(urls) / theirs_s}}
    return out


def plant(text: str, rng: random.Random) -> str:
    """One e-mail address (the page's own words) and one public IPv4 address per paragraph."""
    words = WORD.findall(text.lower()) or ["user", "example"]
    out = []
    for para in text.split("\n\n"):
        a, b, c = (rng.choice(words) for _ in range(3))
        ip = f"{rng.choice([23, 51, 81, 141, 185, 203])}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        out.append(f"{para} Write to {a}.{b}@{c}.org or connect to {ip}.")
    return "\n\n".join(out)


def compare_pii(pages: list[str], seed: int = 0) -> dict[str, Any]:
    from datatrove.pipeline.formatters import PIIFormatter

    rng = random.Random(seed)
    sets = {"sample crawl": pages, "planted": [plant(p, rng) for p in pages]}
    four = PiiConfig(ipv6=False)
    out: dict[str, Any] = {}
    for name, texts in sets.items():
        t = time.perf_counter()
        ours = [scrub(x, four) for x in texts]
        ours_s = time.perf_counter() - t
        t = time.perf_counter()
        theirs = [PIIFormatter().format(x) for x in texts]  # afresh per page: the cycle starts at each
        theirs_s = time.perf_counter() - t
        differ = [i for i, ((a, _), b) in enumerate(zip(ours, theirs)) if a != b]
        counts = Counter()
        for _, c in ours:
            counts.update(c)
        six = Counter()
        for x in texts:
            six.update({k: v for k, v in scrub(x, PiiConfig(emails=False, ipv4=False))[1].items()})
        out[name] = {"pages": len(texts), "identical": len(texts) - len(differ), "first_difference": differ[:3],
                     "replaced": dict(counts), "ipv6_replaced_by_lmforge_only": dict(six),
                     "pages_per_s": {"lmforge": len(texts) / ours_s, "datatrove": len(texts) / theirs_s}}
    return out


def render(urls: dict[str, Any], pii: dict[str, Any]) -> str:
    lines = ["URL filter: keep/drop and rule agreement with datatrove's `URLFilter` (both with UT1 v0.3.0 as datatrove "
             "0.10.1's wheel carries it and tldextract's bundled Public Suffix List; bench/corpus/url_pii.py says where each "
             "set comes from):", "",
             "| URLs | n | dropped lmforge / datatrove | keep/drop agreement | same rule | lmforge URLs/s | datatrove URLs/s | speed |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in urls.items():
        s = r["urls_per_s"]
        lines.append(f"| {name} | {r['urls']:,} | {r['dropped_lmforge']:,} / {r['dropped_datatrove']:,} | {100 * r['agreement']:.2f}% | {100 * r['same_rule']:.2f}% "
                     f"| {s['lmforge']:,.0f} | {s['datatrove']:,.0f} | {s['lmforge'] / s['datatrove']:.2f}x |")
    diffs = [(name, d) for name, r in urls.items() for d in r["differences"]]
    if diffs:
        lines += ["", "Every difference (keep/drop or rule), by kind:", "",
                  "| set | lmforge | datatrove | n | why | example |", "|---|---|---|---:|---|---|"]
        lines += [f"| {name} | {d['lmforge'] or 'keep'} | {d['datatrove'] or 'keep'} | {d['n']} | {d['why']} | `{d['example'][:80]}` |"
                  for name, d in diffs]
    crawl_ok = all(r["agreement"] >= 0.999 for n, r in urls.items() if n != "ut1_urls")
    unexplained = sum(d["n"] for _, d in diffs if d["why"] == "UNEXPLAINED")
    ut1 = urls.get("ut1")
    if ut1:
        lines += ["", f"Of the UT1-domain URLs, {ut1['both_keep']:,} pass both filters; {ut1['both_keep_www_of_listed_host']:,} of "
                  "them are `www.` + a listed host that is itself a subdomain (blogs under blogspot.*, a private suffix the "
                  "Public Suffix List's ICANN part does not split): both rules compare only the registered domain and the "
                  "whole host, so an entry does not cover the hosts below it. lmforge decides as datatrove here. "
                  f"The other {ut1['both_keep'] - ut1['both_keep_www_of_listed_host']}: hosts that are IP addresses or outside "
                  "the Public Suffix List, which have no registered domain to compare."]
    lines += ["", "datatrove holds the lists as Python sets of strings; lmforge as sorted 64-bit hashes (36 MB for UT1).",
              "", f"Goal: >= 99.9% keep/drop agreement on the crawl and UT1-domain sets, every difference explained: "
              f"**{'MET' if crawl_ok and not unexplained else 'NOT MET'}** ({unexplained} unexplained)."]
    lines += ["", "PII: output text against datatrove's `PIIFormatter` (e-mail and public IPv4; lmforge's IPv6 rule off for "
              "this check, its replacements counted beside):", "",
              "| pages | n | identical text | replaced (lmforge) | IPv6 lmforge only | lmforge pages/s | datatrove pages/s | speed |",
              "|---|---:|---:|---|---|---:|---:|---:|"]
    for name, r in pii.items():
        s = r["pages_per_s"]
        lines.append(f"| {name} | {r['pages']:,} | {r['identical']:,} | {r['replaced']} | {r['ipv6_replaced_by_lmforge_only'] or '-'} "
                     f"| {s['lmforge']:,.0f} | {s['datatrove']:,.0f} | {s['lmforge'] / s['datatrove']:.2f}x |")
    same = all(r["identical"] == r["pages"] for r in pii.values())
    lines += ["", f"Goal: identical text on every page: **{'MET' if same else 'NOT MET'}**."]
    return "\n".join(lines) + "\n"
