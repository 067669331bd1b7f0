"""The training recipe shared by the stages: optimizer, learning-rate schedule and held-out loss.

    groups = param_groups(model, weight_decay=0.01)
    opt = build_optimizer("adamw", groups, lr=1e-3, accelerator="cpu")   # torch AdamW; FusedAdam on CUDA
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_fn("cosine", warmup=60, total=1000))

Schedules (each starts with a linear warm-up from 0 over `warmup` steps):
- `linear`: then linear decay to 0 at `total` (BERT, RoBERTa);
- `cosine`: then half a cosine from 1 to 0 at `total` (GPT-3, Chinchilla);
- `inverse_sqrt`: then sqrt(warmup / step), no end (the original Transformer, T5's pre-training
  uses the same shape); it needs no `total`, so it suits open-ended or continued training.
The factor is a pure function of progress, so a time-budgeted run (progress = elapsed / budget) and a
step-counted run (progress = step / total) share it.

Optimizers: `adamw` (torch's AdamW, bit-identical on resume; DeepSpeed's FusedAdam on CUDA) and `lamb`
(You et al. 2019, large-batch BERT; pytorch-optimizer's maintained `Lamb` on CPU, DeepSpeed's FusedLamb on
CUDA). DeepSpeed's CPU Adam is not used: it compiles C++ on first use and is not faster at these sizes.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

SCHEDULES = ("linear", "cosine", "inverse_sqrt")
OPTIMIZERS = ("adamw", "lamb")


def lr_factor(schedule: str, step: float, warmup: float, total: float) -> float:
    """Multiplier of the peak learning rate at `step` (steps or any other unit of progress, e.g. seconds)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if step < warmup:
        return step / warmup
    if schedule == "inverse_sqrt":
        return math.sqrt(max(warmup, 1.0) / max(step, 1.0))
    if total <= warmup:
        return 1.0 if step < total else 0.0
    if schedule == "linear":  # transformers' get_linear_schedule_with_warmup, term for term
        return max(0.0, (total - step) / (total - warmup))
    progress = min(1.0, (step - warmup) / (total - warmup))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def schedule_fn(schedule: str, warmup: int, total: int) -> Callable[[int], float]:
    """For torch.optim.lr_scheduler.LambdaLR: step -> factor."""
    lr_factor(schedule, 0, warmup, total)  # raises on an unknown name
    return lambda step: lr_factor(schedule, step, warmup, total)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices (weights, embeddings), not biases or LayerNorm gains (nanoGPT's ndim rule)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]


def optimizer_choice(name: str, accelerator: str) -> str:
    """Which implementation `build_optimizer` uses: a pure function, tested without a GPU."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    if accelerator == "cuda":
        return {"adamw": "deepspeed.ops.adam.FusedAdam", "lamb": "deepspeed.ops.lamb.FusedLamb"}[name]
    return {"adamw": "torch.optim.AdamW", "lamb": "pytorch_optimizer.Lamb"}[name]


def build_optimizer(name: str, groups: list[dict[str, Any]], lr: float, accelerator: str = "cpu",
                    betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-6) -> torch.optim.Optimizer:
    """The optimizer (RoBERTa's betas and eps by default); gradient clipping is DeepSpeed's, not LAMB's own."""
    choice = optimizer_choice(name, accelerator)
    if choice == "torch.optim.AdamW":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    if choice == "pytorch_optimizer.Lamb":
        from pytorch_optimizer import Lamb

        return Lamb(groups, lr=lr, betas=betas, eps=eps, max_grad_norm=0.0)
    if choice == "deepspeed.ops.adam.FusedAdam":
        from deepspeed.ops.adam import FusedAdam

        return FusedAdam(groups, lr=lr, betas=betas, eps=eps, adam_w_mode=True)
    from deepspeed.ops.lamb import FusedLamb

    return FusedLamb(groups, lr=lr, betas=betas, eps=eps)


def masked_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, counted) over positions whose label is not -100; logits (..., vocab), labels (...)."""
    keep = labels != -100
    correct = (logits.detach().argmax(-1)[keep] == labels[keep]).sum()
    return correct, keep.sum()


class HeldOut:
    """Held-out loss and top-1 accuracy per labelled token, summed over batches (and over ranks with `sums`)."""

    def __init__(self) -> None:
        self.sums = torch.zeros(3, dtype=torch.float64)  # loss x labelled, labelled, correct

    def add(self, mean_loss: float, labelled: int, correct: int = 0) -> None:
        self.sums += torch.tensor([mean_loss * labelled, labelled, correct], dtype=torch.float64)

    @property
    def tokens(self) -> int:
        return int(self.sums[1].item())

    @property
    def loss(self) -> float | None:
        return (self.sums[0] / self.sums[1]).item() if self.sums[1] > 0 else None

    @property
    def accuracy(self) -> float | None:
        return (self.sums[2] / self.sums[1]).item() if self.sums[1] > 0 else None


def heldout_loss(step: Callable[[dict[str, torch.Tensor]], tuple[float, int, int]], batches, limit: int = 0) -> HeldOut:
    """The one held-out loss of every stage (pretrain's validation, distill's student and teacher, evaluate's
    card): `step(batch)` returns (mean loss over the batch's labelled tokens, their count, top-1 hits), and the
    result weights each batch by its labelled tokens, so it is the mean per token over the first `limit`
    batches (0: all), not a mean of batch means."""
    out = HeldOut()
    with torch.no_grad():
        for i, batch in enumerate(batches):
            if limit and i == limit:
                break
            out.add(*step(batch))
    return out


def data_parallel() -> tuple[int, int]:
    """(rank, world) of an initialised process group, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_data_parallel() -> tuple[int, int]:
    """(rank, world) for a stage's worker: one process unless started by torchrun (training.launch, `--nproc N`),
    then a process group over the planned backend (gloo on CPU, NCCL on CUDA), and this worker dies with its agent."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return 0, 1
    import torch.distributed as dist

    from training.accelerator import dist_backend
    from training.launch import die_with_parent

    die_with_parent()
    if not dist.is_initialized():
        dist.init_process_group(backend=dist_backend())
    return dist.get_rank(), dist.get_world_size()


def sum_gradients(model: torch.nn.Module, extra: list[float] | None = None) -> list[float]:
    """All-reduce (sum) every gradient of `model` in one flat buffer, with a few scalars (e.g. the step's loss
    parts) riding along; returns the summed scalars. Each process scales its loss by its share of the global
    batch before backward, so the sum is the gradient of the global batch's mean loss. A parameter without a
    gradient on this process (it saw no rows) contributes zeros."""
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    extra = extra or []
    flat = torch.cat([p.grad.reshape(-1) for p in params] + [torch.tensor(extra, dtype=params[0].grad.dtype)])
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset: offset + p.numel()].view_as(p.grad))
        offset += p.numel()
    return flat[offset:].tolist()
