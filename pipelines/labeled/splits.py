"""The labelled sets' train / validation / test assignment, shared by every source converter."""
from __future__ import annotations

import hashlib

TEST_PER_MILLE = 100
VALIDATION_PER_MILLE = 100


def split_of(uid: str) -> str:
    """train / validation / test by a stable hash of the id: 10% test, 10% validation."""
    b = int.from_bytes(hashlib.blake2b(f"split:{uid}".encode(), digest_size=8).digest(), "big") % 1000
    return "test" if b < TEST_PER_MILLE else "validation" if b < TEST_PER_MILLE + VALIDATION_PER_MILLE else "train"
