"""training.data: masks, labels, variants, the rank split and schema checks, on tiny in-test shards."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from training.data import IGNORE_INDEX, RankLoader, ShardSet, build_batch, epoch_batches, open_shard, rank_rows
from training.testing import make_shards, make_tokenizer


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> ShardSet:
    root = tmp_path_factory.mktemp("training_data")
    tok = make_tokenizer(root / "tokenizer")
    return ShardSet.open(make_shards(root / "shards", tok, seq_len=32, num_variants=3, train_rows=21, valid_rows=4))


def test_manifest_facts_and_splits(shards):
    assert (shards.seq_len, shards.num_variants) == (32, 3)
    table = shards.read("train")
    assert table.num_rows == 21 and len(shards.files("train")) == 2
    with pytest.raises(ValueError, match="no split 'test'"):
        shards.files("test")


def test_masks_applied_and_labels_ignore_elsewhere(shards):
    table = shards.read("train")
    rows = np.array([0, 2, 5])
    for variant in range(shards.num_variants):
        batch = build_batch(table, rows, variant)
        for b, r in enumerate(rows):
            rec = table.slice(int(r), 1).to_pylist()[0]
            original = torch.tensor(rec["input_ids"])
            pos = torch.tensor(rec["mask_positions"][variant], dtype=torch.long)
            tok = torch.tensor(rec["mask_tokens"][variant])
            assert len(pos) > 0
            assert torch.equal(batch["input_ids"][b, pos], tok)
            assert torch.equal(batch["labels"][b, pos], original[pos])
            others = torch.ones(shards.seq_len, dtype=torch.bool)
            others[pos] = False
            assert (batch["labels"][b, others] == IGNORE_INDEX).all()
            assert torch.equal(batch["input_ids"][b, others], original[others])
            assert batch["attention_mask"][b].tolist() == [1] * rec["length"] + [0] * (shards.seq_len - rec["length"])
    assert all(v.dtype == torch.int64 and v.shape == (3, 32) for v in batch.values())


def test_padded_rows_have_zero_attention(shards):
    batch = build_batch(shards.read("train"), np.array([2]), 0)  # row 2: the fixture pads a quarter
    assert batch["attention_mask"].sum().item() == 32 - 32 // 4


def test_variant_changes_with_epoch(shards):
    table = shards.read("train")
    loader = RankLoader(table, 0, 1, 7, seed=7, num_variants=3)
    assert [loader.variant(e) for e in range(4)] == [0, 1, 2, 0]
    for e in range(4):  # the loader's first batch is this epoch's shuffled rows with variant e % 3
        batches, _ = epoch_batches(loader.split.rows, 7, seed=7, epoch=e, rank=0)
        got, want = next(loader.epoch(e)), build_batch(table, batches[0], e % 3)
        assert all(torch.equal(got[k], want[k]) for k in got)
    labels = [build_batch(table, np.arange(21), v)["labels"] for v in range(3)]
    assert not torch.equal(labels[0], labels[1]) and not torch.equal(labels[1], labels[2])
    # Every variant masks the same text: where labelled, labels are the original ids.
    originals = torch.tensor(table["input_ids"].to_pylist())
    for lab in labels:
        assert torch.equal(lab[lab != IGNORE_INDEX], originals[lab != IGNORE_INDEX])


@pytest.mark.parametrize("num_rows,world", [(21, 2), (20, 2), (7, 3), (5, 1)])
def test_rank_split_disjoint_and_covering(num_rows, world):
    splits = [rank_rows(num_rows, r, world) for r in range(world)]
    rows = np.concatenate([s.rows for s in splits])
    assert len(set(rows.tolist())) == len(rows)  # no overlap
    assert sorted(rows.tolist()) == list(range(num_rows - num_rows % world))  # covers all but the remainder
    assert {len(s.rows) for s in splits} == {num_rows // world}
    assert all(s.dropped == num_rows % world for s in splits)
    assert all((s.rows % world == r).all() for r, s in enumerate(splits))


def test_loader_ranks_equal_batches_and_counted_drops(shards):
    table = shards.read("train")  # 21 rows, 2 ranks, batch 4: 10 rows each, 2 batches, 2 left over
    loaders = [RankLoader(table, r, 2, 4, seed=1, num_variants=3) for r in range(2)]
    assert [loader.batches_per_epoch for loader in loaders] == [2, 2]
    assert loaders[0].counts == {"rows": 21, "rows_per_rank": 10, "dropped_rank_remainder": 1, "dropped_partial_batch": 2}
    seen = [set() for _ in loaders]
    for r, loader in enumerate(loaders):
        batches, left = epoch_batches(loader.split.rows, 4, seed=1, epoch=0, rank=r)
        assert left == 2 and len(batches) == 2
        seen[r] = {int(x) for b in batches for x in b}
    assert not seen[0] & seen[1]


def test_shuffle_is_deterministic_and_changes_per_epoch():
    rows = np.arange(100)
    a, _ = epoch_batches(rows, 10, seed=3, epoch=0)
    b, _ = epoch_batches(rows, 10, seed=3, epoch=0)
    c, _ = epoch_batches(rows, 10, seed=3, epoch=1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_bad_schema_version_names_the_file(tmp_path):
    tok = make_tokenizer(tmp_path / "tokenizer")
    root = make_shards(tmp_path / "shards", tok, train_rows=4, valid_rows=2, train_files=1,
                       schema_version="lmforge.token_shard/v0")
    bad = root / "train" / "shard-00000.arrow"
    with pytest.raises(ValueError, match=r"shard-00000\.arrow.*lmforge\.token_shard/v0"):
        open_shard(bad)
    with pytest.raises(ValueError, match=str(bad)):
        ShardSet.open(root).read("train")


def test_missing_schema_metadata_and_garbage_name_the_file(tmp_path):
    plain = tmp_path / "plain.arrow"
    schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
    with pa.ipc.new_stream(str(plain), schema) as w:
        w.write_table(pa.table({"input_ids": [[1, 2]]}, schema=schema))
    with pytest.raises(ValueError, match=r"plain\.arrow.*'\(none\)'"):
        open_shard(plain)
    junk = tmp_path / "junk.arrow"
    junk.write_bytes(b"not arrow at all")
    with pytest.raises(ValueError, match=r"junk\.arrow"):
        open_shard(junk)


def test_wrong_seq_len_names_file_and_record(shards):
    path = shards.files("train")[0]
    with pytest.raises(ValueError, match=rf"{path.name}: record 0 has 32 input_ids, expected seq_len 64"):
        open_shard(path, seq_len=64)


def test_wrong_variant_count_names_file_and_record(shards):
    path = shards.files("valid")[0]
    with pytest.raises(ValueError, match=rf"{path.name}: record 0 has 3 mask_positions variants, expected 5"):
        open_shard(path, num_variants=5)
