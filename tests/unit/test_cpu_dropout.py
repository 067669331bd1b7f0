"""training.pretraining.cpu_dropout: the masks keep 1 - p with torch's seeding, the gradient is the mask, and a model with its
dropout swapped computes what transformers' SDPA model computes when no position is dropped."""
from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from training.pretraining import cpu_dropout
from training.runtime.recipe import masked_accuracy


def test_masks_keep_one_minus_p_and_follow_torch_seed():
    for p in (0.1, 0.5):
        torch.manual_seed(0)
        keep = cpu_dropout.keep_mask((500, 1000), p)
        # 500,000 draws: the kept share's standard error is sqrt(p (1-p) / n) <= 0.0008
        assert keep.dtype == torch.bool and abs(keep.float().mean().item() - (1 - p)) < 0.004
    torch.manual_seed(3)
    a, b = cpu_dropout.keep_mask((64, 64), 0.1), cpu_dropout.keep_mask((64, 64), 0.1)
    torch.manual_seed(3)
    assert torch.equal(a, cpu_dropout.keep_mask((64, 64), 0.1)) and not torch.equal(a, b)
    state = torch.get_rng_state()  # a checkpoint's saved RNG state replays the same masks
    c = cpu_dropout.keep_mask((64, 64), 0.1)
    torch.set_rng_state(state)
    assert torch.equal(c, cpu_dropout.keep_mask((64, 64), 0.1))


def test_dropout_scales_kept_values_and_its_gradient_is_the_mask():
    x = torch.randn(128, 64, requires_grad=True)
    y = cpu_dropout.dropout(x, 0.25)
    y.sum().backward()
    kept = y.detach() != 0
    assert 0.6 < kept.float().mean().item() < 0.9
    assert torch.allclose(y[kept], x.detach()[kept] / 0.75)
    assert torch.allclose(x.grad, kept.float() / 0.75)
    assert cpu_dropout.dropout(x, 0.25, training=False) is x and cpu_dropout.dropout(x, 0.0) is x


def tiny_bert(dropout: float) -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                        max_position_embeddings=32)
    config._attn_implementation = "sdpa"
    return BertModel(config)


def test_swapped_model_computes_what_sdpa_computes(monkeypatch):
    model = tiny_bert(0.1)
    keys = set(model.state_dict())
    # embeddings + per layer (attention's probabilities, attention output, feed-forward output): 1 + 2 x 3
    assert cpu_dropout.install(model) == 7
    assert set(model.state_dict()) == keys  # nothing to export changes
    marked = [m for m in model.modules() if getattr(m, cpu_dropout.MARK, False)]
    assert len(marked) == 2
    model.train()
    # with every position kept, the math path is SDPA's attention scaled by 1 / (1 - p), for each mask form
    monkeypatch.setattr(cpu_dropout, "keep_mask", lambda shape, p: torch.ones(shape, dtype=torch.bool))
    torch.manual_seed(1)
    q, k, v = (torch.randn(3, 2, 12, 16) for _ in range(3))
    attend = torch.ones(3, 1, 12, 12, dtype=torch.bool)
    attend[1, :, :, 7:] = False  # padding keys
    additive = torch.zeros(3, 1, 12, 12).masked_fill(~attend, torch.finfo(torch.float32).min)
    for mask in (None, attend, additive):
        got, _ = cpu_dropout.attention(marked[0], q, k, v, mask, dropout=0.1, scaling=0.25)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25).transpose(1, 2)
        assert torch.allclose(got * 0.9, want, atol=1e-5)
    ids = torch.randint(0, 100, (3, 12))
    kept = model(input_ids=ids).last_hidden_state
    assert torch.allclose(model.embeddings.dropout(kept), kept / 0.9)
    # and the masks are used: dropping everything changes the model's output
    monkeypatch.setattr(cpu_dropout, "keep_mask", lambda shape, p: torch.zeros(shape, dtype=torch.bool))
    assert not torch.allclose(model(input_ids=ids).last_hidden_state, kept, atol=1e-3)


def test_models_not_installed_keep_torch_dropout():
    other = tiny_bert(0.1).train()
    ids = torch.randint(0, 100, (2, 10))
    torch.manual_seed(5)
    before = other(input_ids=ids).last_hidden_state
    cpu_dropout.install(tiny_bert(0.1))  # replaces the process's "sdpa" entry; `other` is not marked
    torch.manual_seed(5)
    assert torch.equal(other(input_ids=ids).last_hidden_state, before)
    assert type(other.embeddings.dropout) is torch.nn.Dropout


@pytest.mark.parametrize("vocab", [7, 300])
def test_masked_accuracy_counts_argmax_hits(vocab):
    torch.manual_seed(vocab)
    logits = torch.randn(4, 9, vocab)
    labels = torch.randint(0, vocab, (4, 9))
    labels[:, ::3] = -100
    labels[0, 1] = logits[0, 1].argmax()  # at least one hit
    correct, counted = masked_accuracy(logits, labels)
    keep = labels != -100
    assert counted.item() == keep.sum().item()
    assert correct.item() == ((logits.argmax(-1) == labels) & keep).sum().item() >= 1
