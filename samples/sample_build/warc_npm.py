"""Source: the npm package ``warc`` -> ``samples/crawl/commoncrawl/`` (and one WET file in the tiny slice).

Its ``test/fixtures`` are real Common Crawl WARC / WAT / WET excerpts (CC-MAIN-2014-35), fetched
with ``npm pack`` at a pinned version and copied unchanged. Licence: the package's ``license``
field is BSD-3-Clause (``samples/licenses/warc-npm.txt``); the content is crawled web pages.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
from pathlib import Path

from .common import CACHE, CRAWL, SRC, run, write_if_changed

NPM_PACKAGE = ("warc", "1.0.1")
PACKAGE_DIR = SRC / f"{NPM_PACKAGE[0]}-{NPM_PACKAGE[1]}"
FIXTURES = PACKAGE_DIR / "test" / "fixtures"


def fetch(offline: bool) -> dict:
    """Make sure the npm tarball is in the cache and unpacked; return {name: version used}."""
    name, version = NPM_PACKAGE
    tgz = CACHE / f"{name}-{version}.tgz"
    if not tgz.exists():
        if offline:
            sys.exit(f"missing {tgz}")
        run(["npm", "pack", f"{name}@{version}"], cwd=CACHE)
    dest = PACKAGE_DIR
    if not dest.exists():
        tmp = SRC / "_npm_tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(tgz) as tf:
            tf.extractall(tmp, filter="data")
        os.replace(tmp / "package", dest)
        shutil.rmtree(tmp)
    return {name + " (npm)": version}


def write_fixtures() -> None:
    """The Common Crawl fixtures, unchanged, into ``samples/crawl/commoncrawl/``."""
    for f in sorted(FIXTURES.iterdir()):
        write_if_changed(CRAWL / "commoncrawl" / f.name, f.read_bytes())


def write_licenses(lic: Path) -> None:
    write_if_changed(lic / "warc-npm.txt", (PACKAGE_DIR / "LICENSE").read_bytes())
