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

CACHE_CHUNKS = 200_000


def alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a regular expression, as text (a '|' inside a group or a class splits nothing)."""
    out, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "^":
                i += 1
            if pattern[i + 1:i + 2] == "]":  # a ']' first in a class is a character
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


def _reach(pattern: str) -> tuple[int, int]:
    """(characters a match of `pattern` reads from its start onwards, lookaheads included, at most UNBOUNDED;
    characters its lookbehinds read before the start). Lookarounds must be at the top level of the pattern."""
    from re import _constants as sre
    from re import _parser as parser

    looks = (sre.ASSERT, sre.ASSERT_NOT)

    def nested(x) -> bool:
        if isinstance(x, parser.SubPattern):
            return any(nested(item) for item in x.data)
        if isinstance(x, (tuple, list)):
            return any(v in looks for v in x if isinstance(v, sre._NamedIntConstant)) or any(nested(v) for v in x)
        return False

    tree = parser.parse(pattern)
    pos = ahead = behind = 0
    for op, av in tree.data:
        if op in looks:
            direction, sub = av
            if nested(sub):
                raise ValueError(f"rule {pattern!r}: a lookaround inside a lookaround")
            width = sub.getwidth()[1]
            if direction < 0:
                behind = max(behind, width - pos)
            else:
                ahead = max(ahead, pos + width)
        else:
            if nested(av):
                raise ValueError(f"rule {pattern!r}: a lookaround inside a group")
            pos += parser.SubPattern(tree.state, [(op, av)]).getwidth()[1]
    return min(max(ahead, pos), UNBOUNDED), behind


UNBOUNDED = 1 << 30


class Affixes:
    """spaCy's prefix and suffix searches over a position range [lo, hi) of a chunk, each in time bounded by the
    rules, not by hi - lo (EnglishWords._chunk).

    - Prefix: every alternative is anchored (`^`), so the search is a `match` at lo of the alternatives without
      their `^`; none looks behind. The bounded ones read at most `prefix_reach` characters; the unbounded ones
      must be a run of one character (`\\.\\.+`: the run is taken whole in one pass).
    - Suffix: every alternative ends at `$`, which `endpos` = hi makes the slice's end. The bounded ones start at
      most `suffix_width` characters before hi and look at most `suffix_behind` further back; searched from
      hi - suffix_width with the full expression's order kept. An unbounded one must be a run of one character
      (`\\.\\.+$`), found by scanning the run. A slice too short for the window is searched as spaCy does,
      on the slice itself (its lookbehinds see nothing before it).
    A rule of another shape is refused at load time, naming it: the rules are data (infra/tools/export_word_rules.py),
    and a new export must not quietly fall back to quadratic time."""

    def __init__(self, prefix: str, suffix: str) -> None:
        pre_alts, suf_alts = alternatives(prefix), alternatives(suffix)
        if not all(a.startswith("^") for a in pre_alts):
            raise ValueError(f"prefix rule {next(a for a in pre_alts if not a.startswith('^'))!r} is not anchored at ^")
        if not all(a.endswith("$") and not a.endswith("\\$") for a in suf_alts):
            raise ValueError(f"suffix rule {next(a for a in suf_alts if not a.endswith('$'))!r} does not end at $")
        pre_alts = [a[1:] for a in pre_alts]
        self._prefix_at = re.compile("|".join(pre_alts)).match
        self.prefix_reach, self._prefix_runs = 0, ""
        for a in pre_alts:
            ahead, behind = _reach(a)
            if behind:
                raise ValueError(f"prefix rule {a!r} looks behind")
            if ahead >= UNBOUNDED:
                self._prefix_runs += _run_char(a, "prefix")
            else:
                self.prefix_reach = max(self.prefix_reach, ahead)
        bounded, self._suffix_runs = [], ""
        self.suffix_width = self.suffix_behind = 0
        for a in suf_alts:
            ahead, behind = _reach(a)
            if ahead >= UNBOUNDED:
                self._suffix_runs += _run_char(a[:-1], "suffix")
            else:
                bounded.append(a)
                self.suffix_width, self.suffix_behind = max(self.suffix_width, ahead), max(self.suffix_behind, behind)
        self._suffix_any = re.compile(suffix).search
        self._suffix_at = re.compile(suffix).match
        self._suffix_bounded = re.compile("|".join(bounded)).search
        self._repeats: dict[str, re.Pattern] = {}

    def prefix_len(self, s: str, lo: int, hi: int) -> int:
        m = self._prefix_at(s, lo, hi)
        return m.end() - lo if m else 0

    def suffix_len(self, s: str, lo: int, hi: int) -> int:
        """Length of spaCy's suffix of s[lo:hi] (`suffix_search` on the slice: the leftmost match)."""
        if hi - lo <= self.suffix_width + self.suffix_behind + 1 or s[hi - 1] == "\n":  # `$` also before a last \n
            m = self._suffix_any(s[lo:hi])
            return m.end() - m.start() if m else 0
        m = self._suffix_bounded(s, hi - self.suffix_width, hi)
        start = m.start() if m else hi
        c = s[hi - 1]
        if c in self._suffix_runs:
            run = hi - 1
            while run > lo and s[run - 1] == c:
                run -= 1
            if hi - run >= 2:
                start = min(start, run)
        if start == hi:
            return 0
        if start - self.suffix_behind < lo:  # a lookbehind would see before the slice: as spaCy, on the slice
            m = self._suffix_any(s[lo:hi])
            return m.end() - m.start() if m else 0
        m = self._suffix_at(s, start, hi)
        return m.end() - m.start() if m else 0

    def same_passes(self, s: str, lo: int, hi: int, pre: str, suf: str, short: int) -> int:
        """How many more passes of the affix loop, from [lo, hi), would strip `pre` and `suf` again (either may be
        empty, not both) and look up no special case (each slice, and the slice less one affix, longer than
        `short`): their windows read the same characters of a periodic stretch."""
        p, q = len(pre), len(suf)
        if (p and not s.startswith(pre, lo)) or (q and not s.endswith(suf, 0, hi)):  # the next pass strips another
            return 0
        if (p and pre[0] in self._prefix_runs) or (q and suf[-1] in self._suffix_runs) or s[lo:lo + 1] in self._prefix_runs \
                or "\n" in pre or "\n" in suf or s[hi - 1:hi] == "\n":
            return 0
        width = self.suffix_width + self.suffix_behind
        need = max(short + max(p, q), width + 2 + p, self.prefix_reach)
        if hi - lo < need:
            return 0
        passes = (hi - lo - need) // (p + q) + 1
        if p:
            run = self._repeat(pre).match(s, lo - p, hi)
            passes = min(passes, (run.end() - (lo - p) - self.prefix_reach) // p)
        if q:
            top = hi + q
            start = top - q
            while start - q >= lo and s[start - q:start] == suf:
                start -= q
            passes = min(passes, (top - start - width) // q)
        return max(0, passes)

    def _repeat(self, text: str) -> re.Pattern:
        pat = self._repeats.get(text)
        if pat is None:
            pat = self._repeats[text] = re.compile(f"(?:{re.escape(text)})+")
        return pat


def _run_char(alternative: str, kind: str) -> str:
    """The character of an unbounded rule that is a run of one character (`\\.\\.+`, `xx+`); else refused."""
    m = re.fullmatch(r"(\\?.)\1\+", alternative)
    if not m:
        raise ValueError(f"{kind} rule {alternative!r} is unbounded and not a run of one character: words.py's "
                         "linear-time search does not cover it")
    return m.group(1)[-1]


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
        start, the special cases are looked up only at lengths one can have, and a run of passes that strip the
        same affixes from a periodic stretch (`((((`) is taken in one step."""
        if specials and s in self.specials:
            return list(self.specials[s])
        prefixes: list[str] = []
        suffixes: list[str] = []
        aff, big = self._affixes, self._max_special
        lo, hi = 0, len(s)
        last = -1
        while lo < hi and hi - lo != last:
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
            p_text, s_text = s[lo:lo + pre], s[hi - suf:hi]
            lo, hi = lo + pre, hi - suf
            repeat = 1 + aff.same_passes(s, lo, hi, p_text, s_text, big + 1)
            if pre:
                prefixes.extend([p_text] * repeat)
            if suf:
                suffixes.extend([s_text] * repeat)
            lo, hi = lo + (repeat - 1) * pre, hi - (repeat - 1) * suf
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

    def _match_specials(self, toks: list[str]) -> list[str]:
        """Replace token runs that spell a special case's affix split by the special case (longest
        first, leftmost; spaCy's `_filter_special_spans`)."""
        if len(toks) < 2 or not self._matched:
            return toks
        firsts, pairs = self._matched_firsts, self._matched_pairs
        if not any(t in firsts for t in toks[:-1]):  # no run can start here: a set lookup a token
            return toks
        out: list[str] = []
        i = 0
        while i < len(toks):
            if toks[i] not in firsts or (toks[i], toks[i + 1] if i + 1 < len(toks) else None) not in pairs:
                out.append(toks[i])
                i += 1
                continue
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
