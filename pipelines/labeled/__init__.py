"""Real labelled datasets turned into the files `lmforge finetune` reads (`lmforge labeled prepare NAME`).

Each source module converts one dataset as its publisher ships it (VADER's ground-truth
files, the Reuters-21578 ARFF files in Debian's weka, ...) into the standard layout
(`schemas.finetune`, "Prepared task directory"): `data.jsonl` (or CoNLL files) with a `split`
column, `finetune.json` (the `lmforge finetune --config` options that name the task and the
columns), the licence, a README and, last, `manifest.json`. Fine-tuning then reads the
dataset as it reads a user's own files; nothing downstream knows where it came from.
"""
from __future__ import annotations

from pipelines.labeled.registry import SOURCES, prepare

__all__ = ["SOURCES", "prepare"]
