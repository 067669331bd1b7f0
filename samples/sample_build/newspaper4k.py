"""Source: newspaper4k's test pages -> ``samples/crawl/news-000.warc.gz`` and ``samples/gold/newspaper4k/``.

The HTML files under ``tests/data/html`` of the pinned newspaper4k sdist (from PyPI), each at
its original URL where newspaper4k's test metadata or tests give one, and the reference texts
under ``tests/data/txt`` as gold extractions (``<stem>.txt`` plus ``index.json``, URL -> file).
Licence: the package is MIT (``samples/licenses/newspaper4k.txt``); the pages themselves are
third-party news content (CNN, Wired, Time, ...) kept in newspaper4k's tests.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import HERE, Page, lang_of, plain_text, sdist_dir, write_if_changed

SDIST = ("newspaper4k", "0.9.6")
DESCRIPTION = "HTML pages from newspaper4k's test data"
GOLD = HERE / "gold" / "newspaper4k"

# URLs for newspaper4k pages without a "url" in tests/data/metadata/<stem>.json,
# taken from newspaper4k's tests/conftest.py and tests/integration/test_source.py.
NEWS_URLS_FROM_TESTS = {
    "chinese_article": "http://news.sohu.com/20050601/n225789219.shtml",
    "latvian_article": "https://www.lsm.lv/raksts/zinas/arzemes/norvegija-pec-zemes-nogruvuma-pieci-bojagajusie.a387519/",
    "burmese_article": "https://www.bbc.com/burmese/burma-45989453",
    "cnn_main_site": "http://cnn.com",
    "yahoo_main_site": "http://uk.yahoo.com",
}


def news_pages():
    """Return (pages, gold) where gold is {url: (stem, reference text bytes)}."""
    base = sdist_dir(*SDIST) / "tests" / "data"
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
                          f"newspaper4k-{SDIST[1]}/tests/data/html/{path.name}",
                          lang_of(text), text))
        txt = base / "txt" / f"{stem}.txt"
        if txt.exists():
            gold[url] = (stem, txt.read_bytes())
    return pages, gold


def write_gold_index(folder: Path, index: dict) -> None:
    write_if_changed(folder / "index.json",
                     (json.dumps(index, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode())


def write_gold(gold: dict) -> None:
    """The gold texts as ``samples/gold/newspaper4k/<stem>.txt`` plus ``index.json``."""
    index = {}
    for url, (stem, data) in sorted(gold.items()):
        write_if_changed(GOLD / f"{stem}.txt", data)
        index[url] = f"{stem}.txt"
    write_gold_index(GOLD, index)


def write_licenses(lic: Path) -> None:
    write_if_changed(lic / "newspaper4k.txt", (sdist_dir(*SDIST) / "LICENSE").read_bytes())
