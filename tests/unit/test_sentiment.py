"""The fine-tune task's pure core, on the real VADER files shipped in samples/."""
from __future__ import annotations

from pathlib import Path

import pytest

from training.sentiment import VADER_SETS, load_examples, majority_baseline, read_ground_truth, split_examples

VADER = Path(__file__).resolve().parents[2] / "samples" / "labeled" / "vader"


def test_binarise_counts_reconcile_on_real_files():
    examples, counts = load_examples(VADER, list(VADER_SETS), band=0.5)
    lines = sum(1 for f in VADER.glob("*_GroundTruth.txt") for ln in f.read_text().splitlines() if ln.strip())
    assert lines == 23_703 and counts["bad_lines"] == 0 and counts["in"] == lines
    assert counts["in"] == counts["positive"] + counts["negative"] + counts["neutral"] == len(examples) + counts["neutral"]
    assert all((e.score >= 0.5 and e.label == 1) or (e.score <= -0.5 and e.label == 0) for e in examples)


def test_split_is_stable_and_disjoint():
    examples, _ = load_examples(VADER, ["movieReviewSnippets"], band=0.5)
    train, test = split_examples(examples, 200)
    again, _ = split_examples(list(reversed(examples)), 200)
    assert {e.uid for e in train} == {e.uid for e in again}
    assert not {e.uid for e in train} & {e.uid for e in test}
    assert 0.17 < len(test) / len(examples) < 0.23
    majority, acc = majority_baseline(train, test)
    assert majority in (0, 1) and 0.4 < acc < 0.7


def test_bad_lines_are_reported(tmp_path):
    f = tmp_path / "x_GroundTruth.txt"
    f.write_text("1\t2.5\tgood film.\n2\tnot-a-number\tbad\njust text\n")
    rows, bad = read_ground_truth(f)
    assert rows == [("1", 2.5, "good film.")] and [b[0] for b in bad] == [2, 3]
    with pytest.raises(FileNotFoundError, match="nope"):
        load_examples(tmp_path, ["nope"], 0.5)
