"""Head pruning: the choice of heads, and that removing a head computes what gating it to zero does."""
from __future__ import annotations

import pytest
import torch


def _model(layers=2, heads=4):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=layers,
                                                    num_attention_heads=heads, intermediate_size=64,
                                                    max_position_embeddings=16, num_labels=3)).eval()


def test_lowest_importance_heads_go_first_and_every_layer_keeps_one():
    from training.compression.prune import heads_to_prune

    imp = [[0.9, 0.1, 0.5, 0.2], [0.05, 0.04, 0.03, 0.8]]
    assert heads_to_prune(imp, 0.25) == {1: [1, 2]}
    assert heads_to_prune(imp, 0.5) == {0: [1], 1: [0, 1, 2]}
    assert heads_to_prune(imp, 0.0) == {}
    # 7 of 8 asked, but each layer keeps its best head: 6 go
    assert heads_to_prune(imp, 0.9) == {0: [1, 2, 3], 1: [0, 1, 2]}
    with pytest.raises(ValueError, match="share"):
        heads_to_prune(imp, 1.0)


def test_pruned_heads_compute_what_zero_gates_compute():
    from training.models.model_formats import attention_blocks, prune

    model = _model()
    x = {"input_ids": torch.randint(5, 50, (3, 10)), "attention_mask": torch.ones(3, 10, dtype=torch.long)}
    drop = {0: [1, 3], 1: [0]}
    size = model.config.hidden_size // model.config.num_attention_heads
    handles = []
    for layer, heads in drop.items():
        gate = torch.ones(4)
        gate[heads] = 0

        def zero(module, args, out, gate=gate):
            o = out[0]
            return ((o.view(*o.shape[:-1], -1, size) * gate.view(-1, 1)).view(o.shape), *out[1:])
        handles.append(attention_blocks(model)[layer].self.register_forward_hook(zero))
    with torch.no_grad():
        gated = model(**x).logits
    for h in handles:
        h.remove()
    before = sum(p.numel() for p in model.parameters())
    prune(model, drop)
    with torch.no_grad():
        pruned = model(**x).logits
    assert torch.allclose(gated, pruned, atol=1e-5)
    assert sum(p.numel() for p in model.parameters()) == before - 3 * (3 * (32 * size + size) + size * 32)
    assert [b.self.num_attention_heads for b in attention_blocks(model)] == [2, 3]
    with pytest.raises(ValueError, match="at least one stays"):
        prune(model, {0: [0, 1]})


def test_importance_is_per_layer_normalised_and_finite():
    from training.compression.prune import head_importance

    model = _model()
    batch = {"input_ids": torch.randint(5, 50, (4, 8)), "attention_mask": torch.ones(4, 8, dtype=torch.long),
             "labels": torch.tensor([0, 1, 2, 1])}
    imp = head_importance(model, [batch, batch])
    assert [len(x) for x in imp] == [4, 4]
    for layer in imp:
        assert abs(sum(v * v for v in layer) ** 0.5 - 1.0) < 1e-4 and all(v >= 0 for v in layer)
    assert all(p.grad is None for p in model.parameters())  # importance does not train the model


def test_a_model_without_bert_attention_is_refused():
    from transformers import GPT2Config, GPT2LMHeadModel

    from training.models.model_formats import attention_blocks

    with pytest.raises(ValueError, match="no BERT-style attention blocks"):
        attention_blocks(GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=20)))
