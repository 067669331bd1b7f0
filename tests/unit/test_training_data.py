"""training.pretraining.data: masks, labels, variants, the rank split and schema checks, on tiny in-test shards."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import torch

from tests.fixtures import make_shards, make_tokenizer
from training.pretraining.data import (
    IGNORE_INDEX,
    RankLoader,
    ShardSet,
    build_batch,
    epoch_order,
    open_shard,
    rank_batches,
)


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
        batches = rank_batches(epoch_order(table.num_rows, 7, e), 0, 7, 0, 1)
        got, want = next(loader.epoch(e)), build_batch(table, batches[0], e % 3)
        assert all(torch.equal(got[k], want[k]) for k in got)
    labels = [build_batch(table, np.arange(21), v)["labels"] for v in range(3)]
    assert not torch.equal(labels[0], labels[1]) and not torch.equal(labels[1], labels[2])
    # Every variant masks the same text: where labelled, labels are the original ids.
    originals = torch.tensor(table["input_ids"].to_pylist())
    for lab in labels:
        assert torch.equal(lab[lab != IGNORE_INDEX], originals[lab != IGNORE_INDEX])


@pytest.mark.parametrize("num_rows,world,batch", [(21, 2, 4), (20, 2, 5), (7, 3, 2), (5, 1, 5)])
def test_global_batches_disjoint_over_ranks_and_the_same_samples_on_any_world(num_rows, world, batch):
    order = epoch_order(num_rows, seed=3, epoch=0)
    per_rank = [rank_batches(order, 0, batch, r, world) for r in range(world)]
    assert len({len(b) for b in per_rank}) == 1  # equal batch counts: no rank waits at a collective
    steps = len(per_rank[0])
    assert steps == num_rows // (batch * world)
    rows = np.concatenate([x for b in per_rank for x in b]) if steps else np.array([])
    assert len(set(rows.tolist())) == len(rows) == steps * batch * world  # no overlap, the tail left out
    # one process with the whole global batch sees the same samples in each step as `world` processes
    single = rank_batches(order, 0, batch * world, 0, 1)
    for i in range(steps):
        assert sorted(single[i].tolist()) == sorted(np.concatenate([b[i] for b in per_rank]).tolist())


def test_loader_counts_the_left_out_tail(shards):
    table = shards.read("train")  # 21 rows, 2 ranks, batch 4: global batch 8, 2 steps, 5 left out
    loaders = [RankLoader(table, r, 2, 4, seed=1, num_variants=3) for r in range(2)]
    assert [loader.batches_per_epoch for loader in loaders] == [2, 2]
    assert loaders[0].counts == {"rows": 21, "dropped_partial_batch": 5}
    seen = [{int(x) for b in loader.epoch(0) for x in b["input_ids"][:, 0]} for loader in loaders]
    assert seen[0] and seen[1]
    with pytest.raises(ValueError, match="fewer than one global batch of 4 x 8"):
        RankLoader(table, 0, 8, 4, seed=1, num_variants=3)


def test_shuffle_is_deterministic_and_changes_per_epoch():
    a, b, c = epoch_order(100, 3, 0), epoch_order(100, 3, 0), epoch_order(100, 3, 1)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert sorted(a.tolist()) == list(range(100))


def test_bad_schema_version_names_the_file(tmp_path):
    tok = make_tokenizer(tmp_path / "tokenizer")
    root = make_shards(tmp_path / "shards", tok, train_rows=4, valid_rows=2, train_files=1,
                       schema_version="lmforge.token_shard/v0")
    bad = root / "train" / "shard-00000-000.arrow"
    with pytest.raises(ValueError, match=r"shard-00000-000\.arrow.*lmforge\.token_shard/v0"):
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


# ---- checksums ----------------------------------------------------------------------------------


def test_a_flipped_byte_is_a_checksum_error_naming_file_and_digests(tmp_path):
    from schemas.manifest import sha256_file

    tok = make_tokenizer(tmp_path / "tokenizer")
    root = make_shards(tmp_path / "shards", tok, train_rows=6, valid_rows=2, train_files=2)
    victim = root / "train" / "shard-00001-000.arrow"
    expected = sha256_file(victim)
    data = bytearray(victim.read_bytes())
    data[-100] ^= 0x01  # one bit inside the last record batch: Arrow alone would read it silently
    victim.write_bytes(bytes(data))
    actual = sha256_file(victim)
    with pytest.raises(ValueError, match=rf"{victim}: checksum mismatch, expected sha256 {expected} .* got {actual}"):
        ShardSet.open(root).read("train")
    assert ShardSet.open(root, verify=False).read("train").num_rows == 6  # the opt-out reads it as it is
    ShardSet.open(root).read("valid")  # other splits are unaffected


def test_a_file_missing_from_the_manifest_cannot_be_verified(shards):
    import dataclasses

    unlisted = dataclasses.replace(shards, digests={})
    with pytest.raises(ValueError, match="not among the outputs"):
        unlisted.read("train")


# ---- resume -------------------------------------------------------------------------------------


def _run(loader: RankLoader, batches: int, epoch: int = 0, start: int = 0) -> list[dict]:
    """Take `batches` batches from (epoch, start) on, crossing epochs as a training loop does."""
    got = []
    while len(got) < batches:
        for b in loader.epoch(epoch, start=start):
            got.append(b)
            if len(got) == batches:
                return got
        epoch, start = epoch + 1, 0
    return got


@pytest.mark.parametrize("stop", [1, 2, 3, 5])
@pytest.mark.parametrize("rank", [0, 1])
def test_resume_yields_exactly_the_uninterrupted_batches(shards, stop, rank):
    table = shards.read("train")  # 21 rows, 2 ranks, batch 3: 3 global batches of 6 per epoch
    full = _run(RankLoader(table, rank, 2, 3, seed=5, num_variants=3), 9)
    first = RankLoader(table, rank, 2, 3, seed=5, num_variants=3)
    head = _run(first, stop)
    state = first.state_dict()
    e, b = divmod(stop, 3)
    assert (state["epoch"], state["sample"]) == (e, b * 6) and state["world"] == 2
    resumed = RankLoader(table, rank, 2, 3, seed=5, num_variants=3)
    resumed.load_state_dict(state)
    tail = _run(resumed, 9 - stop, *resumed.position)
    for got, want in zip(head + tail, full, strict=True):
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)


def test_a_position_saved_on_two_ranks_resumes_on_one_with_the_same_samples(shards):
    """Two ranks with micro batch 3, saved after 4 steps; one rank with micro batch 6 continues with the
    same samples per step (variant and all), since the position is counted in samples."""
    table = shards.read("train")
    two = [RankLoader(table, r, 2, 3, seed=5, num_variants=3) for r in range(2)]
    both = [_run(loader, 6) for loader in two]
    saver = RankLoader(table, 0, 2, 3, seed=5, num_variants=3)
    _run(saver, 4)
    one = RankLoader(table, 0, 1, 6, seed=5, num_variants=3)
    one.load_state_dict(saver.state_dict())
    assert one.position == saver.position == (1, 6)
    for i, got in enumerate(_run(one, 2, *one.position), start=4):
        want = {k: torch.cat([both[0][i][k], both[1][i][k]]) for k in got}
        assert all(torch.equal(got[k], want[k]) for k in got)


def test_rank_zero_state_restores_every_rank_but_not_other_data(shards):
    table = shards.read("train")
    a = RankLoader(table, 0, 2, 3, seed=5, num_variants=3)
    _run(a, 4)
    b = RankLoader(table, 1, 2, 3, seed=5, num_variants=3)
    b.load_state_dict(a.state_dict())  # positions agree on all ranks
    assert b.position == a.position == (1, 6)
    for other, what in [(RankLoader(table, 0, 2, 3, seed=6, num_variants=3), "seed 5 != 6"),
                        (RankLoader(table, 0, 2, 3, seed=5, num_variants=2), "num_variants 3 != 2")]:
        with pytest.raises(ValueError, match=what):
            other.load_state_dict(a.state_dict())
    old = {k: v for k, v in a.state_dict().items() if k != "sample"} | {"batch": 1}
    with pytest.raises(ValueError, match="older lmforge"):
        b.load_state_dict(old)
    with pytest.raises(ValueError, match="start 99 is outside"):
        next(a.epoch(0, start=99))


# ---- objectives ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def objective_shards(tmp_path_factory) -> dict[str, ShardSet]:
    """Real shards (the stage without Beam) for t5_span (unigram), causal (byte_bpe) and span (byte_bpe)."""
    from tests.fixtures import make_objective_shards

    root = tmp_path_factory.mktemp("objectives")
    return {objective: ShardSet.open(make_objective_shards(root, objective)) for objective in ("t5_span", "causal", "span")}


def test_t5_batches_match_apply_t5_with_padding_and_shifted_decoder_inputs(objective_shards):
    from pipelines.shards.mask_config import MaskVocab
    from pipelines.shards.masking import apply_t5

    s = objective_shards["t5_span"]
    assert s.mask_id is None and s.max_encoder_len == 48 and s.max_target_len
    table = s.read("train")
    rows = np.arange(8)
    vocab = MaskVocab(s.vocab_size, (), None, pad_id=s.pad_id, eos_id=s.eos_id)
    for variant in (0, 1):
        b = build_batch(table, rows, variant)
        assert b["input_ids"].shape == b["attention_mask"].shape == (8, s.max_encoder_len)
        assert b["labels"].shape == b["decoder_input_ids"].shape == (8, s.max_target_len)
        for i, r in enumerate(rows):
            rec = table.slice(int(r), 1).to_pylist()[0]
            enc, tgt = apply_t5(np.array(rec["input_ids"]), rec["length"], np.array(rec["mask_positions"][variant]),
                                np.array(rec["mask_tokens"][variant]), vocab)
            n, m = len(enc), len(tgt)
            assert b["input_ids"][i, :n].tolist() == enc.tolist() and (b["input_ids"][i, n:] == s.pad_id).all()
            assert b["attention_mask"][i].tolist() == [1] * n + [0] * (s.max_encoder_len - n)
            assert b["labels"][i, :m].tolist() == tgt.tolist() and (b["labels"][i, m:] == IGNORE_INDEX).all()
            assert tgt[-1] == s.eos_id
            # HF T5 _shift_right: pad as the decoder start, then the labels, with -100 turned into pad.
            want = [s.pad_id, *tgt.tolist(), *[s.pad_id] * (s.max_target_len - m - 1)][: s.max_target_len]
            assert b["decoder_input_ids"][i].tolist() == want


def test_causal_batches_label_every_real_token(objective_shards):
    s = objective_shards["causal"]
    assert s.num_variants == 0
    loader = RankLoader(s.read("train"), 0, 1, 4, seed=0, num_variants=0)
    assert loader.variant(3) == 0
    b = next(loader.epoch(3))
    assert set(b) == {"input_ids", "attention_mask", "labels"}
    real = b["attention_mask"] == 1
    assert torch.equal(b["labels"][real], b["input_ids"][real]) and (b["labels"][~real] == IGNORE_INDEX).all()


def test_span_batches_from_a_roberta_vocabulary(objective_shards):
    s = objective_shards["span"]
    assert (s.family, s.mask_id, s.pad_id) == ("roberta", 4, 1)
    b = build_batch(s.read("train"), np.arange(6), 1)
    labelled = b["labels"] != IGNORE_INDEX
    assert labelled.any() and (b["attention_mask"][labelled] == 1).all()
    assert (b["input_ids"][labelled] == s.mask_id).float().mean() > 0.5  # 80% [MASK], decided per span


def test_trainers_refuse_objectives_they_cannot_train(objective_shards, shards):
    shards.require_objective(("mlm", "whole_word", "span"), "pretrain")
    objective_shards["span"].require_objective(("mlm", "whole_word", "span"), "pretrain")
    for name in ("t5_span", "causal"):
        with pytest.raises(ValueError, match=rf"objective '{name}'; distill trains on mlm, whole_word, span shards only"):
            objective_shards[name].require_objective(("mlm", "whole_word", "span"), "distill")


def test_a_shard_opens_with_datasets(shards):
    import datasets

    path = shards.files("train")[0]
    ds = datasets.Dataset.from_file(str(path))
    assert len(ds) == open_shard(path).num_rows and len(ds[0]["input_ids"]) == shards.seq_len


def test_v1_shards_still_read_as_bert_mlm(tmp_path):
    tok = make_tokenizer(tmp_path / "tokenizer")
    root = make_shards(tmp_path / "shards", tok, train_rows=6, valid_rows=2, train_files=1,
                       schema_version="lmforge.token_shard/v1")
    table = ShardSet.open(root).read("train")
    assert (build_batch(table, np.arange(3), 1)["labels"] != IGNORE_INDEX).any()
    with pytest.raises(ValueError, match="objective 'mlm', but the manifest says 'causal'"):
        open_shard(root / "train" / "shard-00000-000.arrow", objective="causal")


@pytest.mark.parametrize("kind", ["mlm", "span"])
def test_the_loaders_fast_mlm_path_equals_build_batch(shards, objective_shards, kind):
    """RankLoader batches MLM shards through MlmView (numpy views of the mapped buffers). Over a
    table of several record batches, some of them slices (their buffers start mid-array), every
    batch must equal build_batch's, tensor for tensor, for every variant."""
    from training.pretraining.data import MlmView

    table = (shards if kind == "mlm" else objective_shards["span"]).read("train")
    cut = table.num_rows // 3
    chunked = pa.concat_tables([table.slice(0, cut), table.slice(cut, 2), table.slice(cut + 2)])
    assert chunked.num_rows == table.num_rows and len(chunked.to_batches()) >= 4
    view = MlmView(chunked)
    rng = np.random.default_rng(0)
    k = len(table["mask_positions"][0])
    for variant in range(k):
        for size in (1, 5, table.num_rows):
            rows = rng.permutation(table.num_rows)[:size]
            fast, slow = view.batch(rows, variant), build_batch(table, rows, variant)
            assert fast.keys() == slow.keys()
            for name in slow:
                assert fast[name].dtype == slow[name].dtype and torch.equal(fast[name], slow[name]), (variant, name)
    loader = RankLoader(chunked, 0, 1, 4, seed=0, num_variants=k)
    assert loader.view is not None
    first = next(loader.epoch(1))
    rows = rank_batches(epoch_order(chunked.num_rows, 0, 1), 0, 4, 0, 1)
    assert torch.equal(first["labels"], build_batch(table, rows[0], loader.variant(1))["labels"])


@pytest.mark.parametrize("objective", ["causal", "t5_span"])
def test_the_objectives_model_learns_from_the_loaders_batches(objective_shards, objective):
    """pretrain builds a Llama-style decoder for causal shards and a T5 for t5_span shards; their loss on the
    loader's batches is finite and falls over a few AdamW steps on one batch (no DeepSpeed)."""
    from training.models.model import build_for_objective, preset

    s = objective_shards[objective]
    torch.manual_seed(0)
    module = build_for_objective(s.objective, preset("tiny"), s.vocab_size, s.pad_id, s.eos_id, s.seq_len)
    want = {"causal": "LlamaForCausalLM", "t5_span": "T5ForConditionalGeneration"}[objective]
    assert type(module.hf).__name__ == want
    batch = next(RankLoader(s.read("train"), 0, 1, 8, 0, s.num_variants).epoch(0))
    opt = torch.optim.AdamW(module.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = module(**batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all() and losses[-1] < losses[0] - 1.0, losses


def test_mask_tokens_are_int16_when_the_vocabulary_fits_and_v2_int32_files_still_read(objective_shards, tmp_path):
    """v3 stores mask_tokens as int16 for vocabularies of at most 32,768 ids (t5_span's -1 too);
    a v2 file (int32, no width key) reads as before, and a width that contradicts the metadata
    is an error naming the column."""
    from schemas.shards import ShardMeta, mask_token_bits

    assert (mask_token_bits(30_522), mask_token_bits(32_100), mask_token_bits(32_768), mask_token_bits(50_265)) == (
        16, 16, 16, 32)
    for name in ("t5_span", "span"):
        s = objective_shards[name]
        table = s.read("train")
        assert table.schema.field("mask_tokens").type == pa.list_(pa.list_(pa.int16()))
        assert ShardMeta.from_schema(table.schema).mask_token_bits == 16
    t5 = objective_shards["t5_span"].read("train")
    assert pc.min(pc.list_flatten(pc.list_flatten(t5["mask_tokens"]))).as_py() == -1  # the span marker survives
    tok = make_tokenizer(tmp_path / "tokenizer")
    root = make_shards(tmp_path / "v2", tok, train_rows=6, valid_rows=2, train_files=1,
                       schema_version="lmforge.token_shard/v2")
    table = ShardSet.open(root).read("train")
    assert table.schema.field("mask_tokens").type == pa.list_(pa.list_(pa.int32()))
    assert (build_batch(table, np.arange(3), 1)["labels"] != IGNORE_INDEX).any()
    # metadata says 16 bits, the column is int32: refused, naming the column and both types
    f = root / "train" / "shard-00000-000.arrow"
    bad = table.replace_schema_metadata({**table.schema.metadata, b"lmforge.mask_token_bits": b"16"})
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_stream(sink, bad.schema) as w:
        w.write_table(bad)
    with pytest.raises(ValueError, match="column 'mask_tokens' is list<item: list<item: int32>>"):
        open_shard(f)


def test_the_fast_path_reads_each_mask_column_through_its_own_offsets(shards):
    """Another writer may lay mask_tokens out with other buffers than mask_positions (here: three
    junk values ahead of the real ones, offsets shifted to match); batches must not change."""
    from training.pretraining.data import MlmView

    table = shards.read("train").combine_chunks()
    tok = table.column("mask_tokens").chunk(0)
    inner = tok.values
    shifted_inner = pa.ListArray.from_arrays(
        pa.array(inner.offsets.to_numpy() + 3, pa.int32()),
        pa.concat_arrays([pa.array([7, 7, 7], inner.type.value_type), inner.values]))
    shifted = pa.ListArray.from_arrays(tok.offsets, shifted_inner)
    assert shifted.to_pylist() == tok.to_pylist()
    odd = table.set_column(table.schema.get_field_index("mask_tokens"), table.schema.field("mask_tokens"), shifted)
    rows = np.arange(table.num_rows)
    for variant in range(2):
        fast, slow = MlmView(odd).batch(rows, variant), build_batch(table, rows, variant)
        assert all(torch.equal(fast[k], slow[k]) for k in slow)
