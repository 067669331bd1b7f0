"""C4 line-level deduplication (TFDS `remove_duplicate_text`), pure steps.

A line that appears on several pages of a snapshot (navigation, footers, boilerplate
disclaimers that survived the line rules) is kept on one page only. The page that keeps it is
chosen deterministically as in TFDS: the smallest hash of the page id, which spreads the kept
copies over pages instead of favouring small ids. Pages whose remaining text then fails the
C4 page rules (too few sentences) are dropped with reason `c4_line_dedup:<rule>`.

Lines are compared after case folding and whitespace folding; blank lines (paragraph breaks)
are never keys. Repeats inside one page are left to Gopher's repetition rules.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator


def line_key(line: str) -> bytes:
    return hashlib.blake2b(" ".join(line.casefold().split()).encode(), digest_size=10).digest()


def line_keys(text: str) -> set[bytes]:
    return {line_key(ln) for ln in text.split("\n") if ln.strip()}


def owner_order(doc_id: str) -> bytes:
    """TFDS keeps a repeated line on the page with the smallest hash of its URL; we hash the id."""
    return hashlib.blake2b(doc_id.encode(), digest_size=8).digest() + doc_id.encode()


def losers(key: bytes, doc_ids: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """(doc id, line key) for every page that must drop this line: all but its owner."""
    ids = sorted(set(doc_ids), key=owner_order)
    for d in ids[1:]:
        yield d, key


def remove_lines(text: str, keys: set[bytes]) -> str:
    """The text without lines whose key is in `keys`; paragraph breaks kept, never doubled."""
    out: list[str] = []
    for ln in text.split("\n"):
        if ln.strip():
            if line_key(ln) not in keys:
                out.append(ln)
        elif out and out[-1] != "":
            out.append("")
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out)
