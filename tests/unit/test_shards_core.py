"""Pure cores of the shards stage: packing and precomputed masks."""
from __future__ import annotations

import numpy as np
import pytest

from pipelines.shards.masking import MaskConfig, mask_variants
from pipelines.shards.packing import pack

CLS, SEP, PAD, MASK = 2, 3, 0, 4
SPECIAL = np.array([0, 1, 2, 3, 4], np.int32)


def test_pack_keeps_every_token_and_records_boundaries():
    docs = [[10, 11, 12], [20, 21], [30, 31, 32, 33, 34, 35]]
    rows = list(pack(docs, seq_len=8, cls_id=CLS, sep_id=SEP, pad_id=PAD))
    flat = [t for r in rows for t in r.input_ids[: r.length]]
    assert flat == [CLS, 10, 11, 12, SEP, CLS, 20, 21, SEP, CLS, 30, 31, 32, 33, 34, 35, SEP]
    assert all(len(r.input_ids) == 8 for r in rows)
    assert rows[0].doc_starts == [0, 5] and rows[1].doc_starts == [1]
    assert rows[-1].length == 1 and rows[-1].input_ids[1:] == [PAD] * 7


def test_masks_rate_split_specials_and_determinism():
    rng = np.random.default_rng(0)
    cfg = MaskConfig(num_variants=4, rate=0.15)
    selected = replaced_mask = replaced_same = 0
    for row in range(300):
        ids = np.concatenate([[CLS], rng.integers(5, 1000, 126), [SEP]]).astype(np.int32)
        ids[-10:] = PAD
        length = 118
        pos, tok = mask_variants(ids, length, SPECIAL, 1000, MASK, cfg, shard=0, row=row)
        assert len(pos) == 4 and not all(np.array_equal(pos[0], p) for p in pos[1:])
        for p, t in zip(pos, tok):
            assert p.dtype == np.int16 and t.dtype == np.int32
            assert not np.isin(ids[p], SPECIAL).any() and (p < length).all()
            assert len(p) == round(0.15 * (length - 1))  # all but [CLS]
            selected += len(p)
            replaced_mask += int((t == MASK).sum())
            replaced_same += int((t == ids[p]).sum())
        again = mask_variants(ids, length, SPECIAL, 1000, MASK, cfg, shard=0, row=row)
        assert all(np.array_equal(a, b) for a, b in zip(pos, again[0]))
    # 80/10/10 within tolerance over ~21k selections (sd of a 10% share is ~0.2 points).
    assert abs(replaced_mask / selected - 0.8) < 0.02
    assert abs(replaced_same / selected - 0.1) < 0.02


def test_mask_config_validates():
    with pytest.raises(ValueError):
        MaskConfig(rate=0.6)
    with pytest.raises(ValueError):
        MaskConfig(mask_fraction=0.9, random_fraction=0.2)
