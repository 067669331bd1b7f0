"""Short encyclopedic English texts for `bench corpus`'s agreement check: FOLDOC, the Free On-line
Dictionary of Computing (Debian package dict-foldoc; GFDL 1.1 or later, copyright 1993 Denis Howe;
the package's copyright file comes with it, unpacked in the cache).

Each entry becomes one text as FOLDOC's web pages render it: the headword's definition paragraphs,
each paragraph on one line (the dictd file wraps them at ~65 columns), cross-reference markup
{like this} shown as its words, and without the <category> tag and the trailing (date) line.
Nothing else is changed. Entries are taken in headword order, every `step`-th, from those with at
least `min_chars` characters of text.
"""
from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

PACKAGE = "dict-foldoc"
_DATE = re.compile(r"^\(\d{4}-\d{2}-\d{2}\)$")
_CATEGORY = re.compile(r"^(\d+\.\s*)?(?:<[^>]+>\s*)+")
_XREF = re.compile(r"\{([^{}]*)\}")


def fetch(cache: Path) -> Path:
    """The unpacked package under `cache` (downloaded with apt-get once); its dictd data file."""
    root = cache / PACKAGE
    data = root / "usr" / "share" / "dictd" / "foldoc.dict.dz"
    if data.exists():
        return data
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob(f"{PACKAGE}_*.deb")):
        subprocess.run(["apt-get", "download", PACKAGE], cwd=debs, check=True, capture_output=True)
    deb = sorted(debs.glob(f"{PACKAGE}_*.deb"))[-1]
    tmp = root.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    return data


def parse(dict_text: str) -> list[tuple[str, str]]:
    """(headword, text) per entry of a dictd FOLDOC file: a headword line starts at column 0, its body
    lines are indented; paragraphs are separated by blank lines."""
    entries: list[tuple[str, list[str]]] = []
    for line in dict_text.splitlines():
        if line and not line[0].isspace():
            if entries and not entries[-1][1]:
                continue  # an alternative headword line (e.g. "ADT" under "abstract data type")
            entries.append((line.strip(), []))
        elif entries:
            entries[-1][1].append(line.strip())
    out = []
    for head, body in entries:
        paragraphs, cur = [], []
        for ln in [*body, ""]:
            if ln:
                cur.append(ln)
            elif cur:
                paragraphs.append(" ".join(cur))
                cur = []
        paragraphs = [_XREF.sub(r"\1", _CATEGORY.sub(r"\1", p)).strip() for p in paragraphs if not _DATE.match(p)]
        text = "\n".join(p for p in paragraphs if p)
        if text:
            out.append((head, text))
    return out


def texts(cache: Path, min_chars: int = 200, step: int = 1) -> list[tuple[str, str]]:
    """(id "foldoc:<headword>", text) of every `step`-th entry with at least `min_chars` characters."""
    raw = gzip.decompress(fetch(cache).read_bytes()).decode("utf-8", errors="replace")
    entries = [(f"foldoc:{h}", t) for h, t in parse(raw) if len(t) >= min_chars and not h.startswith("00-database")]
    return entries[::step]
