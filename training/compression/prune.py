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
weights as `pruned.pt`, and `pruning.json` naming the heads removed per layer; `training.models.model_formats.load_pruned` (and
`lmforge evaluate --model`) rebuilds it.
"""
from __future__ import annotations

from training.models.model_formats import attention_blocks


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
