"""The residual stream in bf16 under autocast: LayerNorm outputs in the autocast dtype.

    n = bf16_residual(model)     # hooks on every nn.LayerNorm; returns how many

Under torch.autocast, LayerNorm runs in fp32 and returns fp32, so a post-LN transformer's residual stream (each
block's output, the input of the next block's residual add) stays fp32 while the matrix products run in bf16.
The elementwise kernels around the products (dropout, residual add, LayerNorm, their backward) then read and write
fp32 copies of every activation: on an H100 at bert_base's fitted micro batch they took more GPU time than the
matrix products (docs/BENCHMARKS.md "gpu": 117.5 ms of a 250 ms step against 95.1). With each LayerNorm's output
cast to the autocast dtype, the stream is bf16, as in pure-bf16 training (Megatron-LM's default without
--fp32-residual-connection): the normalisation itself still computes in fp32 (autocast's own rule; a compiled
region fuses the cast into it), the weights and the optimizer stay fp32. Outside autocast (fp32 runs, evaluation
in fp32, the export) the hook returns the output unchanged. Pretraining hooks it on CUDA only
(training.pretraining.setup.residual_stream), where it was measured.
"""
from __future__ import annotations

import torch


def _to_autocast_dtype(module: torch.nn.Module, inputs, output: torch.Tensor) -> torch.Tensor:
    kind = output.device.type
    if torch.is_autocast_enabled(kind):
        return output.to(torch.get_autocast_dtype(kind))
    return output


def bf16_residual(model: torch.nn.Module) -> int:
    """Hook every nn.LayerNorm of `model` to return the autocast dtype while autocast is on; the count hooked.
    Hooks, not a new class: the state dict, the export and a module's type stay the model's own."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    for norm in norms:
        norm.register_forward_hook(_to_autocast_dtype)
    return len(norms)
