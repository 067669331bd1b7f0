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

from pipelines.corpus import budget
from pipelines.corpus.affixes import MAX_CYCLE, Affixes

CACHE_CHUNKS = 200_000
CYCLE_EVERY = 16
"""The long-slice loop looks for a cycle (and ticks the document's time budget) every this many passes."""
RUN_LOOK = 256
"""The prefix-only loop (EnglishWords._prefix_run) looks for a cycle, and ticks the document's time budget, after
its first MAX_CYCLE passes and every this many after."""
PAIR_RUN = 64
"""The long-slice loop takes at most this many passes of one-character prefixes in one tight loop (_pair_passes)."""


class EnglishWords:
    """spaCy 3.8's English tokenizer algorithm over the exported rules."""

    def __init__(self, rules: dict) -> None:
        self._prefix = re.compile(rules["prefix"]).search
        self._suffix = re.compile(rules["suffix"]).search
        self._affixes = Affixes(rules["prefix"], rules["suffix"])
        self._infix = re.compile(rules["infix"]).finditer
        self._url = re.compile(rules["url"], rules["url_flags"]).match
        self.specials: dict[str, tuple[str, ...]] = {s: tuple(t) for s, t in rules["specials"].items()}
        self._max_special = max(map(len, self.specials), default=0)
        self.sentence_ends = frozenset(rules["sentence_ends"])
        self.punctuation = frozenset(rules["punctuation"])
        # spaCy's special-case matcher: a special case whose text has an affix or infix is also
        # matched as the token sequence the affix rules make of it (Tokenizer.add_special_case).
        self._matched: dict[tuple[str, ...], tuple[str, ...]] = {}
        for s, toks in self.specials.items():
            if not rules["faster_heuristics"] or self._prefix(s) or self._suffix(s) or next(self._infix(s), None) or " " in s:
                self._matched[tuple(self._chunk(s, False))] = toks
        self._max_matched = max(map(len, self._matched), default=0)
        self._matched_firsts = frozenset(k[0] for k in self._matched)
        self._matched_pairs = frozenset(k[:2] for k in self._matched)  # a one-token key never matches: runs are 2+
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
        """One whitespace-free chunk -> its tokens (tokenizer.pyx `_split_affixes` + `_attach_tokens`).

        spaCy strips one prefix and one suffix a pass and searches the rest again, which is quadratic in a chunk of
        affixes (`((((...x`: 0.35 s for 990 characters, minutes for a crafted page). This is the same loop over
        positions [lo, hi) of the chunk, in linear time (`Affixes`): the suffix is searched only where a match can
        start, and while the slice is long (`_long_passes`) no special case is looked up, a side that found nothing
        is not searched again, and a cycle of passes a periodic stretch repeats (`((((`, `<>(<>(`) is taken in one
        step; spaCy's loop itself takes the last few dozen characters."""
        if specials and s in self.specials:
            return list(self.specials[s])
        prefixes: list[str] = []
        suffixes: list[str] = []
        aff, big = self._affixes, self._max_special
        lo, hi = self._long_passes(s, prefixes, suffixes)
        last = -1
        while lo < hi and hi - lo != last:  # spaCy's loop, for what is left: at most a few dozen characters
            budget.tick()
            n = hi - lo
            if specials and n <= big and s[lo:hi] in self.specials:
                break
            last = n
            pre = aff.prefix_len(s, lo, hi)
            if pre and specials and 0 < n - pre <= big and s[lo + pre:hi] in self.specials:
                prefixes.append(s[lo:lo + pre])
                lo += pre
                break
            suf = aff.suffix_len(s, lo + pre, hi)
            if suf and specials and 0 < n - suf <= big and s[lo:hi - suf] in self.specials:
                suffixes.append(s[hi - suf:hi])
                hi -= suf
                break
            if pre and suf and pre + suf <= n:
                pass
            elif pre:
                suf = 0
            elif not suf:
                continue  # nothing stripped: the loop ends on the unchanged length
            else:
                pre = 0
            if pre:
                prefixes.append(s[lo:lo + pre])
            if suf:
                suffixes.append(s[hi - suf:hi])
            lo, hi = lo + pre, hi - suf
        s = s[lo:hi]
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

    def _long_passes(self, s: str, prefixes: list[str], suffixes: list[str]) -> tuple[int, int]:
        """The affix loop's passes while the slice [lo, hi) is long (returns where they stop): longer than every
        special case and every window, so no special case can be looked up (spaCy looks one up only for a slice or
        a slice less one affix no longer than the longest), the prefix and the suffix each read only their own end,
        and a side that found nothing finds nothing while the slice stays long (its window is unchanged). So a pass
        is one prefix match and one suffix search, and nothing for a side that is done; once the suffixes are done,
        the prefixes left are found in one scan (`_prefix_run`). Runs of one-character affixes (`(` `<` at the
        start, `)` `,` at the end: Affixes.single_prefix and single_suffix) are taken in one step, a pass a pair of
        them while both sides strip. After every CYCLE_EVERY passes, the last MAX_CYCLE are looked at as a cycle
        that a periodic stretch repeats (`<>(<>(`, `x.).)`, Affixes.same_cycles), which is then taken in one step.
        A pass that would leave the slice short is left to spaCy's loop."""
        aff, short = self._affixes, self._max_special + 1
        prefix_at, suffix_len, single = aff._prefix_at, aff.suffix_len, aff.single_suffix
        single_pre = aff.single_prefix
        floor = max(short, aff.prefix_reach, aff.suffix_width + aff.suffix_behind + 1) + 1
        lo, hi = 0, len(s)
        pre_done = suf_done = False
        history: list[tuple[int, int, str, str]] = []  # the last passes, at most MAX_CYCLE
        count, look = 0, CYCLE_EVERY
        while hi - lo > floor:
            if suf_done:  # prefixes alone: found in one scan
                if not pre_done:
                    lo = self._prefix_run(s, lo, hi, floor, prefixes)
                break
            elif pre_done:  # suffixes alone; a run of one-character suffixes (`,` `)`...) at once
                j, stop = hi, lo + floor + 1
                while j > stop and s[j - 1] in single:
                    j -= 1
                if j < hi:
                    suffixes.extend(s[j:hi][::-1])
                    history.extend((lo, e, "", s[e - 1]) for e in range(min(hi, j + MAX_CYCLE), j, -1))
                    count += hi - j
                    hi = j
                else:
                    suf = suffix_len(s, lo, hi)
                    if not suf or hi - lo - suf <= floor:
                        suf_done = not suf
                        break
                    text = s[hi - suf:hi]
                    history.append((lo, hi, "", text))
                    suffixes.append(text)
                    hi -= suf
                    count += 1
            elif s[lo] in single_pre and (k := self._pair_passes(s, lo, hi, floor, suffixes, history)):
                prefixes.extend(s[lo:lo + k])  # passes of a one-character prefix each, in a tight loop
                lo, hi = lo + k, history[-1][1] - len(history[-1][3])  # where the last pass left the slice
                count += k
            else:
                m = prefix_at(s, lo, hi)
                pre = m.end() - lo if m else 0
                pre_done = not pre
                suf = suffix_len(s, lo + pre, hi)
                suf_done = not suf
                if hi - lo - pre - suf <= floor or not (pre or suf):
                    break  # spaCy's loop takes this pass (or ends)
                history.append((lo, hi, s[lo:lo + pre], s[hi - suf:hi]))
                if pre:
                    prefixes.append(s[lo:lo + pre])
                    lo += pre
                if suf:
                    suffixes.append(s[hi - suf:hi])
                    hi -= suf
                count += 1
            if len(history) > 2 * MAX_CYCLE:
                del history[:-MAX_CYCLE]
            if count >= look:
                look = count + CYCLE_EVERY
                k, cycles = self._look(s, history, lo, hi)
                if cycles:
                    for _, _, p_text, s_text in history[-k:] * cycles:
                        if p_text:
                            prefixes.append(p_text)
                        if s_text:
                            suffixes.append(s_text)
                    lo, hi = lo + cycles * (lo - history[-k][0]), hi - cycles * (history[-k][1] - hi)
                    history.clear()
        return lo, hi

    def _look(self, s: str, history: list[tuple[int, int, str, str]], lo: int, hi: int) -> tuple[int, int]:
        """Tick the document's budget and look at the last MAX_CYCLE passes as a cycle (Affixes.same_cycles)."""
        budget.tick()
        del history[:-MAX_CYCLE]
        return self._affixes.same_cycles(s, history, lo, hi, self._max_special + 1)

    def _pair_passes(self, s: str, lo: int, hi: int, floor: int, suffixes: list[str],
                     history: list[tuple[int, int, str, str]]) -> int:
        """Up to PAIR_RUN passes of the long-slice loop while each strips a one-character prefix (Affixes.single_prefix:
        no search) and a suffix (a one-character one without a search too), in one tight loop (returns how many; the
        last MAX_CYCLE are appended to `history`, every suffix to `suffixes`). Stops before a pass whose prefix is
        another, whose suffix side finds nothing or that would leave the slice short: the loop's general pass decides
        those. (Matching both sides' runs in C instead was measured slower: the runs an attacker mixes are short.)"""
        aff = self._affixes
        single, suffix_len, append = aff.single_suffix, aff.suffix_len, suffixes.append
        run = aff.single_prefix_run(s, lo, min(lo + PAIR_RUN, hi))  # the prefixes: one scan in C
        j, first, short = hi, len(suffixes), lo + floor + 1  # a pass must leave more than floor characters
        i = 0
        for i in range(run.end() - lo if run else 0):
            c = s[j - 1]
            if c in single:
                if j - 1 - i <= short:
                    break
                append(c)
                j -= 1
            else:
                q = suffix_len(s, lo + i + 1, j)
                if not q or j - q - i <= short:
                    break
                append(s[j - q:j])
                j -= q
        else:
            i = run.end() - lo if run else 0
        last = []  # the last passes, rebuilt from the end: each pass's slice ended where the next one's suffix ends
        for t in range(i - 1, max(-1, i - 1 - MAX_CYCLE), -1):
            suf = suffixes[first + t]
            last.append((lo + t, j + len(suf), s[lo + t], suf))
            j += len(suf)
        history.extend(reversed(last))
        return i

    def _prefix_run(self, s: str, lo: int, hi: int, floor: int, prefixes: list[str]) -> int:
        """The prefixes stripped one a pass from lo while the slice stays longer than `floor`, once the suffix side is
        done (returns where they stop). Each is the prefix expression's match at its position, as spaCy's prefix
        search on the rest of the chunk; none reads as far as hi (the slice is longer than every window), and one
        that would leave the slice short is left to spaCy's loop. A run of one-character prefixes (`((((`) is one
        scan (Affixes.single_prefix_run); after every RUN_LOOK passes the last MAX_CYCLE are looked at as a cycle a
        periodic stretch repeats (`$<$<`), taken in one step."""
        aff = self._affixes
        prefix_at, pre_run = aff._prefix_at, aff.single_prefix_run
        history: list[tuple[int, int, str, str]] = []
        count, look = 0, MAX_CYCLE
        while True:
            r = pre_run(s, lo, hi - floor - 1) if pre_run else None
            if r:
                end = r.end()
                prefixes.extend(r.group())
                history.extend((i, hi, s[i], "") for i in range(max(lo, end - MAX_CYCLE), end))
                count += end - lo
            else:
                m = prefix_at(s, lo, hi)
                end = m.end() if m else lo
                if end == lo or hi - end <= floor:
                    return lo
                text = m.group()
                prefixes.append(text)
                history.append((lo, hi, text, ""))
                count += 1
            lo = end
            if len(history) > 2 * MAX_CYCLE:
                del history[:-MAX_CYCLE]
            if count >= look:
                look = count + RUN_LOOK
                k, cycles = self._look(s, history, lo, hi)
                if cycles:
                    prefixes.extend([text for _, _, text, _ in history[-k:]] * cycles)
                    lo += cycles * (lo - history[-k][0])
                    history.clear()

    def _match_specials(self, toks: list[str]) -> list[str]:
        """Replace token runs that spell a special case's affix split by the special case (longest
        first, leftmost; spaCy's `_filter_special_spans`)."""
        if len(toks) < 2 or not self._matched:
            return toks
        firsts, pairs = self._matched_firsts, self._matched_pairs
        if firsts.isdisjoint(toks):  # no run can start here
            return toks
        starts = [i for i, pair in enumerate(zip(toks, toks[1:])) if pair in pairs]  # where a run can start
        if not starts:
            return toks
        out: list[str] = []
        i = 0
        for j in starts:
            if j < i:
                continue  # inside a run replaced already
            for n in range(min(self._max_matched, len(toks) - j), 1, -1):
                rep = self._matched.get(tuple(toks[j:j + n]))
                if rep is not None:
                    out.extend(toks[i:j])
                    out.extend(rep)
                    i = j + n
                    break
        out.extend(toks[i:])
        return out

    def chunk_tokens(self, chunk: str) -> tuple[str, ...]:
        toks = self._cache.get(chunk)
        if toks is None:
            budget.tick()  # the document's time budget (pipelines/corpus/budget.py)
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
        if None in flags:  # each new token once (a crafted page repeats a few tokens a million times)
            new = {t: self._token_flags(t) for t in {t for t, f in zip(toks, flags) if f is None}}
            flags = [f if f is not None else new[t] for t, f in zip(toks, flags)]
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
