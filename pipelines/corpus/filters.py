"""C4 cleaning rules as pure functions, in the TFDS variant and the C4 paper's variant.

`clean_page(text, cfg)` returns (cleaned text, None) to keep or (None, reason) to drop. Line
rules remove lines; page rules drop the page. Both variants share every rule but two numbers:

    variant  min words per kept line  min sentences per kept page  source
    tfds     5                        3                            TFDS `c4_utils.py` (the C4 dataset as built)
    paper    3                        5                            Raffel et al. 2020, section 2.2 (the T5 paper)

Shared rules: a kept line ends in terminal punctuation and not in "...", has no word over 1,000
characters (TFDS), no "javascript", no policy boilerplate, and loses citation markers ([1],
[edit], [citation needed]); a kept page has no "lorem ipsum" and no "{". Blank lines mark
paragraphs: clean_page keeps one between paragraphs that still have kept lines.
The bad-words page rule (both variants: TFDS and the paper's section 2.2) needs the page's
language, so `has_bad_words` is a separate step that clean.process_document runs after language
id. The lists are LDNOOBW per language, shipped in data/badwords/ (see SOURCE.md there).
Gopher and FineWeb rules live in `quality.py`.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources

from lmforge.config import opt, require

_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]", re.I)
_TERMINAL = ('.', '!', '?', '"', '»', '…', '。')
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
# Sentence ends: terminal punctuation followed by whitespace or the end of the text.
_SENTENCE_END = re.compile(r"[.!?…。](?=\s|$)")

# variant -> (min words per line, min sentences per page); see the module docstring for sources.
C4_VARIANTS = {"tfds": (5, 3), "paper": (3, 5)}


@dataclass
class C4Config:
    enabled: bool = opt(True, "apply the C4 line cleaning and page rules (off: text passes unchanged)")
    variant: str = opt("tfds", "which statement of C4: 'tfds' (TFDS c4_utils: >= 5 words/line, >= 3 sentences/page) "
                               "or 'paper' (Raffel et al. 2020 sec. 2.2: >= 3 words/line, >= 5 sentences/page)")
    min_words_per_line: int | None = opt(None, "override the variant's minimum words per kept line (tfds 5, paper 3)")
    min_sentences: int | None = opt(None, "override the variant's minimum sentences per kept page (tfds 3, paper 5)")
    max_word_length: int = opt(1000, "C4 (TFDS): drop lines containing a longer word")
    min_chars: int = opt(200, "lmforge, not C4: drop pages shorter than this after line cleaning (too_short)")
    curly_bracket: bool = opt(True, "C4 (TFDS and paper): drop pages containing '{' (meant to remove code; off keeps "
                                    "documentation with code examples, whose code lines the line rules still remove)")
    bad_words: bool = opt(True, "C4 (TFDS and paper): drop pages containing a word or phrase of the LDNOOBW list for the "
                                "page's identified language (c4_bad_words; lists in pipelines/corpus/data/badwords); "
                                "languages without a list are not filtered")

    def __post_init__(self) -> None:
        require(self.variant in C4_VARIANTS, f"c4 variant must be one of {sorted(C4_VARIANTS)}, got {self.variant!r}")
        words, sentences = C4_VARIANTS[self.variant]
        if self.min_words_per_line is None:
            self.min_words_per_line = words
        if self.min_sentences is None:
            self.min_sentences = sentences
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


def clean_lines(text: str, cfg: C4Config) -> list[str]:
    """The kept lines, with "" between paragraphs: a blank line in `text` becomes one "" if
    lines were kept both before and after it (never at the ends, never two in a row)."""
    out: list[str] = []
    gap = False
    for ln in text.split("\n"):
        if not ln.strip():
            gap = bool(out)
        elif (c := clean_line(ln, cfg)) is not None:
            if gap:
                out.append("")
            out.append(c)
            gap = False
    return out


def clean_page(text: str, cfg: C4Config) -> tuple[str | None, str | None]:
    low = text.lower()
    if "lorem ipsum" in low:
        return None, "c4_lorem_ipsum"
    if cfg.curly_bracket and "{" in text:
        return None, "c4_curly_bracket"
    lines = clean_lines(text, cfg)
    if not lines:
        return None, "c4_no_lines_left"
    page = "\n".join(lines)
    if len(_SENTENCE_END.findall(page)) < cfg.min_sentences:
        return None, "c4_too_few_sentences"
    if len(page) < cfg.min_chars:
        return None, "too_short"
    return page, None


# Languages written without spaces between words: TFDS matches their bad words anywhere.
NO_SPACE_LANGUAGES = ("ja", "th", "zh")


@cache
def bad_words_regex(language: str) -> re.Pattern | None:
    """TFDS c4_utils' matcher for one language, compiled once per process; None without a list.

    One alternation of every entry: flanked by non-word characters (or the text's ends), except
    for ja/th/zh. Measured on the 120 pages of tests/data/tiny: 7 MB/s of text for en (403
    entries), 15 MB/s for ru (151), i.e. well under a millisecond for a typical page.
    """
    words: set[str] = set()
    for f in resources.files("pipelines.corpus").joinpath("data").joinpath("badwords").iterdir():
        if f.name.endswith(".txt") and f.name[:-4].split("-")[0] == language:
            words.update(unicodedata.normalize("NFC", w.strip()).lower()
                         for w in f.read_text(encoding="utf-8").splitlines() if w.strip())
    if not words:
        return None
    alternation = "|".join(map(re.escape, sorted(words)))
    if language in NO_SPACE_LANGUAGES:
        return re.compile(alternation)
    return re.compile(rf"(?:\W|^)({alternation})(?:\W|$)")


def has_bad_words(text: str, language: str) -> bool:
    """True if the lower-cased text contains an entry of `language`'s list (False without a list)."""
    rx = bad_words_regex(language)
    return rx is not None and rx.search(text.lower()) is not None
