"""One pretraining process's engine and step: DeepSpeed around the module, compiled regions, lmforge's clipping.

    engine = make_engine(cfg, module, total, world, device_type)   # deepspeed.initialize with cfg's plan
    step = TrainStep(engine, cfg, world)
    loss = step.forward_backward(batch)       # one micro-batch
    norm = step.update()                      # the optimizer step at an accumulation boundary (norm on the device)

What a step costs on the host matters on a GPU, where a bert_base step's arithmetic takes ~20 ms and the host
could spend 90 launching it (docs/BENCHMARKS.md "gpu"). So at ZeRO stage 0 (one process, or a model that fits:
training.pretraining.run_plan):
- no all-reduce at world size 1 (DeepSpeed would flatten every gradient into a bucket, "reduce" it over one
  process and copy it back: two passes over the gradients and ~400 ops a step);
- clipping is one fused norm (`torch.nn.utils.get_total_norm`, foreach) and its scale is handed to torch's fused
  AdamW as `grad_scale`, which divides each gradient inside its one kernel: no pass over the gradients of its
  own (DeepSpeed's stage-0 clip takes a norm per parameter and an all-reduce: ~600 ops);
- bf16 is torch autocast (training.runtime.ds_config): fp32 weights, the fused optimizer on them, no second copy.
ZeRO 1-3 and fp16 keep DeepSpeed's optimizers, which clip over their flat buffers.
"""
from __future__ import annotations

import logging
from typing import Any

import torch

from training.pretraining.budget import BudgetClock
from training.pretraining.compiled import compile_regions
from training.runtime.ds_config import clip_norm, lmforge_clips
from training.runtime.recipe import build_optimizer, param_groups, schedule_fn

log = logging.getLogger("lmforge.pretrain")

EPS = 1e-6
"""torch.nn.utils.clip_grad_norm_'s: the scale is max_norm / (norm + EPS), at most 1."""


def make_engine(cfg: Any, module: torch.nn.Module, total: int, world: int, device_type: str,
                ds_config: dict[str, Any], compiled: bool = False):
    """(engine, budget clock or None, compiled region names): the optimizer and LR schedule of cfg, DeepSpeed
    initialised over `module`, the regions compiled when asked."""
    import deepspeed

    optimizer = build_optimizer(cfg.optimizer, param_groups(module.hf, cfg.weight_decay), cfg.lr, device_type)
    warmup = int(cfg.warmup_ratio * total)
    clock = BudgetClock(cfg.time_budget_minutes * 60, cfg.warmup_ratio, cfg.schedule) if cfg.time_budget_minutes else None
    factor = clock.factor if clock else schedule_fn(cfg.schedule, warmup, total)
    engine, _, _, _ = deepspeed.initialize(
        model=module, optimizer=optimizer, config=ds_config,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, factor),
    )
    if world == 1 and cfg.zero_stage == 0:
        engine.enable_backward_allreduce = False  # one process: nothing to reduce (see the module docstring)
    if cfg.zero_stage == 0 and not cfg.fp16:  # DeepSpeed's step then calls engine.zero_grad() (bf16 is autocast)
        # DeepSpeed's stage-0 zero_grad walks module.named_parameters() every step: 2.5 ms of Python for bert_base's
        # 200 tensors on this CPU (cProfile), where setting each gradient to None from a list is ~0.05 ms
        params = list(engine.module.parameters())

        def zero_grad() -> None:
            for p in params:
                p.grad = None

        engine.zero_grad = zero_grad
    regions = compile_regions(engine.module, cfg.compile_mode) if compiled else []
    return engine, clock, regions


class TrainStep:
    """The micro-batch and optimizer steps of one process, host work kept to what the step needs."""

    def __init__(self, engine, cfg: Any):
        self.engine = engine
        self.ours = lmforge_clips(cfg)
        self.max_norm = clip_norm(cfg)
        self.params = [p for p in engine.module.parameters() if p.requires_grad]
        opt = engine.optimizer
        # torch's fused Adam(W) divides every gradient by `grad_scale` inside its kernel (GradScaler's hook)
        self.in_optimizer = (self.ours and isinstance(opt, torch.optim.Adam | torch.optim.AdamW)
                             and bool(opt.defaults.get("fused")))

    def forward_backward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss = self.engine(**batch)
        self.engine.backward(loss)
        return loss

    def update(self) -> Any:
        """engine.step(); at an accumulation boundary returns the gradient norm before clipping (a device tensor
        from lmforge's clip, or DeepSpeed's number at ZeRO 1-3), else None."""
        boundary = self.engine.is_gradient_accumulation_boundary()
        norm = self.clip() if boundary and self.ours else None
        self.engine.step()
        if boundary and norm is None:
            norm = self.engine.get_global_grad_norm()
        return norm

    def clip(self) -> torch.Tensor:
        """The global gradient norm; the gradients scaled to at most max_norm (by the fused optimizer, or here)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if not grads:
            return torch.zeros((), device=self.engine.device)
        # torch.nn.utils.get_total_norm, less its per-gradient .to(device) (one dispatch each; all are on one device)
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        if self.max_norm > 0:
            scale = torch.clamp((norm + EPS) / self.max_norm, min=1.0)  # divide by it = multiply by clip_coef
            if self.in_optimizer:
                self.engine.optimizer.grad_scale = scale.to(torch.float32)
            else:
                torch._foreach_div_(grads, scale)
        return norm
