"""Source: Debian documentation packages -> ``samples/crawl/debian-docs-NNN.warc.gz``.

HTML pages of the LibreOffice help (en-US, en-GB, ru), the GIMP help (en, en-GB, ru), the
Debian Installation Guide (amd64, arm64; en and ru) and the Debian Administrator's Handbook
(en-US, ru-RU), at pinned versions fetched with ``apt-get download`` and unpacked with
``dpkg-deb -x``. Pages are chosen by the SHA-1 of a fixed key among those with enough text in
the package's language; en-GB / arm64 twins of chosen pages give the near-duplicate pairs, and
a few unchosen pages fill ``broken-000.warc.gz``. Licences (see ``samples/README.md``):
LibreOffice help MPL-2.0; GIMP help GFDL-1.2+, no invariant sections; Installation Guide
GPL-2; Handbook GPL-2.0+ or CC-BY-SA-3.0. Each package's Debian copyright file and the full
texts it refers to are copied into ``samples/licenses/``.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .common import DEBS, UNPACKED, Page, lang_of, plain_text, run, sha1, write_if_changed
from .warc import crawl_order, record_member

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
# Full texts that the Debian copyright files refer to, from this machine's common-licenses.
COMMON_LICENSES = ("GPL-2", "GFDL-1.2", "MPL-2.0")

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

DESCRIPTION = ("HTML pages from Debian documentation packages (LibreOffice help, GIMP help, "
               "Debian installation guide, Debian Administrator's Handbook)")


def deb_path(pkg: str, version: str) -> Path | None:
    want = f"{pkg}_{version.replace(':', '%3a')}_all.deb"
    p = DEBS / want
    return p if p.exists() else None


def fetch(offline: bool) -> dict:
    """Make sure every .deb is in the cache and unpacked; return {package: version used}."""
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
        unpack(pkg, p)
    return used


def unpack(pkg: str, deb: Path) -> None:
    """`deb` unpacked into UNPACKED/<pkg> with `dpkg-deb -x`, unless that .deb is already there."""
    dest = UNPACKED / pkg
    stamp = dest / ".unpacked-from"
    if not stamp.exists() or stamp.read_text() != deb.name:
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        run(["dpkg-deb", "-x", str(deb), str(dest)])
        stamp.write_text(deb.name)


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


def write_licenses(lic: Path) -> None:
    """Each package's Debian copyright file, and the full licence texts they refer to."""
    for pkg in DEB_VERSIONS:
        cp = UNPACKED / pkg / "usr" / "share" / "doc" / pkg / "copyright"
        if cp.exists() and not cp.is_symlink():
            write_if_changed(lic / f"{pkg}.txt", cp.read_bytes())
    for name in COMMON_LICENSES:
        src = Path("/usr/share/common-licenses") / name
        if src.exists():
            write_if_changed(lic / "common-licenses" / name, src.read_bytes())
