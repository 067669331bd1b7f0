"""Language-id accuracy of the corpus stage (`pipelines.corpus.text.identify_language`, i.e.
py3langid) on held-out real English and Russian text whose language is known from its source,
not from a model.

    lmforge bench langid [--per-source 1500] [--cache samples/.cache/langid] [--offline]

Sources (Debian packages are fetched once with `apt-get download` + `dpkg-deb -x` into --cache,
which is not committed; none of this text is shipped):

  fortunes        Debian `fortunes` + `fortunes-min` (fortune-mod; English): one item per fortune
  dict-gcide      Debian `dict-gcide` (GCIDE, English): one item per quotation inside an entry
  fortunes-ru     Debian `fortunes-ru` (Russian): one item per fortune
  manpages-ru     Debian `manpages-ru` (Russian man pages): one item per troff paragraph
  <package>       samples/crawl pages of gimp-help-en/-ru, libreoffice-help-en-us/-ru,
                  installation-guide-amd64 en/ru and debian-handbook en-US/ru-RU (the language is
                  the package's, from the URL); one item per paragraph of the extracted text

An item counts only if at least 2 of its words and most of its letters are in its language's
alphabet (Latin for English, Cyrillic for Russian): the Russian packages carry untranslated
English (man-page NAME lines, whole paragraphs of the Russian Debian handbook, log excerpts),
which is not Russian text whatever its source; the report gives how many items this leaves.
The check reads only the alphabet, never a language model. Items are deduplicated and the first
--per-source by SHA-1 of the text are kept. Accuracy is `identify_language(text)[0]` equal to
the source's language; "kept right" also needs the probability >= 0.5, the corpus stage's
min_language_score. The crawl pages were chosen by samples/build_sample.py only if py3langid
gave the whole page its package's language, so whole pages would score 100% by construction;
their paragraphs are scored here, which that selection saw only as part of the page.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import re
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import write_section
from common.config import opt, require
from pipelines.corpus.readers import read_file
from pipelines.corpus.text import DecodeError, decode_html, html_to_text, identify_language, normalize_text
from schemas.records import RawDocument

DEBS = {"fortunes": "en", "fortunes-min": "en", "dict-gcide": "en", "fortunes-ru": "ru", "manpages-ru": "ru"}
LICENCES = {"fortunes": "BSD (fortune-mod, The Regents of the University of California; the quotations are by many authors)",
            "dict-gcide": "GPL-2+ (GCIDE, from Webster's 1913)", "fortunes-ru": "GPL-2 (Pavel Maryanov)",
            "manpages-ru": "GPL-3+ (manpages-l10n; the translated pages keep their own licences)"}
# samples/crawl packages -> (language, URL path prefix or "" for any); en-gb and arm64 pages
# are left out because they repeat en-us / amd64 pages.
CRAWL = {"gimp-help-en": ("en", ""), "gimp-help-ru": ("ru", ""), "libreoffice-help-en-us": ("en", ""),
         "libreoffice-help-ru": ("ru", ""), "installation-guide-amd64:en": ("en", "/en/"),
         "installation-guide-amd64:ru": ("ru", "/ru/"), "debian-handbook:en": ("en", "/en-US/"),
         "debian-handbook:ru": ("ru", "/ru-RU/")}
BUCKETS = ((0, 50, "<50"), (50, 200, "50-200"), (200, 1000, "200-1000"), (1000, 10**12, ">1000"))
_SCRIPT_WORD = {"en": re.compile(r"\b[A-Za-z]{2,}"), "ru": re.compile(r"\b[А-Яа-яЁё]{2,}")}
_SCRIPT_LETTER = {"en": re.compile(r"[A-Za-z]"), "ru": re.compile(r"[А-Яа-яЁё]")}


@dataclass
class LangidBenchConfig:
    cache: str = opt("samples/.cache/langid", "where .debs are downloaded and unpacked")
    crawl: str = opt("samples/crawl", "folder with debian-docs-*.warc.gz")
    per_source: int = opt(1500, "items kept per source")

    def __post_init__(self) -> None:
        require(self.per_source >= 1, "--per-source must be >= 1")
_LETTER = re.compile(r"[^\W\d_]")


# ---------------------------------------------------------------------------------------------
# Fetching (the only impure part besides main)
# ---------------------------------------------------------------------------------------------

def fetch_debs(cache: Path, offline: bool) -> dict[str, tuple[Path, str]]:
    """package -> (unpacked root, .deb file name), downloading what the cache lacks."""
    out = {}
    for pkg in DEBS:
        debs = sorted((cache / "debs").glob(f"{pkg}_*.deb"))
        if not debs:
            if offline:
                raise SystemExit(f"--offline: no {pkg}_*.deb in {cache / 'debs'}; run once without --offline")
            (cache / "debs").mkdir(parents=True, exist_ok=True)
            subprocess.run(["apt-get", "download", pkg], cwd=cache / "debs", check=True)
            debs = sorted((cache / "debs").glob(f"{pkg}_*.deb"))
        root = cache / "unpacked" / pkg
        if not root.exists():  # unpack under a temporary name, so an interrupted run is redone
            partial = root.with_name(pkg + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(partial)], check=True)
            partial.rename(root)
        out[pkg] = (root, debs[-1].name)
    return out


# ---------------------------------------------------------------------------------------------
# Pure readers: files -> text items
# ---------------------------------------------------------------------------------------------

def fortunes(text: str) -> list[str]:
    """The fortunes of a fortune-mod data file (separated by lines holding only "%")."""
    return [f.strip("\n") for f in re.split(r"^%$", text, flags=re.M) if f.strip()]


def fortune_files(root: Path) -> Iterator[Path]:
    for f in sorted((root / "usr" / "share" / "games" / "fortunes").rglob("*")):
        # .dat are indexes; *.u8 are symlinks to the same files; ascii-art is pictures, not text.
        if f.is_file() and not f.is_symlink() and f.suffix != ".dat" and f.name != "ascii-art":
            yield f


_GCIDE_TAG = re.compile(r"^\s*\[[^\]]*\]\s*$")  # "[1913 Webster]" and other source tags
_ATTRIBUTION = re.compile(r"\s*--\s*[^-\s][^-]*$")  # "--Macaulay." at the end of a quotation


def gcide_quotations(dictionary: str) -> list[str]:
    """Quotations of the GCIDE dict file: blocks indented 9+ spaces that end in "--Author."."""
    out = []
    for block in dictionary.split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln.strip() and not _GCIDE_TAG.match(ln)]
        if lines and all(ln.startswith(" " * 9) for ln in lines) and _ATTRIBUTION.search(lines[-1]):
            out.append(_ATTRIBUTION.sub("", " ".join(ln.strip() for ln in lines)))
    return [q for q in out if q]


_FONT_MACROS = {"B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "SM", "SB"}
_INLINE = {"UR", "UE", "MT", "ME", ""}  # links and empty requests sit inside running text
_TROFF = [(re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\\*(\[[^\]]*\]|\(..|.)"), ""),
          (re.compile(r"\\\((em|en|hy)"), "-"), (re.compile(r"\\\((lq|rq|dq)"), '"'), (re.compile(r"\\\(aq"), "'"),
          (re.compile(r"\\\(..|\\\[[^\]]*\]"), ""), (re.compile(r"\\[-e]"), "-"), (re.compile(r"\\[ ~0]"), " "),
          (re.compile(r"\\[&,/:^|c%]"), "")]


def troff_text(line: str) -> str:
    for rx, repl in _TROFF:
        line = rx.sub(repl, line)
    return line


def man_paragraphs(source: str) -> list[str]:
    """Running-text paragraphs of a man page: requests (.PP, .SH, ...) end a paragraph; .TP tags,
    section headings and .nf/.EX blocks (code) are left out; font escapes are removed. groff
    could render the page, but its output loses the request boundaries we split on."""
    paras: list[str] = []
    cur: list[str] = []
    code = tag = False
    for line in source.splitlines():
        if line.startswith((".\\\"", "'\\\"", '.\\"')):
            continue
        if line.startswith((".", "'")):
            req, _, arg = line[1:].strip().partition(" ")
            if req in _FONT_MACROS:
                if tag:
                    tag = False  # the .TP tag, written as a font macro
                elif not code:
                    cur.append(arg.replace('"', ""))
                continue
            if req in _INLINE:
                continue
            if cur:
                paras.append(" ".join(troff_text(" ".join(cur)).split()))
                cur = []
            code = {"nf": True, "EX": True, "fi": False, "EE": False}.get(req, code)
            tag = req == "TP"
            continue
        if code:
            continue
        if tag:
            tag = False
            continue
        cur.append(line)
    if cur:
        paras.append(" ".join(troff_text(" ".join(cur)).split()))
    return [p for p in paras if p]


def crawl_source(url: str) -> str | None:
    """The CRAWL source of a samples/crawl URL, or None for pages not in the benchmark."""
    host = url.split("://", 1)[-1].split(".docs.invalid", 1)[0]
    for name, (_, prefix) in CRAWL.items():
        if name.split(":")[0] == host and (not prefix or prefix in url):
            return name
    return None


def crawl_paragraphs(html: bytes, charset: str | None) -> list[str]:
    """Paragraphs (blocks between blank lines) of a page as the corpus stage extracts it."""
    try:
        text = normalize_text(html_to_text(decode_html(html, charset).text))
    except DecodeError:
        return []
    return [p for p in text.split("\n\n") if p]


def usable(text: str, language: str) -> bool:
    """At least 2 words, and more than half of the letters, in the language's alphabet."""
    letters = _LETTER.findall(text)
    in_script = sum(bool(_SCRIPT_LETTER[language].match(c)) for c in letters)
    return len(_SCRIPT_WORD[language].findall(text)) >= 2 and in_script * 2 > len(letters)


def choose(items: list[str], language: str, n: int) -> tuple[list[str], int, int]:
    """(usable distinct items, the first n by SHA-1 of the text: a fixed, content-blind order;
    number of distinct items; number of usable ones)."""
    distinct = set(items)
    ok = [t for t in distinct if usable(t, language)]
    return sorted(ok, key=lambda t: hashlib.sha1(t.encode()).hexdigest())[:n], len(distinct), len(ok)


# ---------------------------------------------------------------------------------------------
# Scoring (pure)
# ---------------------------------------------------------------------------------------------

def bucket(n_chars: int) -> str:
    return next(name for lo, hi, name in BUCKETS if lo <= n_chars < hi)


def summarise(results: list[tuple[str, str, str, str, float]], min_score: float = 0.5) -> dict:
    """results: (source, true language, text, predicted language, probability) per item."""
    def acc(rows):
        return {"items": len(rows), "accuracy": sum(r[3] == r[1] for r in rows) / max(1, len(rows)),
                "kept_right": sum(r[3] == r[1] and r[4] >= min_score for r in rows) / max(1, len(rows))}
    by = defaultdict(list)
    for r in results:
        by["all"].append(r)
        by[f"lang:{r[1]}"].append(r)
        by[f"bucket:{r[1]}:{bucket(len(r[2]))}"].append(r)
        by[f"source:{r[0]}"].append(r)
    out = {k: acc(v) for k, v in sorted(by.items())}
    langs = sorted({r[1] for r in results})
    wrong = [r for r in results if r[3] != r[1]]
    out["errors_under_50_chars"] = sum(len(r[2]) < 50 for r in wrong) / max(1, len(wrong))
    out["macro_accuracy"] = sum(out[f"lang:{lg}"]["accuracy"] for lg in langs) / max(1, len(langs))
    out["confusion"] = {lg: dict(Counter(r[3] for r in results if r[1] == lg).most_common()) for lg in langs}
    # Per source, the wrong calls by predicted language (no text: the Debian texts are not shipped).
    out["errors"] = {src: dict(Counter(r[3] for r in results if r[0] == src and r[3] != r[1]).most_common())
                     for src in sorted({r[0] for r in results})}
    return out


# ---------------------------------------------------------------------------------------------
# Shell
# ---------------------------------------------------------------------------------------------

def load_items(cache: Path, crawl: Path, per_source: int, offline: bool) -> tuple[dict, dict, dict]:
    """source -> (language, items); package -> version; source -> (distinct items, usable items)."""
    debs = fetch_debs(cache, offline)
    raw: dict[str, list[str]] = defaultdict(list)
    for pkg in ("fortunes", "fortunes-min", "fortunes-ru"):
        for f in fortune_files(debs[pkg][0]):
            raw[pkg.replace("-min", "")] += fortunes(f.read_text(encoding="utf-8"))
    for f in sorted((debs["manpages-ru"][0] / "usr" / "share" / "man").rglob("*.gz")):
        raw["manpages-ru"] += man_paragraphs(gzip.decompress(f.read_bytes()).decode("utf-8"))
    gcide = debs["dict-gcide"][0] / "usr" / "share" / "dictd" / "gcide.dict.dz"  # dictzip: gzip-compatible
    # 3 stray cp1252 bytes in 40 MB of UTF-8; the quotations holding them are left out.
    quotes = gcide_quotations(gzip.decompress(gcide.read_bytes()).decode("utf-8", errors="replace"))
    raw["dict-gcide"] = [q for q in quotes if "\ufffd" not in q]
    for path in sorted(glob.glob(str(crawl / "debian-docs-*.warc.gz"))):
        for rec in read_file(path):
            if isinstance(rec, RawDocument) and rec.html and (src := crawl_source(rec.url)):
                raw[src] += crawl_paragraphs(rec.html, rec.charset)
    if not any(k in raw for k in CRAWL):
        raise SystemExit(f"no page of {crawl}/debian-docs-*.warc.gz belongs to {sorted(CRAWL)}")
    lang = {**DEBS, **{k: v[0] for k, v in CRAWL.items()}}
    chosen = {src: choose(texts, lang[src], per_source) for src, texts in sorted(raw.items())}
    items = {src: (lang[src], c[0]) for src, c in chosen.items()}
    versions = {pkg: name.split("_")[1].replace("%3a", ":") for pkg, (_, name) in debs.items()}
    return items, versions, {src: c[1:] for src, c in chosen.items()}


def classify(items: dict[str, tuple[str, list[str]]]) -> tuple[list, float]:
    """(results for summarise, seconds spent in identify_language)."""
    identify_language("warm up")  # loads the model once; not timed
    results, spent = [], 0.0
    for src, (lang, texts) in items.items():
        for t in texts:
            t0 = time.perf_counter()
            pred, prob = identify_language(t)
            spent += time.perf_counter() - t0
            results.append((src, lang, t, pred, prob))
    return results, spent


def render(s: dict, items: dict, counts: dict, versions: dict, docs_per_s: float, chars_per_s: float) -> str:
    pct = "{:.1%}".format
    rows = [f"| {k.split(':', 1)[1]} | {v['items']:,} | {pct(v['accuracy'])} | {pct(v['kept_right'])} |"
            for k, v in s.items() if k.startswith("lang:")]
    buckets = [f"| {lg} | {name} | {s[k]['items']:,} | {pct(s[k]['accuracy'])} |"
               for lg in s["confusion"] for _, _, name in BUCKETS if (k := f"bucket:{lg}:{name}") in s]
    sources = [f"| {src} | {lang} | {counts[src][1]:,} of {counts[src][0]:,} | {s['source:' + src]['items']:,} | "
               f"{pct(s['source:' + src]['accuracy'])} |" for src, (lang, _) in items.items()]
    confusion = [f"* {lg} texts were called: " + ", ".join(f"{p} {n}" for p, n in list(c.items())[:8])
                 for lg, c in s["confusion"].items()]
    pkgs = ", ".join(f"`{p}` {v}" for p, v in versions.items())
    lic = "; ".join(f"{p}: {v}" for p, v in LICENCES.items())
    return "\n".join([
        f"`identify_language` (py3langid, first 2,000 characters) on {s['all']['items']:,} real English and Russian "
        "texts whose language is known from their source (see `bench/corpus/langid.py`). "
        f"Overall accuracy {pct(s['all']['accuracy'])} (macro over the two languages {pct(s['macro_accuracy'])}); "
        "\"kept right\" also needs probability >= 0.5, the corpus stage's `min_language_score`.", "",
        "| language | items | accuracy | kept right |", "|---|---:|---:|---:|", *rows, "",
        "By length (characters of the item):", "",
        "| language | length | items | accuracy |", "|---|---|---:|---:|", *buckets, "",
        "By source (usable: distinct items in the language's alphabet; scored: the sample of them):", "",
        "| source | language | usable | scored | accuracy |", "|---|---|---:|---:|---:|", *sources, "",
        *confusion, "",
        f"{pct(s['errors_under_50_chars'])} of the errors are items under 50 characters (headings, menu and "
        "command names); Russian is mostly mistaken for other languages written in Cyrillic.", "",
        f"Speed: {docs_per_s:,.0f} docs/s ({chars_per_s / 1e6:.2f} M characters/s), single process.", "",
        f"Debian packages (text cached in samples/.cache/langid, not shipped): {pkgs}. Licences: {lic}. "
        "samples/crawl sources and licences: samples/README.md. The crawl pages were selected for agreeing "
        "with py3langid as whole pages, so their paragraph scores lean high.", ""])


def parse(argv: list[str] | None) -> tuple[LangidBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench langid", __doc__, LangidBenchConfig)
    ap.add_argument("--offline", action="store_true", help="use only .debs already in --cache")
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    return parse_bench(ap, LangidBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    a, ns = parse(argv)
    items, versions, counts = load_items(Path(a.cache), Path(a.crawl), a.per_source, ns.offline)
    results, spent = classify(items)
    s = summarise(results)
    n_chars = sum(min(2000, len(r[2])) for r in results)  # identify_language reads 2,000 characters at most
    body = render(s, items, counts, versions, len(results) / spent, n_chars / spent)
    write_section(Path(ns.out), "corpus: language id on held-out English and Russian text", body,
                  {**s, "packages": versions, "licences": LICENCES, "docs_per_s": len(results) / spent,
                   "distinct_and_usable_items": counts})
    print(body)
    return 0
