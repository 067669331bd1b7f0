"""Builds ``tests/data/fr-de/``: a small French/German crawl of the GIMP help, for tests.

Run from the repository root (``-m``, so that ``pipelines`` and this package both import):

    apt-get update      # once, if `apt-get download` cannot find the pinned .debs
    .venv/bin/python -m samples.sample_build.fr_de            # --offline: never call apt-get

What it does: downloads the pinned ``gimp-help-fr``, ``gimp-help-de`` and ``gimp-help-en`` .debs
into ``samples/.cache/debs`` (``apt-get download``; kept there, so later runs need no network)
and unpacks them with ``dpkg-deb -x``; keeps the HTML pages whose text, as the corpus stage
extracts it (resiliparse, ``pipelines/corpus/text.py``), has enough words and is in the
package's language by py3langid; picks N_PAGES of each package by the SHA-1 of the page path;
writes ``gimp-fr-de.warc.gz`` (gzip per record, the WARC helpers of ``warc.py``, so dates and
record ids come from the URL), ``manifest.tsv`` and ``README.md``. Every file is only rewritten
when its bytes change; two runs give the same bytes.

Not part of ``samples/build_sample.py``: the bundled sample stays as it is; this slice is a
separate test input with its own command.
"""

from __future__ import annotations

import argparse
import collections
import io
import os
import subprocess
import sys
from pathlib import Path

from warcio.warcwriter import WARCWriter

from pipelines.corpus.text import html_to_text, identify_language, normalize_text

from .common import DEBS, LICENSES, REPO, UNPACKED, Page, run, sha1, write_if_changed
from .debian_docs import DOC_ROOTS as SAMPLE_DOC_ROOTS
from .debian_docs import by_key, deb_path, unpack
from .warc import BASE_DATE, crawl_order, record_id, write_record

OUT = REPO / "tests" / "data" / "fr-de"
WARC_NAME = "gimp-fr-de.warc.gz"
COMMAND = ".venv/bin/python -m samples.sample_build.fr_de"

VERSION = "2.10.34-2"   # the same upstream release as the bundled sample's gimp-help-en
# package -> (doc root inside the package, language its pages must be in, pages to take)
PACKAGES = {
    "gimp-help-fr": ("usr/share/gimp/2.0/help/fr", "fr", 90),
    "gimp-help-de": ("usr/share/gimp/2.0/help/de", "de", 90),
    "gimp-help-en": (SAMPLE_DOC_ROOTS["gimp-help-en"], "en", 15),   # a little English, as a real crawl has
}
# The fr/de packages' /usr/share/doc/<pkg> is a symlink to gimp-help-common, whose copyright file
# the bundled sample already copies to samples/licenses/gimp-help-common.txt.
COMMON_COPYRIGHT = "gimp-help-common"

# The corpus stage drops pages under 50 words (Gopher) after C4 has removed short lines (menus,
# captions), which takes a third to a half of a GIMP help page's words: 150 extracted words
# leave it ~75-100. Pages over MAX_BODY are skipped to keep the file small: 195 records at
# ~5 KB gzipped each is ~1 MB.
MIN_WORDS = 150
MIN_LANG_PROB = 0.9     # the corpus stage keeps >= 0.5; a margin so the slice's labels are clear
MAX_BODY = 40_000


def fetch(offline: bool) -> dict[str, str]:
    """Download (unless cached) and unpack every pinned .deb; return {package: version}.

    debian_docs.fetch does the same for its own fixed pin list, so it cannot be called with
    this one; this keeps its cache layout (samples/.cache/debs, unpacked/<pkg>/.unpacked-from)
    so the two share the gimp-help-en download. Unlike it, a missing pin is an error, never a
    fallback to another version."""
    DEBS.mkdir(parents=True, exist_ok=True)
    for pkg in PACKAGES:
        deb = deb_path(pkg, VERSION)
        if deb is None:
            if offline:
                sys.exit(f"missing {pkg}={VERSION} in {DEBS} (run without --offline)")
            try:
                run(["apt-get", "download", f"{pkg}={VERSION}"], cwd=DEBS)
            except subprocess.CalledProcessError:
                sys.exit(f"{pkg}={VERSION} is not available: run `apt-get update`, or pin the version apt has")
            deb = deb_path(pkg, VERSION)
        unpack(pkg, deb)
    return dict.fromkeys(PACKAGES, VERSION)


def check_licenses() -> None:
    """Copy a package's own copyright file to samples/licenses/<pkg>.txt; a package whose doc
    folder is a symlink to gimp-help-common is covered by gimp-help-common.txt."""
    for pkg in PACKAGES:
        doc = UNPACKED / pkg / "usr" / "share" / "doc" / pkg
        if doc.is_symlink() and os.readlink(doc) == COMMON_COPYRIGHT:
            if not (LICENSES / f"{COMMON_COPYRIGHT}.txt").exists():
                sys.exit(f"{pkg}: needs samples/licenses/{COMMON_COPYRIGHT}.txt (samples/build_sample.py)")
            continue
        write_if_changed(LICENSES / f"{pkg}.txt", (doc / "copyright").read_bytes())


def html_files(base: Path) -> list[Path]:
    """Every regular .html file under base, in a fixed order (symlinks are skipped)."""
    files = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        files += [Path(dirpath) / fn for fn in sorted(filenames) if fn.endswith(".html")]
    return [p for p in sorted(files) if not p.is_symlink()]


def candidates(pkg: str) -> dict[str, Page]:
    """rel path -> Page for the package's pages with enough prose in its language."""
    root, want, _ = PACKAGES[pkg]
    base = UNPACKED / pkg / root
    pages = {}
    for path in html_files(base):
        body = path.read_bytes()
        if len(body) > MAX_BODY:
            continue
        text = normalize_text(html_to_text(body.decode("utf-8")))   # the GIMP help is UTF-8
        if len(text.split()) < MIN_WORDS:
            continue
        lang, prob = identify_language(text)
        if lang != want or prob < MIN_LANG_PROB:    # e.g. untranslated pages
            continue
        rel = path.relative_to(base).as_posix()
        pages[rel] = Page(f"https://{pkg}.docs.invalid/{rel}", body, "utf-8", "debian-docs", pkg,
                          f"{pkg}:/{root}/{rel}", lang, text)
    return pages


def select() -> tuple[list[Page], dict[str, int]]:
    """The first N pages of each package by SHA-1 of "<pkg>:<path>"; also {pkg: candidate count}."""
    chosen, n_cands = [], {}
    for pkg, (_, _, n) in PACKAGES.items():
        cands = candidates(pkg)
        n_cands[pkg] = len(cands)
        chosen += [cands[rel] for rel in by_key(pkg, cands)[:n]]
        print(f"  {pkg}: {len(cands)} candidate pages, {min(n, len(cands))} taken", flush=True)
    return chosen, n_cands


def warc_file(pages: list[Page]) -> bytes:
    """A warcinfo record, then one response record per page in crawl order.

    warc.warc_bytes would name samples/build_sample.py as the software, so the warcinfo is
    written here; the response records are warc.write_record's, the same bytes as there."""
    fields = (f"software: lmforge samples/sample_build/fr_de.py\r\n"
              f"format: WARC File Format 1.0\r\n"
              f"isPartOf: lmforge-test-fr-de\r\n"
              f"description: GIMP help pages (French, German, some English) from Debian gimp-help-* {VERSION}\r\n"
              ).encode()
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    info = writer.create_warc_record("", "warcinfo", payload=io.BytesIO(fields), length=len(fields),
                                     warc_content_type="application/warc-fields",
                                     warc_headers_dict={"WARC-Date": BASE_DATE.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                                        "WARC-Record-ID": record_id("warcinfo:" + WARC_NAME),
                                                        "WARC-Filename": WARC_NAME})
    writer.write_record(info)
    for p in crawl_order(pages):
        write_record(writer, p)
    return buf.getvalue()


def manifest(pages: list[Page]) -> bytes:
    rows = ["url\tpackage\tlang\tpayload_sha1"]
    rows += ["\t".join([p.url, p.package, p.lang, sha1(p.body)]) for p in crawl_order(pages)]
    return ("\n".join(rows) + "\n").encode("utf-8")


def readme(pages: list[Page], n_cands: dict[str, int], warc_size: int, manifest_size: int) -> bytes:
    by_pkg = collections.Counter(p.package for p in pages)
    by_lang = collections.Counter(p.lang for p in pages)   # identify_language, in candidates()
    words = sorted(len(p.text.split()) for p in pages)
    pkg_rows = "\n".join(f"| `{pkg}` | {VERSION} | `/{root}` | {n_cands[pkg]} | {by_pkg[pkg]} |"
                         for pkg, (root, _, _) in PACKAGES.items())
    langs = ", ".join(f"{lang} {n}" for lang, n in sorted(by_lang.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"""# tests/data/fr-de: a small French/German crawl (GIMP help)

Made by `samples/sample_build/fr_de.py`; do not edit by hand. Rebuild from the repository root
(byte for byte the same):

    apt-get update      # once, if `apt-get download` cannot find the pinned .debs
    {COMMAND}

| file | bytes | what |
| --- | ---: | --- |
| `{WARC_NAME}` | {warc_size:,} | 1 warcinfo + {len(pages)} `response` records, gzip per record |
| `manifest.tsv` | {manifest_size:,} | one line per page: `url`, `package`, `lang`, `payload_sha1` (SHA-1 of the HTML) |

## Sources

The GIMP 2.10 user manual as Debian packages it, downloaded with `apt-get download` and
unpacked with `dpkg-deb -x`:

| package | version | pages from | candidates | taken |
| --- | --- | --- | ---: | ---: |
{pkg_rows}

A candidate is a regular `.html` file of at most {MAX_BODY:,} bytes whose text, extracted as the
corpus stage does (`pipelines/corpus/text.py`: resiliparse `main_content=True`, then
`normalize_text`), has at least {MIN_WORDS} words and is in the package's language by py3langid
with probability at least {MIN_LANG_PROB}. Pages are taken in the order of the SHA-1 of
`<package>:<path>`. URLs are `https://<package>.docs.invalid/<path>`, as in `samples/crawl/`;
WARC-Date and WARC-Record-ID are derived from the URL (`samples/sample_build/warc.py`), and a page
also in `samples/crawl/` (gimp-help-en) has the same record bytes there.

Languages (py3langid, `identify_language` of `pipelines/corpus/text.py` on the extracted text):
{langs}. Extracted words per page: {words[0]} to {words[-1]}, median {words[len(words) // 2]}.

## Licence

The GIMP help is licensed under the GNU Free Documentation License 1.2 or later, with no
Invariant Sections, no Front-Cover Texts and no Back-Cover Texts. The fr/de/en packages have no
copyright file of their own (`/usr/share/doc/<package>` is a symlink to `gimp-help-common`); it is
in `samples/licenses/gimp-help-common.txt`, the full licence in
`samples/licenses/common-licenses/GFDL-1.2`.
""".encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--offline", action="store_true", help="do not call apt-get (the cache must be full)")
    args = ap.parse_args()
    fetch(args.offline)
    check_licenses()
    pages, n_cands = select()
    warc = warc_file(pages)
    table = manifest(pages)
    write_if_changed(OUT / WARC_NAME, warc)
    write_if_changed(OUT / "manifest.tsv", table)
    write_if_changed(OUT / "README.md", readme(pages, n_cands, len(warc), len(table)))
    print(f"wrote {OUT}: {len(pages)} pages, {WARC_NAME} {len(warc):,} bytes", flush=True)


if __name__ == "__main__":
    main()
