"""The device policy's pieces, checked on the CPU: the process group's backends, the batch feed, the sparse
MLM targets built before a batch moves, the step counters, the RNG state and the shared shard check."""
from __future__ import annotations

import json

import pytest
import torch

from tests.fixtures import make_shards, make_tokenizer
from training.models.model import SparseMLM, build_model, preset, sparse_targets
from training.pretraining import checkpoint
from training.pretraining.data import RankLoader, ShardSet
from training.pretraining.feed import DeviceFeed
from training.pretraining.step_stats import FIELDS, StepStats
from training.runtime.distributed import bind_device, process_group_backend


def test_a_cuda_plan_sends_cpu_tensors_to_gloo_and_cuda_tensors_to_nccl():
    assert process_group_backend("nccl") == "cpu:gloo,cuda:nccl"  # NCCL alone refuses CPU tensors
    assert process_group_backend("gloo") == "gloo"
    assert bind_device("gloo") == torch.device("cpu")
    if not torch.cuda.is_available():  # a CUDA plan on a worker whose torch sees no GPU: the reason, at once
        with pytest.raises(RuntimeError, match="planned CUDA .* sees no GPU"):
            bind_device("nccl")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("policy")
    tok = make_tokenizer(tmp / "tokenizer")
    return make_shards(tmp / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)


def test_the_feed_hands_out_the_loaders_batches_and_positions_in_order(shards):
    table = ShardSet.open(shards).read("train")
    plain = RankLoader(table, 0, 2, 4, seed=3, num_variants=2)
    expected = [(plain.position, {k: v.clone() for k, v in b.items()}) for b in plain.epoch(1, start=8)]
    fed = RankLoader(table, 0, 2, 4, seed=3, num_variants=2)
    got = list(DeviceFeed(fed.batches(1, start=8), torch.device("cpu")))
    assert fed.position == (0, 0)  # building ahead leaves the resumable position to the consumer
    assert [p for p, _ in got] == [p for p, _ in expected]
    for (_, a), (_, b) in zip(got, expected):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_sparse_targets_give_the_boolean_mask_loss_with_a_padded_fixed_size_head(shards):
    from transformers import BertConfig

    table = ShardSet.open(shards).read("train")
    batch = next(RankLoader(table, 0, 1, 8, seed=0, num_variants=2).epoch(0))
    m = preset("tiny")
    torch.manual_seed(0)
    model = SparseMLM(build_model(BertConfig(vocab_size=int(batch["input_ids"].max()) + 1, hidden_size=m.hidden_size,
                                             num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
    dense = model(**batch)
    counted, correct = model.last_counted.clone(), model.last_correct.clone()
    sparse = sparse_targets(batch)
    n = int((batch["labels"] != -100).sum())
    assert sparse["masked_index"].numel() % 8 == 0 and n <= sparse["masked_index"].numel() < n + 8
    assert int((sparse["masked_labels"] != -100).sum()) == n
    assert torch.allclose(model(**sparse), dense, atol=1e-6)
    assert torch.equal(model.last_counted, counted) and torch.equal(model.last_correct, correct)


def test_step_stats_read_once_per_window_in_named_fields():
    stats = StepStats(torch.device("cpu"))
    batch = {"input_ids": torch.zeros(4, 8, dtype=torch.long), "attention_mask": torch.ones(4, 8, dtype=torch.long)}
    for step in (1, 2):
        for loss in (2.0, 4.0):  # two micro-batches a step
            stats.add_micro(torch.tensor(loss), batch, torch.tensor(5), torch.tensor(2))
        stats.end_step(step, lr=0.1 * step, norm=torch.tensor(1.5))
    assert stats.pending == 2 and stats.curve == []  # nothing read yet
    window, norms = stats.take_window()
    assert stats.curve == [{"step": 1, "loss": 3.0, "lr": 0.1}, {"step": 2, "loss": 3.0, "lr": 0.2}]
    assert window == {"loss_sum": 12.0, "micro_batches": 4, "tokens": 128, "labelled": 20, "sequences": 16,
                      "correct": 8} and norms == [1.5, 1.5]
    assert stats.state()["seen"] == [window[k] for k in FIELDS] and stats.take_window()[0]["tokens"] == 0
    json.dumps(stats.state())  # checkpoint state is plain JSON


def test_checkpoints_carry_the_cuda_generator_where_there_is_one(monkeypatch, tmp_path):
    saved_cuda = torch.tensor([7, 7, 7], dtype=torch.uint8)
    calls = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: saved_cuda if device == 1 else None)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: calls.update(state=state, device=device))
    state = checkpoint.rng_state()
    assert torch.equal(state["cuda"], saved_cuda) and torch.equal(state["torch"], torch.get_rng_state())
    torch.save(state, tmp_path / "rng_rank0.pt")
    assert checkpoint.restore_rng(tmp_path, 0, fallback_seed=1)
    assert torch.equal(calls["state"], saved_cuda) and calls["device"] == 1


def test_the_ranks_share_out_the_shard_digests_and_each_names_its_damage(shards, tmp_path):
    import shutil

    copy = tmp_path / "shards"
    shutil.copytree(shards, copy)
    s = ShardSet.open(copy, verify=False)
    files = [rel for split in ("train", "valid") for rel in s.splits[split]]
    assert s.verify_share(0, 1) == [] and len(files) >= 2
    victim = copy / files[1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    victim.write_bytes(bytes(data))
    assert s.verify_share(0, 2) == []  # rank 0 hashes files 0, 2, ...: not the damaged one
    (problem,) = s.verify_share(1, 2)
    assert str(victim) in problem and "checksum mismatch" in problem
