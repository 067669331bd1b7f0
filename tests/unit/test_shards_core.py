"""Pure cores of the shards stage: frames, packing modes, word starts, tables and size-bounded files.

(The masks themselves are tested in test_masking.py.)
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipelines.shards.packing import Frame, frame_for, pack, word_starts
from pipelines.shards.rows import build_table
from pipelines.shards.stage import ShardsConfig
from pipelines.shards.write import row_bytes, split_parts, stream_bytes
from schemas.shards import ShardMeta, shard_file_key, shard_file_name, shard_schema

CLS, SEP, PAD = 2, 3, 0
BERT = Frame((CLS,), (SEP,))
IDS = {
    "bert": {"family": "bert", "pad": 0, "unk": 1, "mask": 4, "cls": 2, "sep": 3, "bos": None, "eos": None, "sentinels": []},
    "roberta": {"family": "roberta", "pad": 1, "unk": 3, "mask": 4, "cls": 0, "sep": 2, "bos": 0, "eos": 2, "sentinels": []},
    "t5": {"family": "t5", "pad": 0, "unk": 2, "mask": None, "cls": None, "sep": 1, "bos": None, "eos": 1,
           "sentinels": [299, 298]},
}


@pytest.mark.parametrize("family,objective,prefix,suffix", [
    ("bert", "mlm", (2,), (3,)), ("bert", "whole_word", (2,), (3,)), ("roberta", "span", (0,), (2,)),
    ("t5", "t5_span", (), (1,)), ("bert", "causal", (), (3,)), ("roberta", "causal", (), (2,)), ("t5", "causal", (), (1,)),
])
def test_frame_per_family_and_objective(family, objective, prefix, suffix):
    assert frame_for(IDS[family], objective) == Frame(prefix, suffix)


def test_concat_keeps_every_token_and_records_boundaries():
    docs = [[10, 11, 12], [20, 21], [30, 31, 32, 33, 34, 35]]
    p = pack(docs, 8, BERT, PAD, "concat")
    flat = [t for r in range(p.rows) for t in p.input_ids[r, : p.length[r]].tolist()]
    assert flat == [CLS, 10, 11, 12, SEP, CLS, 20, 21, SEP, CLS, 30, 31, 32, 33, 34, 35, SEP]
    assert p.input_ids.shape == (3, 8) and p.input_ids.dtype == np.int32
    assert [d.tolist() for d in p.doc_starts] == [[0, 5], [1], []]
    assert p.length.tolist() == [8, 8, 1] and p.input_ids[2, 1:].tolist() == [PAD] * 7
    assert p.word_starts is None


def test_document_packing_pads_each_document_and_continues_long_ones():
    docs = [[10, 11, 12], [], list(range(20, 33)), [40]]  # the empty document is skipped
    p = pack(docs, 8, BERT, PAD, "document")
    assert p.length.tolist() == [5, 8, 7, 3]  # 13 tokens + 2 specials = 15 = 8 + 7
    assert [d.tolist() for d in p.doc_starts] == [[0], [0], [], [0]]
    assert p.input_ids[0].tolist() == [CLS, 10, 11, 12, SEP, PAD, PAD, PAD]
    assert p.input_ids[1].tolist() == [CLS, *range(20, 27)] and p.input_ids[2].tolist() == [*range(27, 33), SEP, PAD]
    assert p.input_ids[3].tolist() == [CLS, 40, SEP, PAD, PAD, PAD, PAD, PAD]
    # Padding only ever ends a row, so length is the attention mask.
    assert ((p.input_ids == PAD) == (np.arange(8) >= p.length[:, None])).all()


def test_t5_and_causal_frames_pack_without_an_opening_token():
    p = pack([[10, 11], [20]], 4, frame_for(IDS["t5"], "t5_span"), 0, "concat")
    assert p.input_ids.tolist() == [[10, 11, 1, 20], [1, 0, 0, 0]] and p.length.tolist() == [4, 1]
    assert [d.tolist() for d in p.doc_starts] == [[0, 3], []]


def test_word_starts_from_word_ids_follow_packing():
    assert word_starts([0, 0, 1, 2, 2, None]).tolist() == [True, False, True, True, False, True]
    assert word_starts([]).tolist() == []
    docs = [[10, 11, 12, 13, 14, 15]]
    words = [word_starts([0, 0, 0, 1, 1, 2])]
    p = pack(docs, 4, BERT, PAD, "concat", words)
    # Rows [CLS] 10 11 12 | 13 14 15 [SEP]: frame tokens are never word starts.
    assert p.word_starts.tolist() == [[False, True, False, False], [True, False, True, False]]
    p = pack(docs, 3, BERT, PAD, "concat", words)
    # Row 1 = 12 13 14 begins inside word 0 (10 11 12), so that fragment counts as a word of its own.
    assert p.word_starts[1].tolist() == [True, True, False]


def test_pack_rejects_bad_mode_and_tiny_rows():
    with pytest.raises(ValueError, match="packing 'nope'"):
        pack([[1]], 8, BERT, PAD, "nope")
    with pytest.raises(ValueError, match="seq_len 2"):
        pack([[1]], 2, BERT, PAD)
    assert pack([], 8, BERT, PAD).rows == 0


def _table(rows: int, seq_len: int = 16, k: int = 3, schema=None) -> pa.Table:
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 100, (rows, seq_len)).astype(np.int32)
    pos = [[np.sort(rng.choice(seq_len, 3, replace=False)).astype(np.int16) for _ in range(k)] for _ in range(rows)]
    tok = [[rng.integers(5, 100, 3).astype(np.int32) for _ in range(k)] for _ in range(rows)]
    starts = [np.array([0, 7], np.int32) if r % 2 else np.zeros(0, np.int32) for r in range(rows)]
    return build_table(ids, np.full(rows, seq_len, np.int32), starts, pos, tok, schema or shard_schema(seq_len, k, "mlm"))


def test_build_table_round_trips_buffers():
    t = _table(5)
    rec = t.slice(3, 1).to_pylist()[0]
    assert len(rec["input_ids"]) == 16 and rec["doc_starts"] == [0, 7] and len(rec["mask_positions"]) == 3
    assert t.schema.equals(shard_schema(16, 3, "mlm"), check_metadata=True)
    causal = build_table(np.ones((2, 8), np.int32), np.array([8, 4], np.int32), [np.zeros(0, np.int32)] * 2,
                         [[], []], [[], []], shard_schema(8, 0, "causal"))
    assert causal["mask_positions"].to_pylist() == [[], []]


def test_row_bytes_estimate_is_close_to_the_real_size():
    t = _table(500)
    real = len(stream_bytes(t))
    assert 0.95 < row_bytes(t).sum() / real <= 1.0


@pytest.mark.parametrize("target", [4_000, 20_000, 1 << 20])
def test_split_parts_respects_the_target_and_keeps_every_row(target, tmp_path):
    import datasets

    t = _table(700)
    parts = split_parts(t, target)
    assert all(len(p) <= target for p in parts)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 2 * row_bytes(t).max() + 200  # about equal parts
    if target == 1 << 20:
        assert len(parts) == 1
    else:  # the fewest parts: one fewer would not fit (each part repeats the ~1 KB schema message)
        assert len(parts) > 1 and (sum(sizes) - 1100) / (len(parts) - 1) > target - 2 * row_bytes(t).max()
    back = pa.concat_tables(pa.ipc.open_stream(pa.py_buffer(p)).read_all() for p in parts)
    assert back.equals(t)
    assert split_parts(t, target) == parts  # same rows, same bytes
    path = tmp_path / "part.arrow"
    path.write_bytes(parts[-1])
    assert len(datasets.Dataset.from_file(str(path))) == pa.ipc.open_stream(pa.memory_map(str(path))).read_all().num_rows


def test_a_row_bigger_than_the_target_is_a_part_of_its_own():
    t = _table(3, seq_len=512)  # ~2.1 KB per row
    parts = split_parts(t, 1000)
    assert len(parts) == 3 and all(pa.ipc.open_stream(pa.py_buffer(p)).read_all().num_rows == 1 for p in parts)
    assert len(split_parts(t.slice(0, 0), 1000)) == 1  # an empty group still gets a readable file


def test_schema_names_and_metadata():
    assert shard_file_name("train", 3, 1) == "train/shard-00003-001.arrow"
    assert shard_file_key("shard-00003-001.arrow") == (3, 1) and shard_file_key("x/shard-123456-1000.arrow") == (123456, 1000)
    with pytest.raises(ValueError, match="not a shard file name"):
        shard_file_key("shard-00003.arrow")
    s = shard_schema(64, 0, "t5_span", family="t5", pad_id=0, eos_id=1, max_encoder_len=64, max_target_len=24)
    meta = ShardMeta.from_schema(s)
    assert (meta.objective, meta.family, meta.eos_id, meta.max_target_len, meta.num_variants) == ("t5_span", "t5", 1, 24, 0)
    with pytest.raises(ValueError, match="objective 'bart'"):
        shard_schema(64, 1, "bart")


def test_shards_config_validates():
    base = {"corpus": "c", "tokenizer": "t", "output": "o"}
    assert ShardsConfig(**base, mask={"objective": "span"}).mask.objective == "span"
    with pytest.raises(ValueError, match="packing"):
        ShardsConfig(**base, packing="sentence")
    with pytest.raises(ValueError, match="target_shard_mb"):
        ShardsConfig(**base, target_shard_mb=0)
    with pytest.raises(ValueError, match="objective"):
        ShardsConfig(**base, mask={"objective": "bart"})


def test_tokenizer_threads_is_on_inside_and_restores_the_setting(monkeypatch):
    import os

    from pipelines.shards.rows import tokenizer_threads

    for before in ("false", None):
        if before is None:
            monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
        else:
            monkeypatch.setenv("TOKENIZERS_PARALLELISM", before)
        try:
            with tokenizer_threads():
                assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
                raise KeyError("inside")  # restored on error too
        except KeyError:
            pass
        assert os.environ.get("TOKENIZERS_PARALLELISM") == before
