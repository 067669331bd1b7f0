"""The micro batch a GPU holds: probed at start-up with real forward and backward passes, cached per model.

    probe = StepProbe(module, make_batch, device, bf16=True, optimizer_bytes=8 * params)
    fit = fitted_micro_batch(probe, budget, largest=512, key=...)      # the largest that fits (cached)
    check_micro_batch(64, probe, budget)                               # an asked-for size that does not fit: one line

A probe runs one forward and backward of the training module at a given size on batches built from the real
rows (the loader's own, so document ids and the fixed masked count are there), reads the allocator's peak and
adds what the optimizer will hold (AdamW's two moments: 8 bytes a parameter, not allocated until its first
step). Out of memory is caught and counts as "does not fit". The search itself is training.pretraining.memory_plan's
`fit_micro_batch` (pure, tested with a simulated limit); on the CPU a probe counts the bytes of the weights,
gradients and the tensors saved for backward, which is what a GPU's allocator holds at the peak.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import torch

from common.cache import remembered
from training.pretraining.memory_plan import MARGIN, MicroBatchFit, fit_micro_batch

log = logging.getLogger("lmforge.micro_batch")

LARGEST = 1024
"""The probe stops doubling here: 1,024 rows of 128 tokens is 131k tokens a step per GPU, past where larger
micro batches stop raising a GPU's throughput (NVIDIA's BERT uses 256 at 128 tokens)."""


class StepProbe:
    """micro batch -> peak bytes of one training forward and backward (plus the optimizer's state), None on
    out-of-memory. The module's gradients are dropped after each probe."""

    def __init__(self, module: torch.nn.Module, make_batch: Callable[[int], dict[str, torch.Tensor]],
                 device: torch.device, bf16: bool = False, optimizer_bytes: float = 0.0):
        self.module, self.make_batch, self.device = module, make_batch, device
        self.bf16, self.optimizer_bytes = bf16, optimizer_bytes

    def __call__(self, size: int) -> float | None:
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
        saved = _SavedBytes()
        try:
            batch = {k: v.to(self.device) for k, v in self.make_batch(size).items()}
            autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
            with saved.counting(not cuda), autocast:
                loss = self.module(**batch)
            loss.backward()
            peak = torch.cuda.max_memory_allocated(self.device) if cuda else saved.total + _model_bytes(self.module)
        except torch.OutOfMemoryError:
            peak = None
        finally:
            batch = loss = None  # noqa: F841  (released before the next probe)
            self.module.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.empty_cache()
        return None if peak is None else float(peak) + self.optimizer_bytes


class _SavedBytes:
    """Bytes of the tensors autograd saves for backward (the activations a step holds at its peak), on the CPU."""

    def __init__(self) -> None:
        self.total = 0

    @contextlib.contextmanager
    def counting(self, on: bool):
        if not on:
            yield
            return

        def pack(t: torch.Tensor) -> torch.Tensor:
            if not isinstance(t, torch.nn.Parameter):
                self.total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield


def _model_bytes(module: torch.nn.Module) -> int:
    """Weights and their gradients (4 + 4 bytes a trainable fp32 parameter)."""
    return sum(p.numel() * p.element_size() * (2 if p.requires_grad else 1) for p in module.parameters())


def budget_bytes(device: torch.device) -> float:
    """What a step may fill: the GPU's memory less MARGIN."""
    total = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else 0
    if not total:
        raise ValueError("no device memory to fit a micro batch into (a CPU run has no --micro-batch-size probe)")
    return total * (1 - MARGIN)


def fitted_micro_batch(probe: StepProbe, budget: float, largest: int, key: dict[str, Any]) -> MicroBatchFit:
    """The largest micro batch that fits, from the cache (~/.cache/lmforge/micro_batch.json) when this model,
    row length, precision and device were probed before, else probed now (a few seconds)."""
    digest = hashlib.sha256(json.dumps({**key, "budget": int(budget), "largest": largest}, sort_keys=True,
                                       default=str).encode()).hexdigest()[:16]

    def probe_now() -> dict[str, Any]:
        fit = fit_micro_batch(probe, budget, largest)
        log.info("micro batch: probed %s -> %d fits (peak %.1f of %.1f GB)", ", ".join(
            f"{s}:{'oom' if p is None else f'{p / 1e9:.1f}GB'}" for s, p in fit.tried), fit.size,
            (fit.peak_bytes or 0) / 1e9, budget / 1e9)
        return {"size": fit.size, "peak_bytes": fit.peak_bytes, "tried": fit.tried}

    hit = remembered("micro_batch", digest, probe_now)
    return MicroBatchFit(int(hit["size"]), hit["peak_bytes"], tuple(tuple(t) for t in hit["tried"]))


def check_micro_batch(size: int, probe: StepProbe, budget: float, where: str = "the GPU") -> None:
    """An asked-for micro batch that does not fit fails before training, in one line naming one that does."""
    peak = probe(size)
    if peak is not None and peak <= budget:
        return
    try:
        fit = fit_micro_batch(probe, budget, largest=size - 1) if size > 1 else None
    except MemoryError:
        fit = None
    said = "runs out of memory" if peak is None else f"needs {peak / 1e9:.1f} GB"
    instead = f"--micro-batch-size {fit.size} does" if fit else "not even 1 row fits"
    raise ValueError(f"--micro-batch-size {size} does not fit on {where}: one step {said}, {budget / 1e9:.1f} GB "
                     f"are usable; {instead} (reach a larger global batch with --grad-accum or --global-batch-size, "
                     "or let --micro-batch-size auto choose)")
