"""The training recipe shared by the stages: optimizer, learning-rate schedule and held-out loss.

    groups = param_groups(model, weight_decay=0.01)
    opt = build_optimizer("adamw", groups, lr=1e-3, accelerator="cpu")   # torch's fused AdamW, on CPU and CUDA alike
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_fn("cosine", warmup=60, total=1000))

Schedules (each starts with a linear warm-up from 0 over `warmup` steps):
- `linear`: then linear decay to 0 at `total` (BERT, RoBERTa);
- `cosine`: then half a cosine from 1 to 0 at `total` (GPT-3, Chinchilla);
- `inverse_sqrt`: then sqrt(warmup / step), no end (the original Transformer, T5's pre-training
  uses the same shape); it needs no `total`, so it suits open-ended or continued training.
The factor is a pure function of progress, so a time-budgeted run (progress = elapsed / budget) and a
step-counted run (progress = step / total) share it.

Optimizers: `adamw` (torch's AdamW, fused: one kernel per step over all parameters, on CPU and CUDA alike,
bit-identical on resume, nothing to compile) and `lamb` (You et al. 2019, large-batch BERT; DeepSpeed's
FusedLamb on CUDA when its op loads, else pytorch-optimizer's maintained `Lamb`). DeepSpeed's own Adam ops are
not used: the pinned deepspeed ships no prebuilt ops, so they JIT-compile C++/CUDA (nvcc) on first use.
LAMB's trust ratio is per tensor; ZeRO and DeepSpeed's mixed-precision optimizers hand it flat partitions
instead, so it is refused there (`check_optimizer`).
"""
from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable
from typing import Any

import torch

from training.runtime.distributed import init_worker
from training.runtime.optim_choices import OPTIMIZERS, SCHEDULES, check_optimizer  # noqa: F401 - re-exported
from training.runtime.processes import die_with_parent

log = logging.getLogger("lmforge.recipe")


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


def deepspeed_arch_list(value: str) -> str:
    """TORCH_CUDA_ARCH_LIST as DeepSpeed's JIT builder can parse it: torch accepts family and arch-specific
    targets ("9.0a", "10.0f"), DeepSpeed 0.19's builder reads each part as an int and fails on them ("invalid
    literal for int() with base 10: '0a'", seen on an H200 whose image sets 9.0a). The plain capability builds
    the same fused optimizer kernels, which use no sm_90a-only instruction; "+PTX" is kept."""
    parts = [p for p in value.replace(" ", ";").split(";") if p]
    plain = [re.sub(r"^(\d+\.\d+)[a-z]+", r"\1", p) for p in parts]
    return ";".join(dict.fromkeys(plain))


def fused_op_loads(op: str) -> bool:
    """Whether DeepSpeed's fused `op` (FusedLambBuilder, FusedAdamBuilder) can be used here: prebuilt, or
    compatible and buildable now (its JIT needs nvcc). Never raises; why not is logged."""
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    try:
        from deepspeed.ops import op_builder

        builder = getattr(op_builder, op)()
        if not builder.is_compatible(verbose=False):
            log.info("DeepSpeed's %s is not compatible here (CPU-only torch, or no nvcc)", op)
            return False
        if arch:
            os.environ["TORCH_CUDA_ARCH_LIST"] = deepspeed_arch_list(arch)
        builder.load(verbose=False)
        return True
    except Exception as e:  # a missing nvcc, a CPU-only torch, an op DeepSpeed lacks, a failed build  # noqa: BLE001
        log.info("DeepSpeed's %s does not load: %s: %s", op, type(e).__name__, str(e).strip()[:300])
        return False
    finally:
        if arch:
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch


def optimizer_choice(name: str, accelerator: str, fused_lamb: bool | None = None) -> str:
    """Which implementation `build_optimizer` uses (pure given `fused_lamb`, tested without a GPU): torch's
    fused AdamW everywhere; for LAMB on CUDA, DeepSpeed's FusedLamb if its op loads (None: try it)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    if name == "adamw":
        return "torch.optim.AdamW(fused)"
    if accelerator == "cuda":
        if fused_lamb is None:
            fused_lamb = fused_op_loads("FusedLambBuilder")
        if fused_lamb:
            return "deepspeed.ops.lamb.FusedLamb"
    return "pytorch_optimizer.Lamb"


def build_optimizer(name: str, groups: list[dict[str, Any]], lr: float, accelerator: str = "cpu",
                    betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-6) -> torch.optim.Optimizer:
    """The optimizer (RoBERTa's betas and eps by default); gradient clipping is DeepSpeed's, not LAMB's own."""
    choice = optimizer_choice(name, accelerator)
    if choice == "torch.optim.AdamW(fused)":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    if choice == "pytorch_optimizer.Lamb":
        if accelerator == "cuda":
            log.warning("DeepSpeed's FusedLamb does not load here (no prebuilt op, and its JIT build failed or "
                        "needs nvcc; the reason is logged above): using pytorch-optimizer's Lamb, correct and slower")
        from pytorch_optimizer import Lamb

        return Lamb(groups, lr=lr, betas=betas, eps=eps, max_grad_norm=0.0)
    from deepspeed.ops.lamb import FusedLamb

    return FusedLamb(groups, lr=lr, betas=betas, eps=eps)


def masked_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, counted) over positions whose label is not -100; logits (..., vocab), labels (...)."""
    keep = labels != -100
    # no boolean-mask indexing: on a GPU it waits for the mask's count (a host sync) and gives dynamic shapes.
    # A hit: the label's logit is the row's maximum. amax is a plain vectorised reduction; argmax is not on the
    # CPU (312 x 8,000 logits: 0.18 ms against 2.8 ms). A tie with another maximum counts as a hit (argmax would
    # pick the first); float logits tie about never.
    logits = logits.detach()
    hit = logits.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) >= logits.amax(-1)
    correct = (hit & keep).sum()
    return correct, keep.sum()


class HeldOut:
    """Held-out loss and top-1 accuracy per labelled token, summed over batches (and over ranks with `sums`)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        # loss x labelled, labelled, correct; on the device the sums are all-reduced from (training.runtime.distributed)
        self.sums = torch.zeros(3, dtype=torch.float64, device=device)

    def add(self, mean_loss, labelled, correct=0) -> None:
        """Python numbers or 0-d tensors of the step's device (no host sync for those)."""
        parts = [torch.as_tensor(x, dtype=torch.float64, device=self.sums.device) for x in (mean_loss, labelled, correct)]
        self.sums += torch.stack([parts[0] * parts[1], parts[1], parts[2]])

    @property
    def tokens(self) -> int:
        return int(self.sums[1].item())

    @property
    def loss(self) -> float | None:
        return (self.sums[0] / self.sums[1]).item() if self.sums[1] > 0 else None

    @property
    def accuracy(self) -> float | None:
        return (self.sums[2] / self.sums[1]).item() if self.sums[1] > 0 else None


def heldout_loss(step: Callable[[dict[str, torch.Tensor]], tuple[Any, Any, Any]], batches, limit: int = 0,
                 device: torch.device | str = "cpu") -> HeldOut:
    """The one held-out loss of every stage (pretrain's validation, distill's student and teacher, evaluate's
    card): `step(batch)` returns (mean loss over the batch's labelled tokens, their count, top-1 hits), and the
    result weights each batch by its labelled tokens, so it is the mean per token over the first `limit`
    batches (0: all), not a mean of batch means."""
    out = HeldOut(device)
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
    """(rank, world) for a stage's worker: one process unless started by torchrun (training.launch.torchrun, `--nproc N`),
    then the device policy's process group (training.runtime.distributed: gloo on CPU, NCCL beside gloo on CUDA, the
    GPU bound first), and this worker dies with its agent."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return 0, 1
    import torch.distributed as dist

    die_with_parent()
    init_worker()
    return dist.get_rank(), dist.get_world_size()


def rank_seed(seed: int, rank: int, step: int = 0) -> int:
    """The torch seed of process `rank` (dropout masks; the data order is `seed` alone, training.pretraining.data):
    `seed + rank`, so one process keeps the seed as given. `step` > 0 reseeds a resumed run whose checkpoint holds no
    RNG state for this rank: a prime stride (7919) per step keeps it off the seeds of the other ranks' first steps."""
    return seed + rank + 7919 * step


def soft_label_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(teacher/T || student/T) * T^2 over the rows given (logits (rows, classes)), reduction batchmean: Hinton et
    al. 2015's soft-label term, scaled by T^2 so its gradient keeps the same size whatever T (DistilBERT's scaling)."""
    import torch.nn.functional as F

    return F.kl_div(F.log_softmax(student_logits / temperature, dim=-1), F.softmax(teacher_logits / temperature, dim=-1),
                    reduction="batchmean") * temperature**2


def mlm_loss(model: torch.nn.Module, batches, limit: int = 0, shift: bool = False) -> HeldOut:
    """A masked LM's held-out cross-entropy per masked token and top-1 accuracy over up to `limit` batches (0: all) of
    {input_ids, attention_mask, labels} (heldout_loss); distill's student and teacher, evaluate's reports. `shift`: a
    causal LM's, each position scored on the next token (the loader's causal labels are the inputs). An
    encoder-decoder's batches (t5_span) carry decoder_input_ids, which go in as they are: its loss is over the span
    targets. The sums stay on the model's device until read."""
    import torch.nn.functional as F

    def step(batch):
        feed = {k: batch[k] for k in ("input_ids", "attention_mask", "decoder_input_ids") if k in batch}
        logits = model(**feed).logits
        labels = batch["labels"]
        if shift:
            logits, labels = logits[:, :-1], labels[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)
        correct, counted = masked_accuracy(logits, labels)
        return torch.where(counted > 0, loss, torch.zeros_like(loss)), counted, correct  # no masked token: no NaN

    model.eval()
    return heldout_loss(step, batches, limit, device=next(model.parameters()).device)


def sum_gradients(model: torch.nn.Module, extra: list[torch.Tensor | float] | None = None) -> torch.Tensor:
    """Data-parallel gradient sync, the one rule of the plain-torch loops (distill, fine-tune): each process scales
    its loss by its share of the global batch (its rows / the batch's rows) before backward, and this all-reduces
    (sums) every gradient of `model` in one flat buffer, so the sum is the gradient of the global batch's mean loss,
    as one process with the whole batch. A few scalars (the step's loss parts, scaled by the same share) ride along;
    they come back summed, as a tensor on the gradients' device (NCCL takes no CPU tensor; nothing is read to the
    host here). A parameter without a gradient on this process (it saw no rows) contributes zeros."""
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    like = params[0].grad
    scalars = [torch.as_tensor(x, dtype=like.dtype, device=like.device).detach().reshape(1) for x in (extra or [])]
    flat = torch.cat([p.grad.reshape(-1) for p in params] + scalars)
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset: offset + p.numel()].view_as(p.grad))
        offset += p.numel()
    return flat[offset:]
