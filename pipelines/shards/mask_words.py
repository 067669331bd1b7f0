"""Words for the objectives that mask them (whole_word: BERT whole-word masking; span: SpanBERT): a row's words
with each special token a word of its own, Google's take-or-skip walk over shuffled words, and SpanBERT's span plan.
The rules themselves are described in pipelines/shards/masking.py's docstring, which calls these."""
from __future__ import annotations

import bisect
import functools
from typing import NamedTuple

import numpy as np

from pipelines.shards.mask_config import MaskConfig


class Words(NamedTuple):
    start: np.ndarray
    """token index where each word begins"""
    size: np.ndarray
    """tokens per word"""
    ok: np.ndarray
    """maskable word (False for a special token, which is a word of its own)"""
    of_token: np.ndarray
    """word index of each token"""
    runs: list[tuple[int, int]]
    """maximal runs [s, e) of maskable words: the stretches between special tokens"""


def row_words(word_starts: np.ndarray, special: np.ndarray) -> Words:
    """The row's words: a special token is a word of one token, and the token after it starts a word."""
    starts = word_starts | special
    starts[1:] |= special[:-1]
    if starts.size:
        starts[0] = True
    start = np.flatnonzero(starts)
    ok = ~special[start]
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))).tolist()
    return Words(start, np.diff(np.append(start, starts.size)), ok, np.cumsum(starts) - 1,
                 list(zip(edges[0::2], edges[1::2])))


def whole_word_positions(rng: np.random.Generator, words: Words, budget: int) -> np.ndarray:
    """Google's rule: shuffle the words; take each whole if the total stays <= budget, else skip it."""
    cand = np.flatnonzero(words.ok)
    order = cand[np.argsort(rng.random(cand.size))]
    sizes = words.size[order]
    head = int(np.searchsorted(np.cumsum(sizes), budget, side="right"))  # the shuffled prefix that fits, at once
    take, total = order[:head].tolist(), int(sizes[:head].sum())
    for w, n in zip(order[head:].tolist(), sizes[head:].tolist()):  # then word by word: skip or take
        if total == budget:
            break
        if total + n <= budget:
            take.append(w)
            total += n
    selected = np.zeros(len(words.start), bool)
    selected[take] = True
    return np.flatnonzero(selected[words.of_token])


def span_lengths_pmf(span_p: float, span_max: int) -> np.ndarray:
    """P(L = 1..span_max): SpanBERT's p (1 - p)^(L - 1), renormalised; p = 0.2, max 10 keeps 1 - 0.8^10 = 89%."""
    pmf = span_p * (1 - span_p) ** np.arange(span_max)
    return pmf / pmf.sum()


@functools.lru_cache(maxsize=8)
def _span_cdf(span_p: float, span_max: int) -> list[float]:
    return np.cumsum(span_lengths_pmf(span_p, span_max)).tolist()


def span_plan(rng: np.random.Generator, words: Words, budget: int, cfg: MaskConfig) -> list[tuple[int, int, int]]:
    """SpanBERT spans as [(first word, drawn length, taken length)] in the order drawn (see the module docstring).

    Available words form runs [s, e): maskable, unselected and not next to a selected word, so
    spans never touch. L = min(drawn, longest run); the anchor is uniform over the starts of L
    available words. taken < drawn only for the last span (the budget was reached inside it) or
    when no run holds `drawn` words. Each span adds >= 1 token, so <= budget spans and 2 draws each.
    """
    cdf = _span_cdf(cfg.span_p, cfg.span_max)
    runs = words.runs
    size = words.size.tolist()
    draws = iter(rng.random(2 * budget).tolist())
    spans: list[tuple[int, int, int]] = []
    total = 0
    while total < budget and runs:
        drawn = min(bisect.bisect_right(cdf, next(draws)) + 1, cfg.span_max)
        length = min(drawn, max(e - s for s, e in runs))
        fits = [(s, e - s - length + 1) for s, e in runs if e - s >= length]  # (run start, starts in it)
        pick = int(next(draws) * sum(c for _, c in fits))
        for s, c in fits:
            if pick < c:
                first = s + pick
                break
            pick -= c
        taken = 0
        while taken < length and total < budget:
            total += size[first + taken]
            taken += 1
        spans.append((first, drawn, taken))
        runs = [piece for s, e in runs
                for piece in (((s, first - 1), (first + taken + 1, e)) if s <= first < e else ((s, e),))
                if piece[1] > piece[0]]
    return spans
