"""What each model on an evaluation card is, in the words of the run that made it: teacher, student,
fine-tuned, student fine-tuned, int8, pruned 25%. The card's rows and charts are named by these; the
path goes to a details column (issue 29: `<checkout>/runs/demo/pretrain/hf` told a user nothing, and
two such labels printed over each other in the quality/cost chart).

Read from the stage manifests beside the models (`lmforge evaluate --model` takes any folders); the DAG
passes its own names (`--name`), the same words. A folder without a manifest is named by its path's
last meaningful part.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _stage(model_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """(stage folder, its manifest) for a model folder: the folder itself, or the stage holding it as hf/ or
    share-X.XX/."""
    for d in (model_dir, model_dir.parent):
        m = d / "manifest.json"
        if m.is_file():
            try:
                return d, json.loads(m.read_text())
            except ValueError:
                return None
    return None


def _same(a: Any, b: Path) -> bool:
    if not a:
        return False
    p = Path(str(a)).resolve()
    return p in (b.resolve(), (b / "hf").resolve())


def role(model_dir: str | Path, others: list[str | Path] = ()) -> str:
    """The model's role: pretrained ("teacher" when a student among `others` was distilled from it),
    student, fine-tuned or student fine-tuned, int8 or pruned N% (of what they compress, when that is not
    the fine-tuned model), else the folder's name."""
    p = Path(model_dir)
    found = _stage(p)
    fallback = f"{p.parent.name}/{p.name}" if p.name == "hf" or p.name.startswith("share-") else p.name
    if found is None:
        return fallback
    stage_dir, m = found
    stage, cfg = m.get("stage"), m.get("config") or {}
    if stage == "pretrain":
        for o in others:
            of = _stage(Path(o))
            if of and of[1].get("stage") == "distill" and _same((of[1].get("config") or {}).get("teacher"), stage_dir):
                return "teacher"
        return "pretrained"
    if stage == "distill":
        return "student"
    if stage == "finetune":
        source = _stage(Path(str(cfg.get("model", ""))))
        return "student fine-tuned" if source and source[1].get("stage") == "distill" else "fine-tuned"
    if stage == "compress":
        source = _stage(Path(str(cfg.get("model", ""))))
        base = role(cfg["model"]) if source and cfg.get("model") else ""
        what = "int8" if cfg.get("method") == "int8" else (
            f"pruned {float(p.name.removeprefix('share-')):.0%}" if p.name.startswith("share-") else f"{cfg.get('method')}")
        return what if base in ("", "fine-tuned") else f"{base}, {what}"
    return fallback


def names(models: list[str], given: list[str] = ()) -> list[str]:
    """One name per model: `given` where it has one, else its role; a repeated name gets its path's
    last part added, so two rows never read the same."""
    out = [g if g else role(m, models) for m, g in zip(models, [*given, *[""] * (len(models) - len(given))])]
    seen: dict[str, int] = {}
    for n in out:
        seen[n] = seen.get(n, 0) + 1
    return [f"{n} ({Path(m).name})" if seen[n] > 1 else n for n, m in zip(out, models)]
