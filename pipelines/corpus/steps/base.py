"""The contract every cleaning step keeps, and two helpers the rule families share.

A step is `apply(page, options) -> (page, None)` to pass the page on (rewritten or not) or
`(None, reason)` to drop it; `reason` is the drop reason the stage records and counts
(`dropped_<reason>`). `options` is the step's own config: `CorpusConfig.<step.name>`. A filter
that only decides (None keeps, a reason drops) is a step through `filter_step`, as a datatrove
filter implements only `filter(doc)` and its base class does the rest.

The page carries its URL (for the URL filter; "" when the input has none) and its language: "und"
until the language step sets it (and with --no-language-id), so a step after it in `registry.STEPS`
can use the identified language.

What a step does besides keeping or dropping is recorded, not printed:
  - a drop reason may be a `Reason`, a str that also carries what matched (the blocked domain, the
    evaluation item); the stage writes it to the dropped row's `detail`;
  - a page passed on may carry `Note`s: counts of what a step rewrote (PII replaced, by kind), or a
    match kept on purpose (decontamination's mark mode); the stage tallies them (`counts.noted`) and
    writes the matches beside the corpus.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.config import require


class Reason(str):
    """A drop reason (counted by its text, as every reason) with what matched: `Reason("url_domain",
    "example.com")`. Equal to the plain string, so counting and tests see the reason only."""
    detail: str

    def __new__(cls, reason: str, detail: str = "") -> Reason:
        out = super().__new__(cls, reason)
        out.detail = detail
        return out

    def __reduce__(self):  # pickled with its detail (Beam moves DoFn outputs between processes)
        return Reason, (str(self), self.detail)


@dataclass(frozen=True)
class Note:
    """What a step did to a page it passed on: `count` occurrences of `kind` (the tally
    `counts.noted.<kind>`), and, for a match worth a row of its own, `detail` (JSON text)."""
    kind: str
    count: int = 1
    detail: str = ""


@dataclass(frozen=True)
class Page:
    """A document as the steps see it: its text so far, its URL, its language once identified,
    and the notes steps left on it."""
    text: str
    language: str = "und"  # ISO 639-1 once the language step has run
    language_score: float = 1.0
    url: str = ""
    notes: tuple[Note, ...] = ()


Decision = tuple[Page | None, str | None]
"""(the page to pass on, None) or (None, the drop reason: a str or a Reason)."""


def _enabled(options: Any) -> bool:
    return options.enabled


@dataclass(frozen=True)
class Step:
    """One step of the cleaning chain (registry.STEPS)."""
    name: str
    """The CorpusConfig field holding its options: flags `--<name>-<option>`, `--config` key `<name>`.
    Steps of one family share it (C4's line cleaning and bad words: `c4`)."""
    apply: Callable[[Page, Any], Decision]
    config: type | None = None
    """Its options dataclass, `enabled` among them; None: the options are CorpusConfig's own fields
    (the language step, whose flags --language-id, --languages, --min-language-score are older)."""
    help: str = ""
    """What the family is, with its source (the help of its CorpusConfig field)."""
    enabled: Callable[[Any], bool] = _enabled
    """Whether it runs, from its options (default: `options.enabled`)."""

    def options(self, cfg: Any) -> Any:
        """This step's options in the corpus config `cfg`."""
        return cfg if self.config is None else getattr(cfg, self.name)


def filter_step(decide: Callable[[Page, Any], str | None]) -> Callable[[Page, Any], Decision]:
    """A pure decision (None keeps, a reason drops) as a step's `apply`: a kept page passes unchanged."""
    def apply(page: Page, options: Any) -> Decision:
        reason = decide(page, options)
        return (None, reason) if reason else (page, None)
    return apply


# ---------------------------------------------------------------------------------------------
# Shared by the rule families
# ---------------------------------------------------------------------------------------------

def fraction(name: str, value: float) -> None:
    """Config validation: `value` is a fraction in [0, 1]."""
    require(0.0 <= value <= 1.0, f"{name} must be a fraction in [0, 1], got {value}")


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


def trie_regex(words: set[str], any_prefix: bool = False) -> str:
    """A regular expression matching exactly the strings of `words`, shaped as their trie
    (`ab(?:c|d(?:e)?)`): Python's re tries the branches of a flat alternation one by one at every
    position of the text, a trie's shared prefixes once. With `any_prefix`, a word that others start
    with ends its branch (enough for "does any word occur", as an Aho-Corasick automaton reports the
    first word it meets); otherwise the longer words stay reachable (`ass(?:hole)?`), so what follows
    the word (a word boundary) can still be required. A flat alternation was considered and measured:
    C4's English bad-words expression took 0.37 ms a page in `bench corpus`'s end-to-end run."""
    root: dict = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        if "" in node and any_prefix:
            return ""
        parts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not parts:
            return ""
        body = parts[0] if len(parts) == 1 and "" not in node else "(?:" + "|".join(parts) + ")"
        return body + "?" if "" in node else body

    return emit(root)
