"""Gopher quality, Gopher repetition and FineWeb rules as pure functions over cleaned text.

Each family is a function `(text, cfg[, language]) -> None | reason`: None keeps the document,
a reason names the first rule it fails. The rules and their order follow datatrove's
GopherRepetitionFilter, GopherQualityFilter and FineWebQualityFilter; the defaults are the
published thresholds:
  Gopher     Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from
             Training Gopher", arXiv:2112.11446, appendix A.1.1 and Table A1.
  FineWeb    Penedo et al. 2024, arXiv:2406.17557 ("custom filters"), as datatrove's
             FineWebQualityFilter defaults, which FineWeb's own pipeline script uses (for the
             duplicated-line characters the write-up states 0.1; the datatrove default is 0.01).

Words are spaCy's English tokens, punctuation included, as datatrove counts them (words.py: spaCy's
tokenizer re-implemented over its exported rules; identical tokens on all 8,619 pages of `bench
corpus`). Where a rule is about words proper, tokens made only of punctuation are left out, as
datatrove's "non-symbol words" (word count and mean word length); the ratios with words in the
denominator (hashes, ellipses, alphabetic words) count every token, as datatrove does. Earlier
lmforge counted `\\w+` runs, which left punctuation out of every ratio and changed 5% of the crawl
pages' Gopher decisions against datatrove's. datatrove itself was considered as a dependency: it
pulls in NLTK/spaCy (~90% of its filter time is spaCy's tokenizer) and its filters are pipeline
steps over its own Document type, not functions we could call on a string.

Two differences from datatrove remain, both deliberate and measured by `bench corpus`:
  - line fractions (bullets, ellipses) leave blank lines out: they separate paragraphs in lmforge's
    text; datatrove's text (trafilatura's, or its C4 filter's output) has none;
  - FineWeb's line-break ratio counts line breaks between non-blank lines, for the same reason.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from common.config import opt, require
from pipelines.corpus.words import english

_PARAGRAPH = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")
_BULLETS = ("•", "-")  # datatrove's bullet marks
_ELLIPSES = ("...", "…")
GOPHER_STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]  # Gopher A.1.1


def _fraction(name: str, value: float) -> None:
    require(0.0 <= value <= 1.0, f"{name} must be a fraction in [0, 1], got {value}")


# ---------------------------------------------------------------------------------------------
# Gopher repetition (Table A1)
# ---------------------------------------------------------------------------------------------

@dataclass
class GopherRepetitionConfig:
    enabled: bool = opt(True, "apply the Gopher repetition rules")
    max_dup_line_frac: float = opt(0.30, "Gopher Table A1: max fraction of lines that repeat an earlier line")
    max_dup_line_char_frac: float = opt(0.20, "Gopher Table A1: max fraction of characters in repeated lines")
    max_dup_para_frac: float = opt(0.30, "Gopher Table A1: max fraction of paragraphs (blocks between blank lines, "
                                         "i.e. <p> and heading blocks of the page) that repeat an earlier one")
    max_dup_para_char_frac: float = opt(0.20, "Gopher Table A1: max fraction of characters in repeated paragraphs")
    top_ngram_sizes: list[int] = opt([2, 3, 4], "Gopher Table A1: n for the top n-gram rules")
    top_ngram_max_frac: list[float] = opt([0.20, 0.18, 0.16], "Gopher Table A1: max fraction of characters in the most frequent n-gram, one per top_ngram_sizes")
    dup_ngram_sizes: list[int] = opt([5, 6, 7, 8, 9, 10], "Gopher Table A1: n for the duplicated n-gram rules")
    dup_ngram_max_frac: list[float] = opt([0.15, 0.14, 0.13, 0.12, 0.11, 0.10], "Gopher Table A1: max fraction of characters in duplicated n-grams, one per dup_ngram_sizes")

    def __post_init__(self) -> None:
        for name in ("max_dup_line_frac", "max_dup_line_char_frac", "max_dup_para_frac", "max_dup_para_char_frac"):
            _fraction(name, getattr(self, name))
        for sizes, fracs in (("top_ngram_sizes", "top_ngram_max_frac"), ("dup_ngram_sizes", "dup_ngram_max_frac")):
            require(len(getattr(self, sizes)) == len(getattr(self, fracs)), f"{sizes} and {fracs} need the same length")
            require(all(n >= 1 for n in getattr(self, sizes)), f"{sizes} must be >= 1")
            for f in getattr(self, fracs):
                _fraction(fracs, f)


def duplicates(items: list[str]) -> tuple[int, int]:
    """(number of items equal to an earlier item, characters in them): datatrove's find_duplicates."""
    seen: set[str] = set()
    n = chars = 0
    for x in items:
        if x in seen:
            n += 1
            chars += len(x)
        else:
            seen.add(x)
    return n, chars


_P = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier of the rolling n-gram key


class NGramKeys:
    """One 64-bit key per n-gram of `words`, for n = 1, 2, ... in turn: keys(n)[i] stands for
    words[i:i + n]. Built incrementally in numpy, key_n[i] = key_{n-1}[i] * P + hash(words[i+n-1])
    (mod 2^64), so each n costs one vector operation whatever n is; counting and finding repeats
    are numpy's too (np.unique). Two different n-grams share a key with probability ~2^-64 per
    pair for ordinary text, far below anything a ratio threshold can notice (a polynomial key
    modulo 2^64 can be made to collide by a page built for it; a rule over repetition is no
    security boundary)."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self._ids = np.fromiter(map(hash, words), dtype=np.int64, count=len(words)).view(np.uint64)
        self._n, self._keys = 1, self._ids
        self._cum: list[int] | None = None

    def __call__(self, n: int) -> np.ndarray:
        if n < self._n:
            self._n, self._keys = 1, self._ids
        while self._n < n and len(self._keys):
            self._keys = self._keys[:-1] * _P + self._ids[self._n:]
            self._n += 1
        return self._keys if self._n == n else self._keys[:0]

    @property
    def cum(self) -> list[int]:
        """cum[j] - cum[i] = characters in words[i:j]."""
        if self._cum is None:
            self._cum = [0, *accumulate(map(len, self.words))]
        return self._cum


def top_ngram_chars(words: list[str], n: int, keys: NGramKeys | None = None) -> int:
    """Characters covered by the most frequent n-gram: len(" ".join(gram)) * count, as datatrove
    (ties go to the n-gram seen first, as Counter.most_common)."""
    keys = keys or NGramKeys(words)
    grams = keys(n)
    if not len(grams):
        return 0
    _, first, counts = np.unique(grams, return_index=True, return_counts=True)
    top = int(counts.max())
    i = int(first[counts == top].min())
    return (keys.cum[i + n] - keys.cum[i] + n - 1) * top


def dup_ngram_chars(words: list[str], n: int, keys: NGramKeys | None = None) -> int:
    """Characters (spaces excluded) in n-grams that repeat an earlier n-gram, as datatrove's
    find_all_duplicate: scan left to right; on a repeat count its characters and jump n words,
    so overlapping repeats are not counted twice.

    datatrove keys an n-gram by its words joined without spaces ("".join), lmforge by the words
    themselves: two different n-grams that concatenate to the same characters (["a", "bc"] and
    ["ab", "c"]) repeat there and not here. No decision in `bench corpus` differs (Gopher repetition agrees on 100% of both page sets)."""
    return _dup_ngram_chars(words, n, keys or NGramKeys(words)) or 0


def _dup_ngram_chars(words: list[str], n: int, keys: NGramKeys) -> int | None:
    """dup_ngram_chars, or None if no n-gram occurs twice (then no longer one does either)."""
    grams = keys(n)
    _, first, inverse = np.unique(grams, return_index=True, return_inverse=True)
    if len(first) == len(grams):
        return None
    # The scan only decides something at an n-gram that occurred before (a "repeat" position, one
    # whose key's first index is earlier): every other n-gram is new and just joins `seen`. So walk
    # the repeat positions, adding the stretches between them in one step.
    repeats = np.flatnonzero(first[inverse] != np.arange(len(grams))).tolist()
    g = grams.tolist()
    cum = keys.cum
    seen: set[int] = set()
    chars = i = k = 0
    while k < len(repeats):
        j = repeats[k]
        seen.update(g[i:j])
        if g[j] in seen:
            chars += cum[j + n] - cum[j]
            i = j + n
            k = bisect_left(repeats, i, k + 1)  # repeats inside this one are skipped, as datatrove's jump skips them
        else:  # its earlier occurrence was skipped: it is new to the scan
            seen.add(g[j])
            i = j + 1
            k += 1
    return chars


def gopher_repetition(text: str, cfg: GopherRepetitionConfig) -> str | None:
    """None to keep, else gopher_rep_<rule>. Paragraphs, lines, top n-grams, duplicated n-grams."""
    if not text:
        return None
    total = len(text)
    paragraphs = _PARAGRAPH.split(text.strip())
    n, chars = duplicates(paragraphs)
    if n / len(paragraphs) > cfg.max_dup_para_frac:
        return "gopher_rep_dup_para_frac"
    if chars / total > cfg.max_dup_para_char_frac:
        return "gopher_rep_dup_para_char_frac"
    lines = _LINES.split(text)
    n, chars = duplicates(lines)
    if n / len(lines) > cfg.max_dup_line_frac:
        return "gopher_rep_dup_line_frac"
    if chars / total > cfg.max_dup_line_char_frac:
        return "gopher_rep_dup_line_char_frac"
    words = english().tokens(text)
    keys = NGramKeys(words)
    for n, frac in zip(cfg.top_ngram_sizes, cfg.top_ngram_max_frac):
        if top_ngram_chars(words, n, keys) / total > frac:
            return f"gopher_rep_top_{n}gram"
    unrepeated = None  # the smallest n with no repeated n-gram: no longer n-gram repeats either
    for n, frac in zip(cfg.dup_ngram_sizes, cfg.dup_ngram_max_frac):
        if unrepeated is not None and n >= unrepeated:
            continue
        chars = _dup_ngram_chars(words, n, keys)
        if chars is None:
            unrepeated = n
        elif chars / total > frac:
            return f"gopher_rep_dup_{n}gram"
    return None


# ---------------------------------------------------------------------------------------------
# Gopher quality (appendix A.1.1)
# ---------------------------------------------------------------------------------------------

@dataclass
class GopherQualityConfig:
    enabled: bool = opt(True, "apply the Gopher quality rules")
    min_words: int = opt(50, "Gopher A.1.1: drop documents with fewer words (spaCy tokens not made only of punctuation, as datatrove)")
    max_words: int = opt(100_000, "Gopher A.1.1: drop documents with more words")
    min_mean_word_length: float = opt(3.0, "Gopher A.1.1: drop documents whose mean word length (characters) is lower")
    max_mean_word_length: float = opt(10.0, "Gopher A.1.1: drop documents whose mean word length (characters) is higher")
    max_symbol_word_ratio: float = opt(0.1, "Gopher A.1.1: max ratio of '#' to tokens, and of ellipses ('...' or '…') to tokens "
                                                 "(spaCy tokens, punctuation included, as datatrove)")
    max_bullet_lines_frac: float = opt(0.9, "Gopher A.1.1: max fraction of non-blank lines starting with a bullet ('•' or '-', as datatrove)")
    max_ellipsis_lines_frac: float = opt(0.3, "Gopher A.1.1: max fraction of non-blank lines ending with an ellipsis")
    min_alpha_words_frac: float = opt(0.8, "Gopher A.1.1: min fraction of tokens containing a letter (spaCy tokens, "
                                                "punctuation and numbers included, as datatrove; lower it for "
                                                "punctuation-rich languages)")
    min_stop_words: int = opt(2, "Gopher A.1.1: min number of distinct stop_words present (0 turns the rule off)")
    stop_words: list[str] = opt(GOPHER_STOP_WORDS, "Gopher A.1.1: the English stop words (case-sensitive, as datatrove)")
    stop_words_languages: list[str] = opt(["en"], "apply the stop-word rule only to documents identified as these languages "
                                                  "(the list is English; for other languages the rule is skipped)")

    def __post_init__(self) -> None:
        require(0 <= self.min_words <= self.max_words, "gopher_quality: need 0 <= min_words <= max_words")
        require(0 <= self.min_mean_word_length <= self.max_mean_word_length,
                "gopher_quality: need 0 <= min_mean_word_length <= max_mean_word_length")
        require(self.max_symbol_word_ratio >= 0, "gopher_quality: max_symbol_word_ratio must be >= 0")
        for name in ("max_bullet_lines_frac", "max_ellipsis_lines_frac", "min_alpha_words_frac"):
            _fraction(name, getattr(self, name))
        require(self.min_stop_words >= 0, "gopher_quality: min_stop_words must be >= 0")


def gopher_quality(text: str, cfg: GopherQualityConfig, language: str) -> str | None:
    """None to keep, else gopher_<rule>. `language` (ISO 639-1) gates the English stop-word rule."""
    words = english().tokens(text)
    n = len(words)
    # Word count and mean length over tokens that are not all punctuation; the ratios below over
    # every token (datatrove's GopherQualityFilter: non_symbol_words and words).
    n_words, n_chars, n_alpha = english().word_stats(words)
    if not cfg.min_words <= n_words <= cfg.max_words or n_words == 0:
        return "gopher_word_count"
    if not cfg.min_mean_word_length <= n_chars / n_words <= cfg.max_mean_word_length:
        return "gopher_mean_word_length"
    if text.count("#") / n > cfg.max_symbol_word_ratio:
        return "gopher_hash_ratio"
    if (text.count("...") + text.count("…")) / n > cfg.max_symbol_word_ratio:
        return "gopher_ellipsis_ratio"
    # Blank lines only separate paragraphs: counting them would dilute the line fractions
    # (datatrove counts them, but its text, trafilatura's, has no blank lines).
    lines = [ln for ln in text.splitlines() if ln.strip()] or [""]
    if sum(ln.lstrip().startswith(_BULLETS) for ln in lines) / len(lines) > cfg.max_bullet_lines_frac:
        return "gopher_bullet_lines"
    if sum(ln.rstrip().endswith(_ELLIPSES) for ln in lines) / len(lines) > cfg.max_ellipsis_lines_frac:
        return "gopher_ellipsis_lines"
    if n_alpha / n < cfg.min_alpha_words_frac:
        return "gopher_alpha_words"
    if language in cfg.stop_words_languages:
        # "At least two of the following English words" (Gopher A.1.1): distinct words, as datatrove
        # counts them (a page saying "the" twice has one of them).
        if len(set(cfg.stop_words).intersection(words)) < cfg.min_stop_words:
            return "gopher_stop_words"
    return None


# ---------------------------------------------------------------------------------------------
# FineWeb (Penedo et al. 2024)
# ---------------------------------------------------------------------------------------------

@dataclass
class FineWebConfig:
    enabled: bool = opt(True, "apply the FineWeb quality rules")
    min_line_punct_frac: float = opt(0.12, "FineWeb: drop documents where a smaller fraction of lines ends in line_end_chars")
    line_end_chars: str = opt(".'\"!?", "FineWeb: the characters that count as a line's terminal punctuation "
                                        "(FineWeb's release set; newer datatrove uses a wider multilingual set)")
    max_short_line_frac: float = opt(0.67, "FineWeb: drop documents where a larger fraction of lines is short")
    short_line_chars: int = opt(30, "FineWeb: a line of at most this many characters is short")
    max_char_dup_frac: float = opt(0.01, "FineWeb (datatrove default; the paper states 0.1): max fraction of "
                                         "characters (newlines excluded) in lines that repeat an earlier line")
    max_newline_word_ratio: float = opt(0.3, "FineWeb: max ratio of line breaks to words (list-like pages); "
                                             "blank lines between paragraphs are not counted")

    def __post_init__(self) -> None:
        for name in ("min_line_punct_frac", "max_short_line_frac", "max_char_dup_frac"):
            _fraction(name, getattr(self, name))
        require(bool(self.line_end_chars), "fineweb: line_end_chars must not be empty")
        require(self.short_line_chars >= 0 and self.max_newline_word_ratio >= 0, "fineweb thresholds must be >= 0")


def fineweb_quality(text: str, cfg: FineWebConfig) -> str | None:
    """None to keep, else fineweb_<rule>. Inequalities as current datatrove: a document at a
    threshold is kept (the FineWeb release dropped at equality for the first three rules)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return "fineweb_line_punct_ratio"  # nothing to measure; datatrove says "empty"
    ends = tuple(cfg.line_end_chars)
    if sum(ln.endswith(ends) for ln in lines) / len(lines) < cfg.min_line_punct_frac:
        return "fineweb_line_punct_ratio"
    if sum(len(ln) <= cfg.short_line_chars for ln in lines) / len(lines) > cfg.max_short_line_frac:
        return "fineweb_short_line_ratio"
    if duplicates(lines)[1] / len(text.replace("\n", "")) > cfg.max_char_dup_frac:
        return "fineweb_char_dup_ratio"
    words = english().tokens(text)
    # Line breaks, not "\n" characters: FineWeb measured this on trafilatura's text, which
    # separates paragraphs with one newline; ours keeps a blank line between them.
    if not words or (len(lines) - 1) / len(words) > cfg.max_newline_word_ratio:
        return "fineweb_newline_ratio"
    return None
