"""Keep/drop agreement of lmforge's cleaning rules with datatrove's filters, page by page (issue 16).

Each page goes through both implementations, family by family on the same text (the page as the
rules first see it), and through both chains, where each family sees what the one before kept:

    family              lmforge (pipelines/corpus)                      datatrove 0.10
    c4                  filters.clean_page (variant "paper")            C4QualityFilter()
    gopher_repetition   quality.gopher_repetition                       GopherRepetitionFilter()
    gopher_quality      quality.gopher_quality(language="en")           GopherQualityFilter()
    fineweb             quality.fineweb_quality                         FineWebQualityFilter()

datatrove implements the C4 paper's statement (>= 3 words per line, >= 5 sentences per page), so
lmforge runs its "paper" variant here. Pages are compared on English text: datatrove's filters
default to English, and the stop-word rule is English.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

FAMILIES = ("c4", "gopher_repetition", "gopher_quality", "fineweb")
CHAIN = "chain"


def lmforge_config():
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.filters import C4Config

    return CorpusConfig(input=["-"], output="-", c4=C4Config(variant="paper"))


def lmforge_family(family: str, text: str, cfg: Any) -> tuple[str | None, str]:
    """(reason it drops the page or None, the text the next family sees)."""
    from pipelines.corpus.filters import clean_page
    from pipelines.corpus.quality import fineweb_quality, gopher_quality, gopher_repetition

    if family == "c4":
        page, reason = clean_page(text, cfg.c4)
        return reason, page if page is not None else text
    if family == "gopher_repetition":
        return gopher_repetition(text, cfg.gopher_repetition), text
    if family == "gopher_quality":
        return gopher_quality(text, cfg.gopher_quality, "en"), text
    if family == "fineweb":
        return fineweb_quality(text, cfg.fineweb), text
    raise ValueError(family)


def datatrove_filters() -> dict[str, Any]:
    """datatrove's filters with their defaults (ImportError if datatrove is not installed: `pip install -e '.[bench]'`)."""
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    return {"c4": C4QualityFilter(), "gopher_repetition": GopherRepetitionFilter(), "gopher_quality": GopherQualityFilter(),
            "fineweb": FineWebQualityFilter()}


def datatrove_family(f: Any, text: str) -> tuple[str | None, str]:
    from datatrove.data import Document

    doc = Document(text=text, id="page")
    res = f.filter(doc)
    if res is True:
        return None, doc.text
    return (res[1] if isinstance(res, tuple) else "dropped"), text


def chain(decide: Callable[[str, str], tuple[str | None, str]], text: str) -> str | None:
    """The first family that drops the page, as "family:reason", or None (kept)."""
    for family in FAMILIES:
        reason, text = decide(family, text)
        if reason is not None:
            return f"{family}:{reason}"
    return None


@dataclass
class Confusion:
    both_keep: int = 0
    both_drop: int = 0
    only_lmforge_keeps: int = 0
    only_datatrove_keeps: int = 0
    classes: Counter = field(default_factory=Counter)  # (lmforge reason or "keep", datatrove reason or "keep") of disagreements
    examples: dict = field(default_factory=dict)  # class -> first page id

    def add(self, page_id: str, ours: str | None, theirs: str | None) -> None:
        if ours is None and theirs is None:
            self.both_keep += 1
        elif ours is not None and theirs is not None:
            self.both_drop += 1
        else:
            if ours is None:
                self.only_lmforge_keeps += 1
            else:
                self.only_datatrove_keeps += 1
            cls = (ours or "keep", theirs or "keep")
            self.classes[cls] += 1
            self.examples.setdefault(cls, page_id)

    @property
    def n(self) -> int:
        return self.both_keep + self.both_drop + self.only_lmforge_keeps + self.only_datatrove_keeps

    @property
    def agreement(self) -> float:
        return (self.both_keep + self.both_drop) / self.n if self.n else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"pages": self.n, "agreement": round(self.agreement, 4), "both_keep": self.both_keep, "both_drop": self.both_drop,
                "only_lmforge_keeps": self.only_lmforge_keeps, "only_datatrove_keeps": self.only_datatrove_keeps,
                "classes": [{"lmforge": a, "datatrove": b, "pages": n, "example": self.examples[(a, b)]}
                            for (a, b), n in self.classes.most_common()]}


def compare(pages: Iterable[tuple[str, str]]) -> dict[str, Confusion]:
    """Per family (same input text) and for the whole chain: the confusion of keep/drop decisions."""
    cfg, filters = lmforge_config(), datatrove_filters()
    ours = lambda fam, t: lmforge_family(fam, t, cfg)  # noqa: E731
    theirs = lambda fam, t: datatrove_family(filters[fam], t)  # noqa: E731
    out = {name: Confusion() for name in (*FAMILIES, CHAIN)}
    for page_id, text in pages:
        for fam in FAMILIES:
            out[fam].add(page_id, ours(fam, text)[0], theirs(fam, text)[0])
        out[CHAIN].add(page_id, chain(ours, text), chain(theirs, text))
    return out


def render(name: str, result: dict[str, Confusion], top: int = 8) -> str:
    lines = [f"Keep/drop agreement with datatrove 0.10.1 on {name} (lmforge's C4 variant: paper):", "",
             "| family | pages | agreement | both keep | both drop | only lmforge keeps | only datatrove keeps |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for fam, c in result.items():
        lines.append(f"| {fam} | {c.n:,} | {100 * c.agreement:.1f}% | {c.both_keep:,} | {c.both_drop:,} | "
                     f"{c.only_lmforge_keeps:,} | {c.only_datatrove_keeps:,} |")
    classes = result[CHAIN].classes.most_common(top)
    if classes:
        lines += ["", f"Largest disagreement classes of the chain (of {len(result[CHAIN].classes)}):", "",
                  "| lmforge | datatrove | pages | example page |", "|---|---|---:|---|"]
        lines += [f"| {a} | {b} | {n} | `{result[CHAIN].examples[(a, b)]}` |" for (a, b), n in classes]
    return "\n".join(lines) + "\n"
