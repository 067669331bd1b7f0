"""Writes ``samples/crawl/``: one WARC file per source (the Debian pages in several), the broken file, the fixtures.

Not a source itself: it takes the pages the source modules chose, writes them in crawl order
with a ``warcinfo`` record that describes their source, builds ``broken-000.warc.gz`` (five
valid records, then the gzip member of a sixth cut in half) and removes WARC files that an
earlier run wrote but this one did not.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import chardet_tests, debian_docs, newspaper4k, warc_npm
from .common import CRAWL, Page, write_if_changed
from .warc import crawl_order, record_member, warc_bytes

# file-name prefix -> the warcinfo description of the source its pages come from
DESCRIPTIONS = {
    "debian": debian_docs.DESCRIPTION,
    "news": newspaper4k.DESCRIPTION,
    "encodings": chardet_tests.DESCRIPTION,
}


@dataclass
class Broken:
    """What went into ``broken-000.warc.gz``."""

    valid: list[Page]
    """The complete records, in file order."""
    victim: Page
    """The page whose gzip member is cut."""
    member: bytes
    """The victim's whole gzip member."""
    cut: bytes
    """Its first half, as written at the end of the file."""


def crawl_outputs(deb_sel, news, enc) -> dict[str, list[Page]]:
    """File name -> pages in the order they are written."""
    outputs: dict[str, list[Page]] = {}
    outputs.update(debian_docs.write_debian_files(deb_sel))
    outputs["news-000.warc.gz"] = crawl_order(news)
    outputs["encodings-000.warc.gz"] = crawl_order(enc)
    return outputs


def write_crawl(outputs: dict[str, list[Page]], leftovers: list[Page]) -> Broken:
    expected = set()
    for name, pages in outputs.items():
        desc = DESCRIPTIONS[name.split("-")[0]]
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
    warc_npm.write_fixtures()
    for stale in sorted(CRAWL.glob("*.warc.gz")):
        if stale.name not in expected:
            print("  removing stale", stale)
            stale.unlink()
    return Broken(valid, victim, member, cut)
