"""Pure core for the fine-tune task: VADER's human-scored sentences, binarised and split.

The files (`<set>_GroundTruth.txt`, `id<TAB>score<TAB>text`, scores are the mean of ~20 human
ratings on [-4, 4]) come from vaderSentiment's source archive (MIT; see samples/README.md).
A sentence is positive if score >= band, negative if score <= -band, and left out as neutral
in between (counted, not lost). The split is a hash of (set, id), so it never depends on
file order.
"""
from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

VADER_SETS = ("movieReviewSnippets", "amazonReviewSnippets", "nytEditorialSnippets", "tweets")


@dataclass(frozen=True)
class Example:
    uid: str
    text: str
    label: int  # 1 positive, 0 negative
    score: float


def read_ground_truth(path: Path) -> tuple[list[tuple[str, float, str]], list[tuple[int, str]]]:
    """(rows, bad lines as (line number, reason)); a bad line is reported, not guessed at."""
    rows, bad = [], []
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="strict").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t", 2)
        if len(parts) != 3:
            bad.append((i, "expected id<TAB>score<TAB>text"))
            continue
        try:
            rows.append((parts[0], float(parts[1]), parts[2].strip()))
        except ValueError:
            bad.append((i, f"score {parts[1]!r} is not a number"))
    return rows, bad


def load_examples(data_dir: str | Path, sets: list[str], band: float) -> tuple[list[Example], Counter]:
    counts: Counter = Counter()
    out = []
    for name in sets:
        path = Path(data_dir) / f"{name}_GroundTruth.txt"
        if not path.exists():
            raise FileNotFoundError(f"{path}: VADER set {name!r} not found (expected one of {VADER_SETS})")
        rows, bad = read_ground_truth(path)
        counts["bad_lines"] += len(bad)
        for rid, score, text in rows:
            counts["in"] += 1
            if -band < score < band:
                counts["neutral"] += 1
                continue
            out.append(Example(f"{name}:{rid}", text, int(score > 0), score))
            counts["positive" if score > 0 else "negative"] += 1
    return out, counts


def split_examples(examples: list[Example], test_per_mille: int) -> tuple[list[Example], list[Example]]:
    train, test = [], []
    for ex in examples:
        (test if zlib.crc32(ex.uid.encode()) % 1000 < test_per_mille else train).append(ex)
    return train, test


def majority_baseline(train: list[Example], test: list[Example]) -> tuple[int, float]:
    """The train set's majority label and its accuracy on the test set."""
    majority = Counter(e.label for e in train).most_common(1)[0][0]
    return majority, sum(e.label == majority for e in test) / max(1, len(test))
