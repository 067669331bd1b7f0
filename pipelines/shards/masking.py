"""Pure BERT masking, precomputed: K variants per row, stored as (positions, replacement ids).

For each variant k a generator seeded from (seed, shard, row, k) picks round(rate * n)
positions among the n maskable tokens (never [CLS]/[SEP]/[PAD] or other specials), then puts
[MASK] at 80% of them, a random non-special id at 10% and leaves 10% unchanged (BERT's
80/10/10). At rate 0.15 and 126 maskable tokens that is 19 positions per variant, so 10
variants cost 10 * 19 * (2 + 4) bytes = 1.1 KB per row next to 512 bytes of input ids.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmforge.config import opt, require


@dataclass
class MaskConfig:
    num_variants: int = opt(10, "K mask variants per row; the loader uses variant epoch % K (BERT's dupe factor is 10)")
    rate: float = opt(0.15, "fraction of maskable tokens selected per variant")
    mask_fraction: float = opt(0.8, "of the selected, the fraction replaced by [MASK]")
    random_fraction: float = opt(0.1, "of the selected, the fraction replaced by a random token (the rest stay)")
    seed: int = opt(0, "masks are a pure function of (seed, shard, row, k)")

    def __post_init__(self) -> None:
        require(self.num_variants >= 1, "num_variants must be >= 1")
        require(0.0 < self.rate <= 0.4, f"rate must be in (0, 0.4], got {self.rate}")
        require(0.0 <= self.mask_fraction and 0.0 <= self.random_fraction and self.mask_fraction + self.random_fraction <= 1.0,
                "mask_fraction + random_fraction must be within [0, 1]")


def mask_variants(input_ids: np.ndarray, length: int, special_ids: np.ndarray, vocab_size: int,
                  mask_id: int, cfg: MaskConfig, shard: int, row: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """K (positions int16, replacement ids int32) pairs for one row."""
    ids = input_ids[:length]
    maskable = np.flatnonzero(~np.isin(ids, special_ids))
    # Random replacements come from the non-special part of the vocabulary.
    low = int(special_ids.max()) + 1 if special_ids.size else 0
    positions, tokens = [], []
    for k in range(cfg.num_variants):
        rng = np.random.default_rng([cfg.seed, shard, row, k])
        n = int(round(cfg.rate * maskable.size))
        if maskable.size and n == 0:
            n = 1
        pos = np.sort(rng.choice(maskable, size=n, replace=False)) if n else np.zeros(0, np.int64)
        u = rng.random(n)
        rep = ids[pos].astype(np.int32)
        rep[u < cfg.mask_fraction] = mask_id
        rnd = (u >= cfg.mask_fraction) & (u < cfg.mask_fraction + cfg.random_fraction)
        rep[rnd] = rng.integers(low, vocab_size, size=int(rnd.sum()), dtype=np.int32)
        positions.append(pos.astype(np.int16))
        tokens.append(rep)
    return positions, tokens
