"""spaCy's prefix and suffix rules searched in time bounded by the rules, not by the chunk (pipelines/corpus/words.py
runs spaCy's affix loop over them): the rules' top-level alternatives and how far each reads (`_reach`), the prefix
match and the suffix search over a position range, and the test that a cycle of passes repeats over a periodic
stretch (`Affixes.same_cycles`, with `periodic_span`).

A rule of a shape these searches cannot bound is refused when the rules are loaded, naming it: the rules are data
(infra/tools/export_word_rules.py), and a new export must not quietly fall back to quadratic time.
"""
from __future__ import annotations

import re


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


def _chars(op, av) -> set[str] | None:
    """The characters one parsed item matches (a literal or a class), None when it is not one of those or the set
    is not listed (a category such as \\d, a negated class)."""
    from re import _constants as sre

    if op == sre.LITERAL:
        return {chr(av)}
    if op != sre.IN:
        return None
    out: set[str] = set()
    for kind, value in av:
        if kind == sre.LITERAL:
            out.add(chr(value))
        elif kind == sre.RANGE:
            out.update(map(chr, range(value[0], value[1] + 1)))
        else:
            return None
    return out


def _end_chars(items: list, last: bool = True) -> set[str] | None:
    """The characters a match of the parsed `items` can end with (`last`) or start with; None when that is not
    known."""
    from re import _constants as sre
    from re import _parser as parser

    if not items:
        return None
    op, av = items[-1 if last else 0]
    if op in (sre.LITERAL, sre.IN):
        return _chars(op, av)
    if op == sre.SUBPATTERN:
        return _end_chars(list(av[-1].data), last)
    if op == sre.BRANCH:
        found: set[str] = set()
        for branch in av[1]:
            chars = _end_chars(list(branch.data if isinstance(branch, parser.SubPattern) else branch), last)
            if chars is None:
                return None
            found |= chars
        return found
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] >= 1:
        return _end_chars(list(av[2].data), last)
    return None


def single_prefixes(alternatives_: list[str]) -> frozenset[str]:
    """The characters c for which the prefix match on any text that starts with c is c alone: an alternative is c by
    itself (a literal or a class, no lookaround), and no alternative before it can start with c (the match takes the
    first alternative that matches). An alternative whose first character is not known blocks every later one. The
    alternatives are given without their `^`."""
    from re import _parser as parser

    single: set[str] = set()
    blocked: set[str] = set()
    for a in alternatives_:
        items = list(parser.parse(a).data)
        chars = _chars(*items[0]) if len(items) == 1 else None
        if chars is not None:
            single |= chars - blocked
            blocked |= chars
            continue
        first = _end_chars(items, last=False)
        if first is None:
            break
        blocked |= first
    return frozenset(single)


def single_suffixes(alternatives_: list[str]) -> frozenset[str]:
    """The characters c for which the suffix search on any text that ends in c finds c alone: an alternative is c by
    itself (a literal or a class, no lookaround), and no other alternative can end in c (a longer match would start
    further left, and the search takes the leftmost). Alternatives whose last character is not known block every
    character."""
    from re import _parser as parser

    single: set[str] = set()
    blocked: set[str] = set()
    for a in alternatives_:
        items = list(parser.parse(a[:-1]).data)  # without its `$`
        chars = _chars(*items[0]) if len(items) == 1 else None
        if chars is not None:
            single |= chars
            continue
        last = _end_chars(items)
        if last is None:
            return frozenset()
        blocked |= last
    return frozenset(single - blocked)


UNBOUNDED = 1 << 30
MAX_CYCLE = 6
"""The longest cycle of affix passes the loop recognises and takes in one step (EnglishWords._long_passes)."""


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
        compiled = re.compile("|".join(pre_alts))
        self._prefix_at, self._prefix_iter = compiled.match, compiled.finditer
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
        self.single_suffix = single_suffixes(suf_alts)
        """Characters that are a suffix alone at the end of any text (`,` `)` `]`...): no search needed."""
        self.single_prefix = single_prefixes(pre_alts)
        """Characters that are a prefix alone at the start of any text (`(` `<` `[`...)."""
        self.single_prefix_run = re.compile(
            "[" + "".join(re.escape(c) for c in sorted(self.single_prefix)) + "]+").match if self.single_prefix else None
        """Matches a run of single prefixes: spaCy's loop strips them one a pass, this takes the run in one scan."""
        self._suffix_any = re.compile(suffix).search
        self._by_last = _by_last_char(suf_alts, bounded)
        """A slice's last character -> (the bounded alternatives' search, every alternative's match), each over the
        alternatives that can end in that character, in the rule's order: an alternative ends at the slice's end, so
        one that can not end in its last character can not match there, and leaving it out changes no match. The
        suffix rule is about a hundred alternatives; the ones that can end in `.` are four."""

    def prefix_len(self, s: str, lo: int, hi: int) -> int:
        m = self._prefix_at(s, lo, hi)
        return m.end() - lo if m else 0

    def suffix_len(self, s: str, lo: int, hi: int) -> int:
        """Length of spaCy's suffix of s[lo:hi] (`suffix_search` on the slice: the leftmost match)."""
        if s[hi - 1] in self.single_suffix:
            return 1
        if hi - lo <= self.suffix_width + self.suffix_behind + 1 or s[hi - 1] == "\n":  # `$` also before a last \n
            m = self._suffix_any(s[lo:hi])
            return m.end() - m.start() if m else 0
        c = s[hi - 1]
        rules = self._by_last.get(c)
        if rules is None:
            return 0  # no alternative ends in c
        bounded, at = rules
        m = bounded(s, hi - self.suffix_width, hi) if bounded else None
        start = m.start() if m else hi
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
        m = at(s, start, hi)
        return m.end() - m.start() if m else 0

    def same_cycles(self, s: str, passes: list[tuple[int, int, str, str]], lo: int, hi: int, short: int
                    ) -> tuple[int, int]:
        """(k, cycles): the last k of `passes` (each (lo, hi, prefix, suffix) before it stripped them; 1 <= k <=
        len(passes)), taken `cycles` more times from [lo, hi), strip the same affixes and look up no special case
        (every slice longer than `short` plus a cycle). Each pass reads a bounded window at each end (prefix_reach
        from its start, suffix_width + suffix_behind before its end); where the stretch is periodic with the cycle's
        prefixes (and suffixes) as its period, the windows of the next cycles read what this cycle's read. (0, 0)
        when no k repeats. A pass whose window starts (ends) with a character of an unbounded run rule (`..+`, a run of dots)
        reads that run too: a cycle holds such a pass only where its period has another character, which bounds
        the run by the period; a cycle that strips a newline is never taken. The periodic stretch is measured by
        doubling steps (periodic_span), so a look costs about what it lets the loop skip."""
        reach, width = self.prefix_reach, self.suffix_width + self.suffix_behind
        for k in range(1, len(passes) + 1):
            lo0, hi0 = passes[-k][0], passes[-k][1]
            p, q = lo - lo0, hi0 - hi
            if (p and s[lo:lo + p] != s[lo0:lo]) or (q and s[hi - q:hi] != s[hi:hi0]):
                continue  # the next cycle would strip something else
            cycle = passes[-k:]
            if any(s[b - 1] == "\n" or "\n" in x + y for a, b, x, y in cycle):
                return 0, 0  # every longer cycle holds this pass too
            pre_run = any(s[a] in self._prefix_runs for a, _, _, _ in cycle)
            suf_run = any(s[b - 1] in self._suffix_runs for _, b, _, _ in cycle)
            if (pre_run and len(set(s[lo0:lo])) < 2) or (suf_run and len(set(s[hi:hi0])) < 2):
                continue  # a run the period does not bound (or no period: the run reaches towards the other end)
            ahead = reach + (p if pre_run else 0)
            behind = width + (q if suf_run else 0)
            need = max(short, behind + 2, ahead) + p + q + 1
            cycles = (hi - lo - need) // (p + q)
            if cycles < 1:
                continue
            if p:  # [lo0, lo + cycles * p + ahead) must be p-periodic
                span = periodic_span(s, lo0, p, lo + cycles * p + ahead - lo0)
                cycles = min(cycles, (lo0 + span - lo - ahead) // p)
            if q and cycles >= 1:  # (hi - cycles * q - behind, hi0] likewise, read backwards
                span = periodic_span_back(s, hi0, q, hi0 - (hi - cycles * q - behind))
                cycles = min(cycles, (span - (hi0 - hi) - behind) // q)
            if cycles >= 1:
                return k, cycles
        return 0, 0


def _by_last_char(alternatives_: list[str], bounded: list[str]) -> dict[str, tuple]:
    """Affixes._by_last: for each character some alternative can end in, (search over the bounded alternatives that can
    end in it, or None; match over every alternative that can). Characters that select the same alternatives share
    one pair, so the expressions compiled are as many as the rules' distinct groups, whatever a page holds."""
    from re import _parser as parser

    lasts = []
    for a in alternatives_:
        last = _end_chars(list(parser.parse(a[:-1]).data))  # without its `$`
        if last is None:
            raise ValueError(f"suffix rule {a!r}: the characters it can end in are not known")
        lasts.append(last)
    by_char: dict[str, list[int]] = {}
    for i, last in enumerate(lasts):
        for c in last:
            by_char.setdefault(c, []).append(i)
    compiled: dict[tuple[int, ...], tuple] = {}
    out = {}
    for c, idx in by_char.items():
        key = tuple(idx)
        if key not in compiled:
            some = [alternatives_[i] for i in idx if alternatives_[i] in bounded]
            compiled[key] = (re.compile("|".join(some)).search if some else None,
                             re.compile("|".join(alternatives_[i] for i in idx)).match)
        out[c] = compiled[key]
    return out


def _run_char(alternative: str, kind: str) -> str:
    """The character of an unbounded rule that is a run of one character (`\\.\\.+`, `xx+`); else refused."""
    m = re.fullmatch(r"(\\?.)\1\+", alternative)
    if not m:
        raise ValueError(f"{kind} rule {alternative!r} is unbounded and not a run of one character: words.py's "
                         "linear-time search does not cover it")
    return m.group(1)[-1]


def periodic_span(s: str, start: int, p: int, want: int) -> int:
    """A length L <= want with s[start:start + L] p-periodic (s[i] == s[i + p]), at least half the longest such
    length up to want: checked in doubling steps, each a comparison of two slices, so the cost is O(L + p)."""
    ok, step = min(p, want), p
    while ok < want:
        nxt = min(want, ok + step)
        if s[start + ok:start + nxt] != s[start + ok - p:start + nxt - p] or start + nxt > len(s):
            break
        ok, step = nxt, step * 2
    return ok


def periodic_span_back(s: str, end: int, q: int, want: int) -> int:
    """periodic_span read backwards: a length L <= want with s[end - L:end] q-periodic."""
    ok, step = min(q, want), q
    while ok < want:
        nxt = min(want, ok + step)
        if end - nxt < 0 or s[end - nxt:end - ok] != s[end - nxt + q:end - ok + q]:
            break
        ok, step = nxt, step * 2
    return ok
