"""VADER's human-scored sentences (Hutto & Gilbert 2014), as shipped in vaderSentiment's sdist.

Four sets (`<set>_GroundTruth.txt`: `id<TAB>score<TAB>text`, the score the mean of about 10
human ratings on [-4, 4]): tweets, movie-review, Amazon-review and NYT-editorial snippets,
23,703 sentences. Each becomes one JSONL row with the score (a regression target) and a
3-class label: negative (score <= -0.5), neutral, positive (score >= 0.5). The split is a hash
of (set, id): 10% test, 10% validation, the rest train. Licence: MIT (vaderSentiment).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines.labeled.splits import split_of

SETS = ("movieReviewSnippets", "amazonReviewSnippets", "nytEditorialSnippets", "tweets")
BAND = 0.5
DEFAULT_SOURCE = "samples/labeled/vader"
LICENCE_FILE = "LICENSE.txt"
FINETUNE = {"task": "classification", "text_column": "text", "label_column": "label"}
DESCRIPTION = "VADER sentiment: 23.7k human-scored sentences (tweets, reviews, editorials); 3 classes or the score"


def label_of(score: float) -> str:
    return "positive" if score >= BAND else "negative" if score <= -BAND else "neutral"


def rows(source: Path, counts: Counter) -> Iterator[dict[str, Any]]:
    for name in SETS:
        path = source / f"{name}_GroundTruth.txt"
        if not path.exists():
            raise FileNotFoundError(f"{path}: VADER set {name!r} not found (expected {', '.join(SETS)})")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split("\t", 2)
            try:
                score = float(parts[1])
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{n}: expected id<TAB>score<TAB>text, got {line[:80]!r}") from None
            uid = f"{name}:{parts[0]}"
            label = label_of(score)
            counts[label] += 1
            yield {"id": uid, "text": parts[2].strip(), "label": label, "score": score, "set": name,
                   "split": split_of(uid)}
