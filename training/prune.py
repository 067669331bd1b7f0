"""Attention-head pruning by importance (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better
than One?"), for BERT-style encoders (BERT, RoBERTa, their pre-LN variant, MiniLM).

Importance of head h in layer l: I_lh = sum over validation batches of |dL/dxi_lh|, where xi_lh is a
gate (1.0) multiplying the head's output and L the task loss of the fine-tuned model; each layer's
scores are then divided by their L2 norm (the paper's layer-wise normalisation). The heads with the
lowest scores go first, across all layers, until the requested share is gone; every layer keeps at
least one head. Removing a head removes its rows of the query, key and value projections and its
columns of the attention output projection (`transformers.pytorch_utils.prune_linear_layer`), so
the pruned model is smaller and faster, not masked.

transformers 5 dropped `PreTrainedModel.prune_heads` and the `pruned_heads` config key that rebuilt a
pruned model at load time, so a pruned model is saved like an int8 one: config and tokenizer, the
weights as `pruned.pt`, and `pruning.json` naming the heads removed per layer; `load_pruned` (and
`lmforge evaluate --model`) rebuilds it.
"""
from __future__ import annotations

from typing import Any

PRUNE_FILE = "pruning.json"
PRUNED_WEIGHTS = "pruned.pt"


def attention_blocks(model) -> list[Any]:
    """Each layer's attention module: it holds `self` (query/key/value, head counts) and `output.dense`."""
    blocks = [m for m in model.modules()
              if hasattr(m, "self") and hasattr(m, "output") and hasattr(m.self, "query")
              and hasattr(m.output, "dense")]
    if not blocks:
        raise ValueError(f"{type(model).__name__}: no BERT-style attention blocks (self.query/key/value, output.dense) "
                         "to prune heads from")
    return blocks


def head_importance(model, batches) -> list[list[float]]:
    """Michel et al.'s importance of every head on `batches` (dicts with labels), normalised per layer."""
    import torch

    blocks = attention_blocks(model)
    gates = [torch.ones(b.self.num_attention_heads, requires_grad=True) for b in blocks]

    def hook(gate, head_size):
        def apply(module, args, output):
            out = output[0]
            shape = out.shape
            gated = (out.view(*shape[:-1], -1, head_size) * gate.view(-1, 1)).view(shape)
            return (gated, *output[1:])
        return apply

    handles = [b.self.register_forward_hook(hook(g, b.self.attention_head_size)) for b, g in zip(blocks, gates)]
    scores = [torch.zeros(len(g)) for g in gates]
    model.eval()
    try:
        for batch in batches:
            loss = model(**batch).loss
            grads = torch.autograd.grad(loss, gates)
            for s, g in zip(scores, grads):
                s += g.abs().detach()
    finally:
        for h in handles:
            h.remove()
    return [(s / (s.norm() + 1e-12)).tolist() for s in scores]


def heads_to_prune(importance: list[list[float]], share: float) -> dict[int, list[int]]:
    """The `share` of all heads with the lowest importance, at least one head left per layer."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"share must be in [0, 1), got {share}")
    total = sum(len(layer) for layer in importance)
    want = int(round(share * total))
    order = sorted((score, layer, head) for layer, scores in enumerate(importance) for head, score in enumerate(scores))
    left = [len(layer) for layer in importance]
    chosen: dict[int, list[int]] = {}
    for _, layer, head in order:
        if sum(len(v) for v in chosen.values()) >= want:
            break
        if left[layer] > 1:
            chosen.setdefault(layer, []).append(head)
            left[layer] -= 1
    return {layer: sorted(heads) for layer, heads in sorted(chosen.items())}


def prune(model, heads: dict[int, list[int]]):
    """Remove `heads` ({layer: [head, ...]}) in place; returns the model."""
    import torch
    from transformers.pytorch_utils import prune_linear_layer

    blocks = attention_blocks(model)
    for layer, drop in heads.items():
        att = blocks[int(layer)]
        sa = att.self
        n, size = sa.num_attention_heads, sa.attention_head_size
        if not drop:
            continue
        if len(set(drop)) >= n or max(drop) >= n:
            raise ValueError(f"layer {layer}: cannot remove heads {drop} of {n} (at least one stays)")
        keep = torch.tensor([h * size + i for h in range(n) if h not in set(drop) for i in range(size)], dtype=torch.long)
        sa.query = prune_linear_layer(sa.query, keep)
        sa.key = prune_linear_layer(sa.key, keep)
        sa.value = prune_linear_layer(sa.value, keep)
        att.output.dense = prune_linear_layer(att.output.dense, keep, dim=1)
        sa.num_attention_heads = n - len(set(drop))
        sa.all_head_size = sa.num_attention_heads * size
    return model


def load_pruned(model_dir):
    """(model, kind) of a directory written by `compress --method prune`."""
    import json
    from pathlib import Path

    import torch

    from training.card_models import auto_class, model_kind

    kind = model_kind(model_dir)
    import transformers as tf

    model = auto_class(kind).from_config(tf.AutoConfig.from_pretrained(str(model_dir)))
    spec = json.loads((Path(model_dir) / PRUNE_FILE).read_text())
    prune(model, {int(k): v for k, v in spec["pruned_heads"].items()})
    model.load_state_dict(torch.load(Path(model_dir) / PRUNED_WEIGHTS, weights_only=True))
    return model.eval(), kind
