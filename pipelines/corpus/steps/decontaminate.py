"""Decontamination as a cleaning step: a page that shares a word n-gram (12 by default) with an
item of the evaluation sets given by `--decontaminate FILE...` is dropped (`contaminated`), or with
`--decontaminate-mode mark` kept and listed in `matches/`. The core (reading the sets, the n-gram
index, matching as datatrove's NGramsDecontFilter) is pipelines/corpus/decont.py.

The decision is datatrove's: the page's first n-gram, in text order, that the index holds. What is
recorded goes further: every evaluation item the page shares an n-gram with (up to MAX_ITEMS), so the
corpus report can say how many items of each task the corpus holds, not only how many pages.

It runs after the quality rules, on the text that is kept (C4's line cleaning may have removed the
lines a test sentence was in), and before PII scrubbing, which rewrites addresses an evaluation item
could share with a page. Each worker process builds the index once from the files (an evaluation
set is small: VADER's 4,647 validation and test items build in well under a second); the stage
also builds it first on the driver, so a bad file fails before any page is read.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import replace

from pipelines.corpus.decont import DecontConfig, NGramIndex, read_eval_sets
from pipelines.corpus.steps.base import Decision, Note, Page, Reason, Step

MAX_ITEMS = 50  # items listed per page; a page holding a whole test set is flagged by its first 50
REASON = "contaminated"  # the drop reason, and the note's kind in mark mode


def _key(cfg: DecontConfig) -> str:
    return json.dumps({**vars(cfg), "mode": None, "enabled": None}, sort_keys=True)


@functools.lru_cache(maxsize=4)
def _index(key: str) -> NGramIndex:
    cfg = DecontConfig(**{k: v for k, v in json.loads(key).items() if k not in ("mode", "enabled")})
    return NGramIndex.build(read_eval_sets(cfg), cfg)


def index_for(cfg: DecontConfig) -> NGramIndex:
    """The index of `cfg`'s evaluation sets, built once per process."""
    return _index(_key(cfg))


def detail(index: NGramIndex, text: str) -> str | None:
    """JSON: the first shared n-gram and every item shared, or None if the page shares nothing."""
    first, items = None, {}
    for m in index.matches(text):
        first = first or m
        for it in m.items:
            items.setdefault((it.task, it.split, it.item), None)
        if len(items) >= MAX_ITEMS:
            break
    if first is None:
        return None
    return json.dumps({"ngram": first.ngram, "items": [list(k) for k in list(items)[:MAX_ITEMS]]}, ensure_ascii=False)


def apply(page: Page, cfg: DecontConfig) -> Decision:
    found = detail(index_for(cfg), page.text)
    if found is None:
        return page, None
    if cfg.mode == "mark":
        return replace(page, notes=page.notes + (Note(REASON, 1, found),)), None
    return None, Reason(REASON, found)


STEP = Step("decontaminate", apply, DecontConfig,
            "decontamination against evaluation sets (GPT-3; datatrove NGramsDecontFilter): pages sharing a word n-gram "
            "with a validation or test item are dropped or marked",
            enabled=lambda cfg: cfg.enabled and bool(cfg.files))


def summary(cfg: DecontConfig) -> dict | None:
    """What the manifest records about the evaluation sets (None when the step does not run); builds
    the index, so an unreadable or empty evaluation file fails here, naming it."""
    if not STEP.enabled(cfg):
        return None
    index = index_for(cfg)
    return {"files": list(cfg.files), "splits": list(cfg.splits), "mode": cfg.mode, **cfg.norm(),
            "items": index.items_per_task(), "too_short": dict(index.too_short)}


def contamination(summary: dict, details: list[tuple[str, str]]) -> dict[str, dict]:
    """Per task: items read, too short to check, items found in the corpus, and the pages that held
    them by what became of them. `details` are (action, detail JSON) of every page flagged: action
    "dropped" (the dropped row's detail) or "kept" (a matches/ row, mark mode)."""
    out = {task: {"items": n, "too_short": summary["too_short"].get(task, 0), "found": 0, "found_by_split": {},
                  "pages_dropped": 0, "pages_kept": 0} for task, n in summary["items"].items()}
    found: dict[str, set] = {task: set() for task in out}
    for action, text in details:
        tasks = set()
        for task, split, item in json.loads(text)["items"]:
            found.setdefault(task, set()).add((split, item))
            tasks.add(task)
        for task in tasks:
            out[task]["pages_dropped" if action == "dropped" else "pages_kept"] += 1
    for task, items in found.items():
        out[task]["found"] = len(items)
        by_split: dict[str, int] = {}
        for split, _ in items:
            by_split[split] = by_split.get(split, 0) + 1
        out[task]["found_by_split"] = dict(sorted(by_split.items()))
    return out


def fingerprint(cfg: DecontConfig) -> str | None:
    """What the evaluation sets hold, not where they are: sha256 of every item (task, split, id, text)
    and the matching options. Two refreshes that prepared the same task under their own run folders
    decontaminate alike, so a snapshot's fingerprint in the band index must not differ by the path."""
    if not STEP.enabled(cfg):
        return None
    items = [(it.task, it.split, it.item, it.text) for it in read_eval_sets(cfg)]
    return hashlib.sha256(json.dumps([items, cfg.norm(), cfg.mode], ensure_ascii=False).encode()).hexdigest()
