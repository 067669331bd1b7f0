"""Paths, the ``Page`` record and the small helpers every source of the sample shares.

Not a source itself: where the sample and its download cache live (``samples/.cache``),
hashing and language id for page selection, writing a file only when its bytes change, running
a download command, and fetching plus unpacking a PyPI sdist (used by the newspaper4k, chardet
and vaderSentiment sources).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from py3langid import classify as langid_classify
from resiliparse.extract.html2text import extract_plain_text

HERE = Path(__file__).resolve().parents[1]      # samples/
REPO = HERE.parent
CACHE = HERE / ".cache"
DEBS = CACHE / "debs"
UNPACKED = CACHE / "unpacked"
SRC = CACHE / "src"
CRAWL = HERE / "crawl"
TINY = REPO / "tests" / "data" / "tiny"
LICENSES = HERE / "licenses"


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


def plain_text(html: str) -> str:
    return extract_plain_text(html)


def lang_of(text: str) -> str:
    text = text.strip()
    if not text:
        return "und"
    return langid_classify(text[:5000])[0]


def sdist_dir(name: str, version: str) -> Path:
    """Where the unpacked sdist of ``name==version`` lives in the cache."""
    return SRC / f"{name}-{version}"


def fetch_sdist(name: str, version: str, offline: bool) -> Path:
    """Download (unless cached) and unpack the sdist of ``name==version``; return its folder."""
    sdist = CACHE / f"{name}-{version}.tar.gz"
    if not sdist.exists():
        if offline:
            sys.exit(f"missing {sdist}")
        run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
             f"{name}=={version}", "-d", str(CACHE)])
    dest = sdist_dir(name, version)
    if not dest.exists():
        SRC.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as tf:
            tf.extractall(SRC, filter="data")
    return dest
