"""The C4 family: its config, its rules as pure functions (TFDS and paper variants) and two steps.

`clean_page(text, cfg)` returns (cleaned text, None) to keep or (None, reason) to drop. Line
rules remove lines; page rules drop the page. Both variants share every rule but three numbers:

    variant  min words per kept line  min sentences per kept page  end marks     source
    tfds     5                        3                            . ? ! "       TFDS `c4_utils.py` (the C4 dataset as built)
    paper    3                        5                            . ? ! " '     Raffel et al. 2020, section 2.2 (the T5
                                                                                 paper), as datatrove's C4QualityFilter reads it

Shared rules, in TFDS's order per line: a line with a word over 1,000 characters goes; citation
markers ([1], [edit], [citation needed]) are removed; a kept line ends in an end mark and not in an
ellipsis, has enough words, no "javascript" and no policy boilerplate. A line that passes the rules
before them and contains "lorem ipsum" or "{" drops the whole page (TFDS and datatrove check these
on surviving lines only, so a page whose "{" sits in a dropped line is kept). A page needs enough
sentences in its kept lines, counted per line as spaCy's sentencizer counts them (`sentences`).

Blank lines mark paragraphs: clean_page keeps one between paragraphs that still have kept lines, so
Gopher's paragraph rules see the page's paragraphs. This is a deliberate difference from TFDS and
datatrove, which join kept lines with one newline: Gopher's character fractions then divide by a
text longer by its blank lines, which changed 3 of 2,006 crawl pages' repetition decisions (pages
within that margin of a threshold; `bench corpus` lists them). The 200-character minimum
(`min_chars`, too_short) is lmforge's own, not C4's.
`bench corpus` measures keep/drop agreement with datatrove's filters (docs/BENCHMARKS.md).
The bad-words page rule (both variants: TFDS and the paper's section 2.2) needs the page's
language, so it is a step of its own, BAD_WORDS, which registry.STEPS puts after the language
step; CLEAN (line cleaning and the other page rules) comes before it, so that language id reads
the cleaned page. Both read CorpusConfig.c4. The lists are LDNOOBW per language, shipped in
data/badwords/ (see SOURCE.md there).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from common.config import opt, require
from pipelines.corpus.steps.base import Decision, Page, Step, filter_step, trie_regex
from pipelines.corpus.words import sentence_count

_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]", re.I)
# A kept line's last character (TFDS c4_utils `_END_MARKS`: . ? ! and the double quote). The paper
# variant adds the single quote, as datatrove's C4QualityFilter reads the paper's "end quotation
# mark". lmforge adds » and 。, which end sentences in Russian and CJK pages (a deliberate choice:
# the references are English-only). A line ending in an ellipsis ("..." or "…") is never kept:
# "…" is not an end mark in TFDS or datatrove either.
_END_MARKS = {"tfds": (".", "?", "!", '"', "»", "。"), "paper": (".", "?", "!", '"', "'", "»", "。")}
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")

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


def _c4_line(line: str, cfg: C4Config) -> tuple[str | None, str | None]:
    """One line through TFDS c4_utils' rules, in its order -> (the line if kept, a reason that drops the
    whole page). Only a line that passes the line rules before them can drop the page: lorem ipsum
    and "{" are page rules checked on surviving lines, as in TFDS and datatrove."""
    line = line.strip()
    words = line.split()
    if words and max(map(len, words)) > cfg.max_word_length:
        return None, None
    if "[" in line:  # every citation mark has one; most lines do not
        line = _CITATION.sub("", line)
    if not line.endswith(_END_MARKS[cfg.variant]) or line.endswith("..."):
        return None, None
    if len(line.split()) < cfg.min_words_per_line:
        return None, None
    low = line.lower()
    if "lorem ipsum" in low:
        return None, "c4_lorem_ipsum"
    if "javascript" in low:
        return None, None
    if cfg.curly_bracket and "{" in line:
        return None, "c4_curly_bracket"
    if any(p in low for p in _POLICY):
        return None, None
    return line, None


def clean_line(line: str, cfg: C4Config) -> str | None:
    """The line as C4 keeps it, or None. A kept line containing "lorem ipsum" or "{" drops its whole
    page instead (clean_page)."""
    return _c4_line(line, cfg)[0]


def _clean(text: str, cfg: C4Config) -> tuple[list[str], str | None]:
    out: list[str] = []
    gap = False
    for ln in text.split("\n"):
        if not ln.strip():
            gap = bool(out)
            continue
        kept, page_reason = _c4_line(ln, cfg)
        if page_reason is not None:
            return [], page_reason
        if kept is not None:
            if gap:
                out.append("")
            out.append(kept)
            gap = False
    return out, None


def clean_lines(text: str, cfg: C4Config) -> list[str]:
    """The kept lines, with "" between paragraphs: a blank line in `text` becomes one "" if
    lines were kept both before and after it (never at the ends, never two in a row).
    Empty if a page rule drops the page."""
    return _clean(text, cfg)[0]


def sentences(lines: list[str], enough: int | None = None) -> int:
    """Sentences in the kept lines, counted line by line as spaCy's Sentencizer counts them (words.py),
    which is how datatrove's C4QualityFilter counts (`split_into_sentences` per kept line). A kept
    line is at least one sentence; "e.g.", "U.S." or "Mr." end none, being one token each. TFDS
    c4_utils counts sentences of the whole page with NLTK's punkt model instead, which lmforge does
    not ship (a pickled model); both variants count as datatrove does. With `enough`, counting
    stops once that many are found (the page rule only asks whether there are enough)."""
    n = 0
    for ln in lines:
        if ln:
            n += sentence_count(ln)
            if enough is not None and n >= enough:
                break
    return n


def clean_page(text: str, cfg: C4Config) -> tuple[str | None, str | None]:
    lines, reason = _clean(text, cfg)
    if reason is not None:
        return None, reason
    if not lines:
        return None, "c4_no_lines_left"
    if sentences(lines, enough=cfg.min_sentences) < cfg.min_sentences:
        return None, "c4_too_few_sentences"
    page = "\n".join(lines)
    if len(page) < cfg.min_chars:
        return None, "too_short"
    return page, None


# Languages written without spaces between words: TFDS matches their bad words anywhere.
NO_SPACE_LANGUAGES = ("ja", "th", "zh")


@cache
def bad_words_regex(language: str) -> re.Pattern | None:
    """TFDS c4_utils' matcher for one language, compiled once per process; None without a list.

    One alternation of every entry: flanked by non-word characters (or the text's ends), except
    for ja/th/zh. The alternation is written as the entries' trie (base.trie_regex), the same
    language: 0.07 ms a page of samples/crawl for en (403 entries) against 0.34 ms as a flat list.
    """
    words: set[str] = set()
    for f in resources.files("pipelines.corpus").joinpath("data").joinpath("badwords").iterdir():
        if f.name.endswith(".txt") and f.name[:-4].split("-")[0] == language:
            words.update(unicodedata.normalize("NFC", w.strip()).lower()
                         for w in f.read_text(encoding="utf-8").splitlines() if w.strip())
    if not words:
        return None
    alternation = trie_regex(words)  # the flat alternation's language, 5x faster to search (base.trie_regex)
    if language in NO_SPACE_LANGUAGES:
        return re.compile(alternation)
    return re.compile(rf"(?:\W|^)({alternation})(?:\W|$)")


def has_bad_words(text: str, language: str) -> bool:
    """True if the lower-cased text contains an entry of `language`'s list (False without a list)."""
    rx = bad_words_regex(language)
    return rx is not None and rx.search(text.lower()) is not None


# ---------------------------------------------------------------------------------------------
# The steps
# ---------------------------------------------------------------------------------------------

def _clean_step(page: Page, cfg: C4Config) -> Decision:
    text, reason = clean_page(page.text, cfg)
    return (None, reason) if text is None else (replace(page, text=text), None)


HELP = "C4 line and page rules (tfds or paper variant)"
CLEAN = Step("c4", _clean_step, C4Config, HELP)
"""Line cleaning and the page rules: rewrites the page (the later steps see the kept lines)."""
BAD_WORDS = Step("c4", filter_step(lambda page, cfg: "c4_bad_words" if has_bad_words(page.text, page.language) else None),
                 C4Config, HELP, enabled=lambda cfg: cfg.enabled and cfg.bad_words)
"""The LDNOOBW list of the page's language: after the language step."""
