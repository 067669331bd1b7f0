"""Exact shingle-set confirmation of LSH candidates."""
from __future__ import annotations

from pipelines.corpus.dedup import exact_jaccard, shingle_hashes, shingles

TEXT = ("We will support our users who develop and run non-free works on Debian, but we will never make "
        "the system depend on an item of non-free software. We will give back to the free software community.")


def test_exact_jaccard_matches_set_jaccard():
    other = TEXT.replace("never make", "not make").replace("give back", "contribute")
    a, b = set(shingles(TEXT)), set(shingles(other))
    assert abs(exact_jaccard(shingle_hashes(TEXT), shingle_hashes(other)) - len(a & b) / len(a | b)) < 1e-12
    assert exact_jaccard(shingle_hashes(TEXT), shingle_hashes(TEXT)) == 1.0
    h = shingle_hashes(TEXT)
    assert (h[1:] > h[:-1]).all() and h.dtype.name == "uint64"
