"""One line per finished stage for `lmforge run`'s console: what the stage made, in the counts its manifest holds.

    [corpus] done in 8.7s: kept 160 of 195 documents (de 80, fr 68, en 12)
    [finetune] done in 21.0s: test accuracy 0.460 (TF-IDF + LR 0.520, majority 0.460)

The flow log keeps every line a stage prints; this is the one a person reads while the DAG runs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _n(x: Any) -> str:
    return f"{x:,}" if isinstance(x, int) else str(x)


def _corpus(c: dict, e: dict) -> str:
    langs = ", ".join(f"{k} {v:,}" for k, v in sorted(c.get("kept_by_language", {}).items(), key=lambda kv: -kv[1]))
    warned = e.get("warnings") or []
    return (f"kept {_n(c.get('kept'))} of {_n(c.get('in'))} documents ({langs or 'none'})"
            + (f"; {len(warned)} warning{'s' if len(warned) > 1 else ''} above" if warned else ""))


def _labeled(c: dict, e: dict) -> str:
    sizes = " / ".join(f"{s} {_n(c.get(f'{s}_examples', 0))}" for s in ("train", "validation", "test"))
    labels = e.get("labels") or []
    return f"{sizes} examples" + (f", {len(labels)} classes" if labels else "")


def _pretrain(c: dict, e: dict) -> str:
    loss = e.get("valid_loss")
    return (f"{_n(c.get('steps'))} steps, {_n(c.get('tokens'))} tokens, loss {e.get('first_loss', 0):.2f} -> "
            f"{e.get('last_loss', 0):.2f}" + (f", validation loss {loss:.2f}" if isinstance(loss, float) else ""))


def _finetune(c: dict, e: dict) -> str:
    test, metric = e.get("test") or {}, e.get("primary_metric", "score")
    names = {"pretrained": "fine-tuned", "scratch": "random init", "tfidf_lr": "TF-IDF + LR", "majority": "majority"}
    order = [*names, *sorted(set(test) - set(names))]
    scores = [f"{names.get(k, k)} {test[k]:.3f}" for k in order if isinstance(test.get(k), (int, float))]
    return f"test {metric}: " + ", ".join(scores) if scores else f"{_n(c.get('test_examples'))} test examples"


def _shards(c: dict, e: dict) -> str:
    return (f"{_n(c.get('train_rows'))} train / {_n(c.get('valid_rows'))} validation rows, "
            f"{_n(c.get('train_tokens'))} train tokens")


def _tokenizer(c: dict, e: dict) -> str:
    return f"{_n(c.get('vocab_size'))} pieces from {_n(c.get('documents'))} documents"


def _distill(c: dict, e: dict) -> str:
    return f"{_n(c.get('steps'))} steps, {_n(c.get('tokens'))} tokens"


def _compress(c: dict, e: dict) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {_n(v)}" for k, v in c.items()) or "written"


def _evaluate(c: dict, e: dict) -> str:
    if e.get("mode") == "card" or "models" in c:
        return f"the card of {_n(c.get('models'))} models"
    return ", ".join(f"{k.replace('_', ' ')} {_n(v)}" for k, v in c.items()) or "written"


SUMMARIES = {"corpus": _corpus, "labeled": _labeled, "tokenizer": _tokenizer, "shards": _shards, "pretrain": _pretrain,
             "finetune": _finetune, "distill": _distill, "compress": _compress, "evaluate": _evaluate}


def shown(path: str | Path) -> str:
    """A path as the user would type it from here: relative to the working folder when it is under it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def stage_summary(stage: str, out: str | Path) -> str:
    """The key counts of a finished stage from its manifest: one clause, no path; 'written' when it has none."""
    try:
        m = json.loads((Path(out) / "manifest.json").read_text())
    except (OSError, ValueError):
        return "written"
    fn = SUMMARIES.get(m.get("stage", stage))
    try:
        return fn(m.get("counts") or {}, m.get("extra") or {}) if fn else "written"
    except (TypeError, ValueError, KeyError):  # a manifest of another version: the line is not worth a failure
        return "written"
