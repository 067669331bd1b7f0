"""Training-step counters that stay on the device until a log step (no host sync inside the step).

    stats = StepStats(device)
    stats.add_micro(loss, batch, counted, correct)   # every micro-batch: in-place adds on the device
    stats.end_step(lr, grad_norm)                    # every optimizer step: the step's row kept, still on device
    stats.flush()                                    # log / save / end: ONE all-reduce + ONE host read per window

The old loop read four `.item()`s and all-reduced six numbers every micro-step: on a GPU each `.item()`
waits for the queue to drain, so the next step's kernels could not be queued ahead. Here a window of
steps is stacked into a (steps x FIELDS) tensor, summed over ranks in one collective, and read once.
Counters are named (FIELDS), never positions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

FIELDS = ("loss_sum", "micro_batches", "tokens", "labelled", "sequences", "correct")
"""Per step, summed over ranks: the micro-batches' mean losses added up, their count, real (attended)
tokens, labelled tokens, sequences, top-1 hits at labelled tokens."""
_AT = {name: i for i, name in enumerate(FIELDS)}


@dataclass
class StepStats:
    device: torch.device
    seen: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0.0))
    """Whole run, all ranks (host numbers, updated at flushes; saved in checkpoints)."""
    window: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0.0))
    """Since the last log record, all ranks."""
    curve: list[dict[str, Any]] = field(default_factory=list)
    """One {"step", "loss", "lr"} per optimizer step: the mean micro-batch loss over the global batch."""
    norms: list[float] = field(default_factory=list)
    """Gradient norms of the steps since the last log record (host floats after a flush)."""

    def __post_init__(self) -> None:
        self._micro = torch.zeros(len(FIELDS), dtype=torch.float64, device=self.device)
        self._steps: list[torch.Tensor] = []  # this window's finished steps, on the device, not yet reduced
        self._meta: list[tuple[int, float, Any]] = []  # (step, lr, grad norm as DeepSpeed gave it)

    def add_micro(self, loss: torch.Tensor, batch: dict[str, torch.Tensor], counted: torch.Tensor,
                  correct: torch.Tensor) -> None:
        """One micro-batch's counts, added on the device (no host read)."""
        m = self._micro
        m[_AT["loss_sum"]] += loss.detach().to(torch.float64)
        m[_AT["micro_batches"]] += 1
        mask = batch.get("attention_mask")  # none: every position is a token (training.pretraining.setup.prepare_batch)
        m[_AT["tokens"]] += mask.sum() if mask is not None else batch["input_ids"].numel()
        m[_AT["labelled"]] += counted
        m[_AT["sequences"]] += batch["input_ids"].shape[0]
        m[_AT["correct"]] += correct

    def end_step(self, step: int, lr: float, norm: Any = None) -> None:
        """Close an optimizer step: its row joins the window, still on the device."""
        self._steps.append(self._micro.clone())
        self._micro.zero_()
        self._meta.append((step, lr, norm))

    @property
    def pending(self) -> int:
        return len(self._steps)

    def flush(self) -> None:
        """Sum the pending steps over ranks (one collective) and read them (one host sync) into curve, window
        and seen. Every rank must call it at the same steps."""
        if not self._steps:
            return
        import torch.distributed as dist

        rows = torch.stack(self._steps)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(rows)
        for values, (step, lr, norm) in zip(rows.tolist(), self._meta):
            named = dict(zip(FIELDS, values))
            self.curve.append({"step": step, "loss": named["loss_sum"] / named["micro_batches"], "lr": lr})
            for k, v in named.items():
                self.window[k] += v
                self.seen[k] += v
            if norm is not None:
                self.norms.append(float(norm))
        self._steps.clear()
        self._meta.clear()

    def take_window(self) -> tuple[dict[str, float], list[float]]:
        """The window's sums and gradient norms (flushed first), then a fresh window."""
        self.flush()
        window, norms = self.window, self.norms
        self.window, self.norms = dict.fromkeys(FIELDS, 0.0), []
        return window, norms

    def state(self) -> dict[str, Any]:
        self.flush()
        return {"seen": [self.seen[k] for k in FIELDS], "curve": self.curve}

    def load(self, seen: list[float], curve: list[dict[str, Any]]) -> None:
        """Continue a run: its whole-run sums (saved in FIELDS order) and loss curve."""
        self.seen = dict(zip(FIELDS, (float(x) for x in seen)))
        self.curve = list(curve)


def check_finite(first_step: int, last_step: int, window: dict[str, float], norms: list[float]) -> None:
    """Stop a diverged run at its log step: bf16 runs skip no step on a non-finite gradient (training.runtime.ds_config
    turns DeepSpeed's per-gradient check off), so a NaN reaches the weights and stays; every rank holds the same
    all-reduced window, so every rank stops here together instead of one waiting in a collective."""
    loss = window["loss_sum"] / max(window["micro_batches"], 1)
    bad = [f"loss {loss}"] if not math.isfinite(loss) else []
    bad += [f"gradient norm {n}" for n in norms if not math.isfinite(n)][:1]
    if bad:
        raise FloatingPointError(f"steps {first_step}-{last_step}: {', '.join(bad)}: the run diverged; resume from "
                                 "the last checkpoint (--resume) with a lower --lr, or train with --fp32")


def log_window_steps(step: int, every: int, total: int) -> int:
    """How many steps the log window closed by `step` holds (a window closes every `every` steps and at the last
    step), 0 when `step` closes none: every loop's test for a log step (pretrain, distill; fine-tune's evaluations)."""
    if step % every == 0:
        return every
    return step % every if step == total else 0


class StepRows:
    """Named per-step scalars of a plain-torch loop (distill's loss parts, fine-tune's loss), kept on the device and
    read in one host sync per log window; StepStats's FIELDS are pretraining's micro-batch counters instead.

        rows = StepRows(("loss", "ce"))
        rows.add(step, lr, {"loss": loss, "ce": ce})   # 0-d tensors: no host read
        curve = rows.flush()                           # at a log step: [{"step", "loss", "ce", "lr"}, ...]
    """

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields
        self.curve: list[dict[str, Any]] = []
        self._rows: list[torch.Tensor] = []
        self._meta: list[tuple[int, float]] = []

    def add(self, step: int, lr: float, values: dict[str, torch.Tensor]) -> None:
        # float64 holds every float32 exactly: the curve reads as `.item()` of each value would
        self._rows.append(torch.stack([torch.as_tensor(values[f]).detach().to(torch.float64) for f in self.fields]))
        self._meta.append((step, lr))

    def flush(self) -> list[dict[str, Any]]:
        """The whole curve, the pending steps read first (one host sync)."""
        if self._rows:
            for values, (step, lr) in zip(torch.stack(self._rows).tolist(), self._meta):
                self.curve.append({"step": step, **dict(zip(self.fields, values)), "lr": lr})
            self._rows.clear()
            self._meta.clear()
        return self.curve
