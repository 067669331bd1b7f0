"""Words and sentences as the reference implementations count them: spaCy's English tokenizer and
sentencizer, re-implemented in pure Python over rules exported from spaCy (issue 16).

Gopher's and C4's rules are stated over "words" and "sentences" without defining them. datatrove,
the reference implementation lmforge's decisions are measured against (`bench corpus`), counts
spaCy tokens of `spacy.blank("en")` (punctuation tokens included) and spaCy Sentencizer sentences.
Counting `\\w+` runs instead, lmforge kept 104 of 2,006 crawl pages and 1,203 of 6,613 FOLDOC texts
that datatrove's Gopher alphabetic-word rule drops, and counted "e.g." as a sentence end (226 FOLDOC
texts kept that datatrove's C4 filter drops; measured 2026-11-24). So lmforge counts the same tokens:

  tokens(text)          spaCy's tokenizer: whitespace-separated chunks, then per chunk its special
                        cases ("don't" -> do n't, "e.g.", "U.S."), prefixes, suffixes, URLs and
                        infixes (spacy/tokenizer.pyx `_split_affixes` and `_attach_tokens`), with
                        whitespace tokens dropped as datatrove's `strip_strings` drops them.
  sentence_count(line)  spaCy's Sentencizer: a sentence ends at a token that is a sentence-final
                        character ("." "!" "?" and 278 others) once a token that is neither one nor
                        punctuation follows. "e.g." and "Mr." are one token, so they end nothing.

The expressions and special cases are data (data/words/english.json, written by
infra/tools/export_word_rules.py from spaCy 3.8 and datatrove 0.10; MIT and Apache-2.0, see
SOURCE.md there). Every language goes through the English rules: spaCy's affix rules are
script-neutral (Unicode letter classes), its special cases are English.

Speed: a chunk's tokens are cached (as spaCy caches them), so a page costs one `str.split` and a
dictionary lookup per chunk once its words have been seen; the cache is cleared at CACHE_CHUNKS.
"""
from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from importlib import resources
from itertools import chain
from operator import itemgetter

CACHE_CHUNKS = 200_000


class EnglishWords:
    """spaCy 3.8's English tokenizer algorithm over the exported rules."""

    def __init__(self, rules: dict) -> None:
        self._prefix = re.compile(rules["prefix"]).search
        self._suffix = re.compile(rules["suffix"]).search
        self._infix = re.compile(rules["infix"]).finditer
        self._url = re.compile(rules["url"], rules["url_flags"]).match
        self.specials: dict[str, tuple[str, ...]] = {s: tuple(t) for s, t in rules["specials"].items()}
        self.sentence_ends = frozenset(rules["sentence_ends"])
        self.punctuation = frozenset(rules["punctuation"])
        # spaCy's special-case matcher: a special case whose text has an affix or infix is also
        # matched as the token sequence the affix rules make of it (Tokenizer.add_special_case).
        self._matched: dict[tuple[str, ...], tuple[str, ...]] = {}
        for s, toks in self.specials.items():
            if not rules["faster_heuristics"] or self._prefix(s) or self._suffix(s) or next(self._infix(s), None) or " " in s:
                self._matched[tuple(self._chunk(s, False))] = toks
        self._max_matched = max(map(len, self._matched), default=0)
        self._cache: dict[str, tuple[str, ...]] = {}
        self._flags: dict[str, tuple[int, int, int]] = {}
        self._sent: dict[str, tuple[int, bool, int, bool]] = {}
        self._last: tuple[str | None, list[str]] = (None, [])

    def _find_prefix(self, s: str) -> int:
        m = self._prefix(s)
        return m.end() - m.start() if m else 0

    def _find_suffix(self, s: str) -> int:
        m = self._suffix(s)
        return m.end() - m.start() if m else 0

    def _chunk(self, s: str, specials: bool) -> list[str]:
        """One whitespace-free chunk -> its tokens (tokenizer.pyx `_split_affixes` + `_attach_tokens`)."""
        if specials and s in self.specials:
            return list(self.specials[s])
        prefixes: list[str] = []
        suffixes: list[str] = []
        last = -1
        while s and len(s) != last:
            if specials and s in self.specials:
                break
            last = len(s)
            pre = self._find_prefix(s)
            if pre:
                minus_pre = s[pre:]
                if minus_pre and specials and minus_pre in self.specials:
                    prefixes.append(s[:pre])
                    s = minus_pre
                    break
            suf = self._find_suffix(s[pre:])
            if suf:
                minus_suf = s[:-suf]
                if minus_suf and specials and minus_suf in self.specials:
                    suffixes.append(s[-suf:])
                    s = minus_suf
                    break
            if pre and suf and pre + suf <= len(s):
                prefixes.append(s[:pre])
                suffixes.append(s[-suf:])
                s = s[pre:-suf]
            elif pre:
                prefixes.append(s[:pre])
                s = s[pre:]
            elif suf:
                suffixes.append(s[-suf:])
                s = s[:-suf]
        out = prefixes
        if s:
            if specials and s in self.specials:
                out.extend(self.specials[s])
            elif self._url(s):
                out.append(s)
            else:
                start = 0
                for m in self._infix(s):
                    a, b = m.start(), m.end()
                    if a == 0:  # an infix at the very start is no split (start_before_infixes)
                        continue
                    if a != start:
                        out.append(s[start:a])
                    if a != b:
                        out.append(s[a:b])
                    start = b
                if s[start:]:
                    out.append(s[start:])
        out.extend(reversed(suffixes))
        return out

    def _match_specials(self, toks: list[str]) -> list[str]:
        """Replace token runs that spell a special case's affix split by the special case (longest
        first, leftmost; spaCy's `_filter_special_spans`)."""
        if len(toks) < 2 or not self._matched:
            return toks
        out: list[str] = []
        i = 0
        while i < len(toks):
            for n in range(min(self._max_matched, len(toks) - i), 1, -1):
                rep = self._matched.get(tuple(toks[i:i + n]))
                if rep is not None:
                    out.extend(rep)
                    i += n
                    break
            else:
                out.append(toks[i])
                i += 1
        return out

    def chunk_tokens(self, chunk: str) -> tuple[str, ...]:
        toks = self._cache.get(chunk)
        if toks is None:
            if chunk.isalpha() and chunk not in self.specials:
                # No prefix, suffix, infix or URL rule of spaCy's English matches letters alone: checked
                # on every alphabetic code point alone and beside letters, and on the 393,842 distinct
                # alphabetic chunks of bench corpus's end-to-end input (tests/unit/test_words.py checks
                # it against spaCy). Such a chunk is its own token; the affix loop cost 11 us a miss.
                toks = (chunk,)
            else:
                toks = tuple(self._match_specials(self._chunk(chunk, True)))
            if len(self._cache) >= CACHE_CHUNKS:
                self._cache.clear()
            self._cache[chunk] = toks
        return toks

    def tokens(self, text: str) -> list[str]:
        """spaCy's tokens of `text` without whitespace tokens: datatrove's `split_into_words(text, "en")`.
        The last text's tokens are kept, as the rule families of one page ask for the same text in
        turn; the list is shared, so callers must not change it."""
        last = self._last  # one read: another thread may replace it
        if text == last[0]:
            return last[1]
        chunks = text.split()
        per_chunk = list(map(self._cache.get, chunks))
        if None in per_chunk:
            per_chunk = [t if t is not None else self.chunk_tokens(c) for c, t in zip(chunks, per_chunk)]
        out = list(chain.from_iterable(per_chunk))
        self._last = (text, out)
        return out

    def _sentencize(self, toks, seen_end: bool) -> tuple[int, bool]:
        """spaCy's Sentencizer over `toks`: (sentence starts found, a sentence end still pending)."""
        n = 0
        for t in toks:
            if t in self.sentence_ends:
                seen_end = True
            elif seen_end and not is_punct(t):
                n += 1
                seen_end = False
        return n, seen_end

    def sentence_count(self, line: str) -> int:
        """Sentences spaCy's Sentencizer finds in `line` (0 for a blank line): a sentence starts at
        the first token that is neither punctuation nor a sentence end after a sentence end.
        Whitespace other than one space between chunks makes a token of its own, as in spaCy; lines
        without such whitespace (nearly all) go chunk by chunk, each chunk's effect cached for both
        states it can start in."""
        if not line.strip():
            return 0
        if _ODD_SPACE.search(line):
            toks = chain.from_iterable((run,) if run[0].isspace() else self.chunk_tokens(run)
                                       for run in _RUNS.findall(line) if run != " ")
            return self._sentencize(toks, False)[0] + 1
        n, seen_end, summary = 0, False, self._sent
        for chunk in line.split():
            s = summary.get(chunk)
            if s is None:
                toks = self.chunk_tokens(chunk)
                s = summary[chunk] = (*self._sentencize(toks, False), *self._sentencize(toks, True))
                if len(summary) >= CACHE_CHUNKS:
                    summary.clear()
            if seen_end:
                n += s[2]
                seen_end = s[3]
            else:
                n += s[0]
                seen_end = s[1]
        return n + 1

    def is_symbol(self, token: str) -> bool:
        """True if every character is in datatrove's PUNCTUATION_SET: Gopher's quality rules do not
        count such a token as a word ("non_symbol_words" in datatrove's GopherQualityFilter)."""
        return all(c in self.punctuation for c in token)

    def word_stats(self, toks: list[str]) -> tuple[int, int, int]:
        """(tokens that are words, i.e. not all punctuation; their characters; tokens with a letter)."""
        flags = list(map(self._flags.get, toks))
        if None in flags:
            flags = [f if f is not None else self._token_flags(t) for t, f in zip(toks, flags)]
        return sum(map(itemgetter(0), flags)), sum(map(itemgetter(1), flags)), sum(map(itemgetter(2), flags))

    def _token_flags(self, t: str) -> tuple[int, int, int]:
        """(1 if a word else 0, its length if a word else 0, 1 if it has a letter else 0)."""
        word = not self.is_symbol(t)
        f = self._flags[t] = (int(word), len(t) if word else 0, int(any(c.isalpha() for c in t)))
        if len(self._flags) >= CACHE_CHUNKS:
            self._flags.clear()
        return f


_RUNS = re.compile(r"\S+|\s+")
_ODD_SPACE = re.compile(r"[^\S ]|  ")  # whitespace that spaCy makes a token of: not one space


@cache
def is_punct(token: str) -> bool:
    """spaCy's lexeme attribute is_punct: every character's Unicode category is P*."""
    return all(unicodedata.category(c).startswith("P") for c in token)


@cache
def english() -> EnglishWords:
    rules = json.loads(resources.files("pipelines.corpus").joinpath("data", "words", "english.json").read_text("utf-8"))
    return EnglishWords(rules)


def tokens(text: str) -> list[str]:
    return english().tokens(text)


def sentence_count(line: str) -> int:
    return english().sentence_count(line)
