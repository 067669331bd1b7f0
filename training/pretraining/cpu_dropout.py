"""Dropout for training on the CPU, with its masks drawn from a fast generator.

On the CPU torch draws every dropout mask element by element from one Mersenne Twister
(`bernoulli_`): on this 2-core machine 2.4 ms for a 16 x 128 x 64 activation and 6 ms for a
16 x 2 x 128 x 128 attention map, 17% of the tiny preset's step and 13% of bert_mini's (torch
profiler). numpy's SFC64 (a small chaotic-counter generator that passes TestU01's BigCrush and
PractRand) fills the same mask as 16-bit words in 0.3 ms. So on the CPU `install` swaps the model's
`nn.Dropout` modules and its attention-probability dropout for the versions here:

- each mask keeps a position with probability 1 - p (p rounded to 1/65,536: 0.1 -> 6,554/65,536)
  and scales the kept ones by 1 / (1 - p), as `torch.nn.functional.dropout` does;
- each mask's seed is drawn from torch's default generator, so `torch.manual_seed` and a
  checkpoint's saved RNG state reproduce the masks exactly, as they do torch's own;
- attention with dropout runs as SDPA's own math path (QK^T, softmax, dropout, AV) with the fast
  mask; without dropout, in evaluation, on a GPU, or for a causal or grouped-query attention it is
  transformers' SDPA function unchanged.

On a GPU nothing changes: torch's Philox dropout is already cheap there. Considered: torch's
`uniform_`/`randint` (the same generator, 5 ns an element) and torch.compile (inductor fuses its
own RNG, but compiles for minutes on 2 cores and wraps DeepSpeed's hooks).
"""
from __future__ import annotations

import math

import numpy as np
import torch

KEEP_WORDS = 1 << 16
"""A mask element is one uniform 16-bit word; kept where word >= p * 65,536 (rounded)."""


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool tensor of `shape` on the CPU, True with probability 1 - p (p rounded to 1/65,536)."""
    n = math.prod(shape)
    # torch's generator picks the seed, so seeding and a resumed RNG state hold; a CPU tensor's read waits on no device
    seed = int(torch.randint(0, 1 << 62, (1,), dtype=torch.int64).numpy()[0])
    words = np.random.SFC64(seed).random_raw(-(-n // 4)).view(np.int16)[:n]  # 4 words per 64-bit draw
    threshold = round(p * KEEP_WORDS) - (KEEP_WORDS >> 1)  # int16 runs from -32,768: drop the lowest p share
    return torch.from_numpy(words).view(shape) >= threshold


class _Dropout(torch.autograd.Function):
    """x * mask / (1 - p), keeping only the 1-byte mask for backward (torch's own keeps it too)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        keep = keep_mask(x.shape, p)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """`torch.nn.functional.dropout` with the fast mask on the CPU; torch's own elsewhere, or for p 0 or 1."""
    if not training or p <= 0.0:
        return x
    if p >= 1.0 or x.device.type != "cpu":
        return torch.nn.functional.dropout(x, p, training)
    return _Dropout.apply(x, p)


class Dropout(torch.nn.Dropout):
    """A drop-in `nn.Dropout` (same `p`, same state dict: none) that draws its masks as `dropout` does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


MARK = "_lmforge_cpu_dropout"
"""Set on the attention modules `install` took over; other models in the process keep plain SDPA."""

_sdpa = None
"""transformers' own SDPA attention function, which `attention` hands everything else to."""


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' attention-function signature ((batch, heads, seq, head dim) in, (batch, seq, heads, head dim)
    out): the math path with the fast mask for a marked, bidirectional module training with dropout on the CPU."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", False)
    if (not getattr(module, MARK, False) or not dropout or not module.training or query.device.type != "cpu"
            or causal or key.shape[1] != query.shape[1]):
        return _sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal,
                     **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)).mul_(scale)
    if attention_mask is not None:  # SDPA's masks: bool (True attends) or additive floats
        mask = attention_mask[..., : key.shape[-2]]
        scores = (scores.masked_fill(~mask, torch.finfo(scores.dtype).min) if mask.dtype == torch.bool
                  else scores + mask)
    probs = _Dropout.apply(torch.softmax(scores, dim=-1), dropout)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), None


def install(model: torch.nn.Module) -> int:
    """Swap `model`'s dropout for the CPU versions above (call only when training on the CPU); returns how many
    modules now draw fast masks. The weights and the exported model are unchanged: dropout holds no state."""
    global _sdpa
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if _sdpa is None:
        _sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]
        ALL_ATTENTION_FUNCTIONS["sdpa"] = attention  # unmarked modules fall through to _sdpa unchanged
    swapped = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Dropout and child.p > 0:
                setattr(parent, name, Dropout(child.p))
                swapped += 1
        if hasattr(parent, "is_causal") and hasattr(parent, "dropout") and hasattr(parent, "scaling"):
            setattr(parent, MARK, True)  # an attention module: its probabilities' dropout goes through `attention`
    return swapped
