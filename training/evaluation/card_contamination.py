"""The card's contamination line: what the pretraining corpus held of the evaluation sets.

The card's shards name their corpus (the shards manifest's `config.corpus`); that corpus's manifest
says whether it was checked (`extra.decontamination`: files, n-grams, mode) and what was found
(`counts.contamination`, per task: items, too short to check, found, by split, pages dropped or kept).
A score is flagged when its task's test split has items in the pretraining data: found and kept
(decontamination's mark mode). Found and dropped means the pages are gone, which the line also says.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from schemas.card import shown_path
from schemas.manifest import read_manifest


def contamination(shards: str | None, task_config: str = "") -> dict[str, Any] | None:
    """{"corpus", "checked", "mode", "n_grams", "tasks": {...}, "task": the card's task name or None,
    "test_items_in_pretraining": n} for the corpus behind `shards`; None without shards or a corpus."""
    if not shards:
        return None
    try:
        corpus = read_manifest(shards)["config"].get("corpus")
        m = read_manifest(corpus) if corpus else None
    except (OSError, ValueError, KeyError):
        return None
    if m is None:
        return None
    decont = (m.get("extra") or {}).get("decontamination")
    task = card_task(task_config, decont["files"]) if decont and task_config else None
    out: dict[str, Any] = {"corpus": str(corpus), "checked": bool(decont), "task": task, "test_items_in_pretraining": 0}
    if not decont:
        return out
    tasks = m["counts"].get("contamination", {})
    out.update(mode=decont["mode"], n_grams=decont["n_grams"], tasks=tasks)
    if task in tasks and decont["mode"] == "mark":  # found and kept: the pretraining data holds them
        out["test_items_in_pretraining"] = tasks[task]["found_by_split"].get("test", 0)
    return out


def card_task(task_config: str, files: list[str]) -> str | None:
    """The evaluation task (as the corpus stage named it: a folder's name, a file's stem) whose files the
    card's task reads: a data file of `task_config` that is, or lies in, one of the checked `files`."""
    try:
        data = [Path(d).resolve() for d in json.loads(Path(task_config).read_text()).get("data", [])]
    except (OSError, ValueError):
        return None
    for f in map(Path, files):
        root = f.resolve()
        if any(d == root or root in d.parents for d in data):
            return f.name if f.is_dir() else f.stem
    return None


def lines(c: dict[str, Any] | None, base: str | Path | None = None) -> list[str]:
    """report.md's contamination paragraph; the corpus's path relative to `base` (the run folder) when inside it."""
    if c is None:
        return ["Contamination: not known (the card was given no shards whose corpus it could read)."]
    if not c["checked"]:
        return [f"Contamination: the pretraining corpus (`{shown_path(c['corpus'], base)}`) was not checked against any evaluation set "
                "(`lmforge corpus --decontaminate`)."]
    done = "dropped" if c["mode"] == "drop" else "kept and marked"
    parts = []
    for name, t in sorted(c["tasks"].items()):
        checked = t["items"] - t["too_short"]
        found = ", ".join(f"{n:,} {s}" for s, n in t["found_by_split"].items()) or "none"
        parts.append(f"{name}: {checked:,} of {t['items']:,} validation and test items checkable "
                     f"({t['too_short']:,} shorter than {c['n_grams']} words), found in the crawl: {found}"
                     + (f" ({t['pages_dropped'] + t['pages_kept']:,} pages, {done})" if t["found"] else ""))
    out = [f"Contamination ({c['n_grams']}-word n-grams against the pretraining crawl, `{shown_path(c['corpus'], base)}`; pages that shared "
           f"one were {done}): " + "; ".join(parts) + "."]
    if c["test_items_in_pretraining"]:
        out.append(f"**Contaminated split:** {c['test_items_in_pretraining']:,} test items of {c['task']} are in the "
                   "pretraining data; the test scores of models pretrained on it are measured on text they have seen.")
    return out
