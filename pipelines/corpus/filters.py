"""C4 cleaning rules as pure functions (TFDS `c4_utils` variant).

`clean_page(text, cfg)` returns (cleaned text, None) to keep or (None, reason) to drop. Line
rules remove lines; page rules drop the page. Thresholds follow TFDS C4: a kept line ends in
terminal punctuation, has >= 5 words, no word over 1,000 characters, no "javascript", no
policy boilerplate; a kept page has >= 3 sentences, no "lorem ipsum" and no "{".
Bad-words lists, the C4-paper variant, Gopher and FineWeb rules come with issue 3.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lmforge.config import opt, require

_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]", re.I)
_TERMINAL = ('.', '!', '?', '"', '»', '…', '。')
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
# Sentence ends: terminal punctuation followed by whitespace or the end of the text.
_SENTENCE_END = re.compile(r"[.!?…。](?=\s|$)")


@dataclass
class C4Config:
    min_words_per_line: int = opt(5, "C4 (TFDS): drop lines with fewer words")
    min_sentences: int = opt(3, "C4 (TFDS): drop pages with fewer sentences")
    max_word_length: int = opt(1000, "C4: drop lines containing a longer word")
    min_chars: int = opt(200, "drop pages shorter than this after line cleaning")

    def __post_init__(self) -> None:
        require(self.min_words_per_line >= 0 and self.min_sentences >= 0, "C4 thresholds must be >= 0")
        require(self.max_word_length > 0, "max_word_length must be positive")


def clean_line(line: str, cfg: C4Config) -> str | None:
    line = _CITATION.sub("", line).strip()
    if not line.endswith(_TERMINAL) or line.endswith("..."):
        return None
    words = line.split()
    if len(words) < cfg.min_words_per_line or max(map(len, words)) > cfg.max_word_length:
        return None
    low = line.lower()
    if "javascript" in low or any(p in low for p in _POLICY):
        return None
    return line


def clean_page(text: str, cfg: C4Config) -> tuple[str | None, str | None]:
    low = text.lower()
    if "lorem ipsum" in low:
        return None, "c4_lorem_ipsum"
    if "{" in text:
        return None, "c4_curly_bracket"
    lines = [c for ln in text.split("\n") if (c := clean_line(ln, cfg)) is not None]
    if not lines:
        return None, "c4_no_lines_left"
    page = "\n".join(lines)
    if len(_SENTENCE_END.findall(page)) < cfg.min_sentences:
        return None, "c4_too_few_sentences"
    if len(page) < cfg.min_chars:
        return None, "too_short"
    return page, None
