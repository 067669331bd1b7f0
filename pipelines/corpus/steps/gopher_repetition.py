"""The Gopher repetition family (Rae et al. 2021, Table A1): its config, its rules and its step.

`gopher_repetition(text, cfg)` returns None to keep, else the first rule the text fails. The rules and
their order follow datatrove's GopherRepetitionFilter; the defaults are the published thresholds:
  Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training Gopher",
  arXiv:2112.11446, Table A1.
Words are counted as datatrove counts them (the package docstring, pipelines/corpus/steps).
"""
from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

import numpy as np
import pandas as pd

from common.config import opt, require
from pipelines.corpus.steps.base import Step, duplicates, filter_step, fraction
from pipelines.corpus.words import english

_PARAGRAPH = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")


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
            fraction(name, getattr(self, name))
        for sizes, fracs in (("top_ngram_sizes", "top_ngram_max_frac"), ("dup_ngram_sizes", "dup_ngram_max_frac")):
            require(len(getattr(self, sizes)) == len(getattr(self, fracs)), f"{sizes} and {fracs} need the same length")
            require(all(n >= 1 for n in getattr(self, sizes)), f"{sizes} must be >= 1")
            for f in getattr(self, fracs):
                fraction(fracs, f)


_P = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier of the rolling n-gram key


class NGramKeys:
    """One 64-bit key per n-gram of `words`, for n = 1, 2, ... in turn: keys(n)[i] stands for
    words[i:i + n]. Built incrementally in numpy, key_n[i] = key_{n-1}[i] * P + hash(words[i+n-1])
    (mod 2^64), so each n costs one vector operation whatever n is; counting and finding repeats
    are numpy's and pandas' (a hash table of first appearances). Two different n-grams share a key with probability ~2^-64 per
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
    codes, _ = _first_seen_codes(grams)
    counts = np.bincount(codes)
    top = int(counts.max())
    i = int(np.argmax(codes == int(np.argmax(counts == top))))  # the smallest top code was seen first
    return (keys.cum[i + n] - keys.cum[i] + n - 1) * top


def _first_seen_codes(grams: np.ndarray) -> tuple[np.ndarray, int]:
    """(a code per n-gram, 0, 1, 2, ... in order of first appearance; the number of distinct ones).
    pandas' hash table, not np.unique's sort: the n-gram rules cost a third less (bench corpus)."""
    codes, uniques = pd.factorize(grams, sort=False)
    return codes, len(uniques)


def dup_ngram_chars(words: list[str], n: int, keys: NGramKeys | None = None) -> int:
    """Characters (spaces excluded) in n-grams that repeat an earlier n-gram, as datatrove's
    find_all_duplicate: scan left to right; on a repeat count its characters and jump n words,
    so overlapping repeats are not counted twice.

    datatrove keys an n-gram by its words joined without spaces ("".join), lmforge by the words
    themselves: two different n-grams that concatenate to the same characters (["a", "bc"] and
    ["ab", "c"]) repeat there and not here. No decision in `bench corpus` differs (Gopher repetition agrees on 100% of both page sets)."""
    return _dup_ngram_chars(words, n, keys or NGramKeys(words)) or 0


def _dup_ngram_chars(words: list[str], n: int, keys: NGramKeys, limit: float = float("inf")) -> int | None:
    """dup_ngram_chars, or None if no n-gram occurs twice (then no longer one does either). With `limit`, the scan
    stops once the count passes it (the rule has decided): on a page of repeats it walks the first `limit` characters
    of them, not the page."""
    grams = keys(n)
    codes, distinct = _first_seen_codes(grams)
    if distinct == len(grams):
        return None
    # The scan only decides something at an n-gram that occurred before (a "repeat" position, one
    # whose key's first index is earlier): every other n-gram is new and just joins `seen`. So walk
    # the repeat positions, adding the stretches between them in one step. Codes count up in order
    # of first appearance, so a position is new exactly where the running maximum code grows.
    top = np.maximum.accumulate(codes)
    repeats = (np.flatnonzero(top[1:] == top[:-1]) + 1).tolist()
    g = codes.tolist()
    cum = keys.cum
    seen: set[int] = set()
    chars = i = k = 0
    while k < len(repeats):
        j = repeats[k]
        seen.update(g[i:j])
        if g[j] in seen:
            chars += cum[j + n] - cum[j]
            if chars > limit:
                return chars
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
        chars = _dup_ngram_chars(words, n, keys, frac * total)
        if chars is None:
            unrepeated = n
        elif chars / total > frac:
            return f"gopher_rep_dup_{n}gram"
    return None


STEP = Step("gopher_repetition", filter_step(lambda page, cfg: gopher_repetition(page.text, cfg)),
            GopherRepetitionConfig, "Gopher repetition rules (Rae et al. 2021, Table A1)")
