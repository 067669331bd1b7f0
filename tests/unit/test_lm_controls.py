"""The unigram control of a language model's held-out loss (training.evaluation.lm_controls), by hand on real shards."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.fixtures import make_objective_shards
from training.evaluation.lm_controls import LITTLE_CONTEXT, context_line, unigram_loss


@pytest.mark.parametrize("objective,shift", [("span", False), ("causal", True)])  # span: a masked LM's labels
def test_the_control_is_the_train_frequencies_cross_entropy_on_the_scored_tokens(tmp_path, objective, shift):
    from training.pretraining.batches import build_batch
    from training.pretraining.shard_set import ShardSet

    shards = make_objective_shards(tmp_path, objective)
    s = ShardSet.open(shards)
    counts = {}  # the slow way: every real train position, one by one
    for ids, n in zip(s.read("train").column("input_ids").to_pylist(), s.read("train").column("length").to_pylist()):
        for t in ids[:n]:
            counts[t] = counts.get(t, 0) + 1
    total = sum(counts.values()) + s.vocab_size  # add-one over the vocabulary
    valid = s.read("valid")
    labels = build_batch(valid, np.arange(valid.num_rows), 0)["labels"].numpy()
    labels = labels[:, 1:] if shift else labels
    scored = [int(y) for y in labels.ravel() if y != -100]
    expected = -sum(math.log((counts.get(y, 0) + 1) / total) for y in scored) / len(scored)
    got = unigram_loss(shards, shift)
    assert got["tokens"] == len(scored) > 0 and got["value"] == pytest.approx(expected, abs=1e-4)


def test_an_encoder_decoders_control_is_the_train_targets_frequencies_on_the_valid_targets(tmp_path):
    """t5_span: the scored tokens are span targets (sentinels and the spans' tokens), which the input rows never hold
    as such; the frequencies are the train split's targets', counted the slow way here."""
    from training.pretraining.batches import build_batch
    from training.pretraining.shard_set import ShardSet

    shards = make_objective_shards(tmp_path, "t5_span")
    s = ShardSet.open(shards)
    train = build_batch(s.read("train"), np.arange(s.read("train").num_rows), 0)["labels"].numpy()
    counts = {}
    for y in train.ravel():
        if y != -100:
            counts[int(y)] = counts.get(int(y), 0) + 1
    total = sum(counts.values()) + s.vocab_size
    valid = build_batch(s.read("valid"), np.arange(s.read("valid").num_rows), 0)["labels"].numpy()
    scored = [int(y) for y in valid.ravel() if y != -100]
    expected = -sum(math.log((counts.get(y, 0) + 1) / total) for y in scored) / len(scored)
    got = unigram_loss(shards, False)
    assert got["tokens"] == len(scored) > 0 and got["value"] == pytest.approx(expected, abs=1e-4)


def test_a_model_worse_than_the_control_is_said_to_be_worse_not_under_it():
    line, warning = context_line(12.8, 5.36, "held-out span-corruption loss")
    assert line.endswith("7.44 nats worse than them") and "-7" not in line
    assert warning.startswith("the pretrained model scores 7.44 nats worse than token frequencies alone")


def test_a_model_barely_under_the_control_is_warned_about():
    line, warning = context_line(6.87, 7.09)
    assert line == ("held-out masked-token loss 6.870 nats against 7.090 for token frequencies alone (the unigram "
                    "control): 0.22 nats learnt from context")
    assert warning.startswith("the pretrained model is only 0.22 nats under token frequencies alone")
    assert context_line(7.09 - LITTLE_CONTEXT - 1.0, 7.09)[1] is None  # well under it: nothing to warn about


def test_the_control_of_another_text_uses_the_pretraining_corpus_frequencies_on_the_rows_read(tmp_path):
    import pyarrow as pa

    from training.pretraining.batches import build_batch
    from training.pretraining.shard_set import ShardSet

    scored = make_objective_shards(tmp_path / "a", "causal")
    trained = make_objective_shards(tmp_path / "b", "causal", seq_len=32)  # another packing: other train counts
    s, t = ShardSet.open(scored), ShardSet.open(trained)
    counts = np.ones(t.vocab_size)
    for ids, n in zip(t.read("train").column("input_ids").to_pylist(), t.read("train").column("length").to_pylist()):
        np.add.at(counts, ids[:n], 1)
    table = pa.concat_tables([s.read("train"), s.read("valid")])  # split="all": a reference set read whole
    labels = build_batch(table, np.arange(5), 0)["labels"].numpy()[:, 1:]  # max_rows=5: the first rows only
    y = labels[labels != -100]
    expected = float(-np.log(counts[y] / counts.sum()).mean())
    got = unigram_loss(scored, True, frequencies_from=trained, split="all", max_rows=5)
    assert got["tokens"] == y.size and got["value"] == pytest.approx(expected, abs=1e-4)
    other = make_objective_shards(tmp_path / "c", "t5_span")  # another tokenizer: refused in one line
    with pytest.raises(ValueError, match="token frequencies need the same tokenizer"):
        unigram_loss(scored, True, frequencies_from=other)
