"""pretrain's set-up on every rank: the process group, the shards, the run's plan (training.pretraining.run_plan), the micro batch
a GPU holds (training.pretraining.micro_batch), the module and the DeepSpeed engine (training.pretraining.engine)."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from common.config import AUTO
from schemas.manifest import MANIFEST_NAME
from training.models.export import check_tokenizer, load_tokenizer
from training.models.model import SparseMLM, masked_bound, num_parameters, sparse_targets
from training.models.residual import bf16_residual
from training.pretraining import cpu_dropout
from training.pretraining.budget import BudgetClock
from training.pretraining.compiled import kernel_tuning_choice
from training.pretraining.config import TRAINABLE, PretrainConfig, plan_steps
from training.pretraining.data import RankLoader, ShardSet
from training.pretraining.engine import TrainStep, make_engine
from training.pretraining.module import build_module, estimated_parameters, freeze_all_but_head, set_attention
from training.pretraining.outputs import check_shared_output, hold_output, open_verified
from training.pretraining.resume import ResumePlan, plan_resume
from training.pretraining.run_plan import RunPlan, resolve
from training.pretraining.step_profile import enable_kernel_events
from training.runtime.distributed import init_worker
from training.runtime.ds_config import deepspeed_config
from training.runtime.recipe import check_optimizer, rank_seed

log = logging.getLogger("lmforge.pretrain")


@dataclass
class Setup:
    """What `setup` hands the training loop (names, not positions)."""

    cfg: PretrainConfig
    """With the plan's choices filled in (ZeRO stage, micro batch, accumulation, compile and its mode), once."""
    plan: RunPlan
    rank: int
    world: int
    out: Path
    ckpt_dir: Path
    held: Any
    shards: ShardSet
    tokenizer: Any
    loader: RankLoader
    total: int
    ds_config: dict[str, Any]
    engine: Any
    step: TrainStep
    clock: BudgetClock | None
    resumed: ResumePlan | None
    notes: dict[str, Any]
    """For the log and metrics.json: attention, compiled regions, dropout masks, micro batch probe."""


def device_memory(device: torch.device) -> int:
    """Bytes one process may fill: its GPU's, or this node's RAM over its processes; the smallest over all ranks,
    so every rank plans the same."""
    from training.runtime.accelerator import host_memory

    if device.type == "cuda":
        own = torch.cuda.get_device_properties(device).total_memory
    else:
        own = host_memory() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    t = torch.tensor([own], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


def setup(cfg: PretrainConfig) -> Setup:
    """Process group, shards, the run's plan (training.pretraining.run_plan), the micro batch, the module and the engine."""
    # the GPU bound first, then gloo on CPU or NCCL beside gloo on CUDA, with the run's timeout (training.runtime.distributed)
    device = init_worker(cfg.dist_timeout_minutes, deepspeed=True)
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(cfg.output)
    held = hold_output(out, rank)  # one run per output folder, or two runs would interleave checkpoints
    if rank == 0:
        (out / MANIFEST_NAME).unlink(missing_ok=True)
    ckpt_dir = out / "checkpoints"
    check_shared_output(out, rank, device)
    shards = open_verified(cfg.shards, rank, world)
    shards.require_objective(TRAINABLE, "pretrain")
    tokenizer = load_tokenizer(cfg.tokenizer, max_length=shards.seq_len)
    check_tokenizer(tokenizer, shards.vocab_size, shards.pad_id, shards.mask_id, f"{cfg.shards}/manifest.json")
    given, memory, params = cfg, device_memory(device), estimated_parameters(cfg, shards)
    cfg, plan = resolve(given, world, device.type, memory, params)  # cfg is not rewritten after this (run_plan)
    if cfg.profile_steps:
        enable_kernel_events()  # before anything compiles
    check_optimizer(cfg.optimizer, cfg.zero_stage, cfg.fp16)
    train = shards.read("train")
    torch.manual_seed(cfg.seed)  # same init everywhere; DeepSpeed also broadcasts rank 0's weights
    module = build_module(cfg, shards, tokenizer, deepspeed_config(cfg) if cfg.zero_stage == 3 else {})
    notes: dict[str, Any] = {"attention": set_attention(module, cfg.attention, device)}
    notes["residual"] = residual_stream(cfg, module, device.type)
    notes["kernel_tuning"] = kernel_tuning_choice(cfg.kernel_tuning, device.type)  # before the micro batch probe compiles
    if device.type == "cuda":  # the micro batch the GPU holds (auto), or a check that the asked-for one fits
        probed, notes["micro_batch_probe"] = fit_on_device(cfg, plan, module, train, shards, device, world)
        if probed:  # the plan made again with the one fact it waited for
            cfg, plan = resolve(given, world, device.type, memory, params, probed=probed)
    resumed = plan_resume(cfg, ckpt_dir, rank, world) if cfg.resume else None
    loader = RankLoader(train, rank, world, cfg.micro_batch_size, cfg.seed, shards.num_variants, plan.documents)
    total = plan_steps(cfg, loader.batches_per_epoch)
    ds_config = deepspeed_config(cfg, load_universal=bool(resumed and resumed.universal))
    # torch draws CPU dropout masks one element at a time: 13-17% of a step here (training.pretraining.cpu_dropout); a compiled
    # region draws its own, fused
    notes["dropout_masks"] = "sfc64" if device.type == "cpu" and not plan.compile and cpu_dropout.install(module) else "torch"
    if cfg.freeze_encoder:
        frozen = freeze_all_but_head(module.hf)
        log.info("freeze_encoder: %s of %s parameters frozen", f"{frozen:,}", f"{num_parameters(module.hf):,}")
    torch.manual_seed(rank_seed(cfg.seed, rank))  # different dropout masks per rank
    notes["compile_mode"] = plan.compile_mode_reason
    engine, clock, notes["compiled_regions"] = make_engine(cfg, module, total, world, device.type, ds_config,
                                                           plan.compile)
    return Setup(cfg, plan, rank, world, out, ckpt_dir, held, shards, tokenizer, loader, total, ds_config, engine,
                 TrainStep(engine, cfg), clock, resumed, notes)


def residual_stream(cfg: PretrainConfig, module, accelerator: str) -> str:
    """bf16 LayerNorm outputs under autocast on CUDA (training.models.residual) unless --fp32-residual; what the
    run's residual stream is, for metrics.json. Not on the CPU, where it was not measured to help: the host-work
    figure of a CPU step under the GPU plan rose in the first bench run with it (docs/BENCHMARKS.md "train")."""
    if not (cfg.bf16 and cfg.zero_stage == 0):
        return "the weights' dtype" if cfg.bf16 or cfg.fp16 else "fp32"
    if cfg.fp32_residual or accelerator != "cuda":
        return "fp32 (--fp32-residual)" if cfg.fp32_residual else "fp32 (autocast's; bf16 only on CUDA)"
    return f"bf16 ({bf16_residual(module)} LayerNorm outputs cast under autocast)"


def fit_on_device(cfg: PretrainConfig, plan: RunPlan, module, train, shards: ShardSet, device: torch.device,
                  world: int) -> tuple[tuple[int, int] | None, dict[str, Any]]:
    """--micro-batch-size auto: the largest micro batch this GPU holds and the accumulation that makes the global
    batch, (micro, accum), for the plan to be made with; an explicit size: checked to fit (None), or a one-line
    error naming one that does. The same on every rank (the smallest answer)."""
    from training.pretraining.memory_plan import BYTES, split_global_batch
    from training.pretraining.micro_batch import LARGEST, StepProbe, budget_bytes, check_micro_batch, fitted_micro_batch

    if cfg.zero_stage == 3:  # the module is partitioned already: only DeepSpeed's engine can run it
        if cfg.micro_batch_size == AUTO:
            raise ValueError("--micro-batch-size auto under ZeRO-3: the probe runs the model outside DeepSpeed, which "
                             "partitions it; give --micro-batch-size")
        return None, {"checked": "not under ZeRO-3"}
    compiled = plan.compile
    view = RankLoader(train, 0, 1, 1, cfg.seed, shards.num_variants, plan.documents)
    most = view.most_masks_per_row()

    def make_batch(size: int) -> dict[str, torch.Tensor]:
        batch = view.view.batch(np.arange(size) % train.num_rows, 0) if view.view is not None else \
            next(iter(RankLoader(train, 0, 1, min(size, train.num_rows), cfg.seed, shards.num_variants,
                                 plan.documents).epoch(0)))
        return prepare_batch(module, batch, size, most, fixed=compiled)

    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    split = world if cfg.zero_stage >= 1 else 1
    module.to(device)
    probe = StepProbe(module, make_batch, device, cfg.bf16, BYTES["optimizer"] * trainable / split)
    budget = budget_bytes(device)
    name = torch.cuda.get_device_name(device)
    if cfg.micro_batch_size != AUTO:
        check_micro_batch(int(cfg.micro_batch_size), probe, budget, f"{name} ({budget / 1e9:.0f} GB usable)")
        return None, {"checked": int(cfg.micro_batch_size)}
    rows = cfg.global_batch_size // world if cfg.global_batch_size else LARGEST
    key = {"model": module.hf.config.to_json_string(), "seq_len": shards.seq_len, "bf16": cfg.bf16, "gpu": name,
           "torch": torch.__version__, "attention": cfg.attention, "compiled": compiled, "zero": cfg.zero_stage,
           "world": split, "frozen": trainable}
    fit = fitted_micro_batch(probe, budget, min(rows, LARGEST), key)
    agreed = torch.tensor([fit.size], device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    size = int(agreed.item())
    micro, accum = (split_global_batch(cfg.global_batch_size, world, None, size) if cfg.global_batch_size
                    else (size, cfg.grad_accum))
    log.info("micro batch %d (the largest that fits %s: %d; peak %.1f of %.1f GB usable), %d accumulation step(s)",
             micro, name, size, (fit.peak_bytes or 0) / 1e9, budget / 1e9, accum)
    return ((micro, accum),
            {"fitted": size, "peak_gb": (fit.peak_bytes or 0) / 1e9, "usable_gb": budget / 1e9,
             "tried": [list(t) for t in fit.tried]})


def prepare_batch(module, batch: dict[str, torch.Tensor], rows: int, most_per_row: int, fixed: bool):
    """SparseMLM's masked positions, found on the CPU before the batch moves (no boolean mask on the GPU), padded
    to a fixed count when the head is compiled (one shape every step); other modules take the batch as it is."""
    if not isinstance(module, SparseMLM):
        return batch
    batch = sparse_targets(batch, size=masked_bound(rows, most_per_row) if fixed else None)
    return without_full_mask(batch)


def without_full_mask(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch less its attention mask when every position is a token (most packed batches), decided here on
    the CPU. Given a mask, HF's mask builder asks `mask.all()` to skip it (so SDPA can take its FlashAttention
    kernel): on a GPU a host sync every micro batch, which keeps the host from queueing the next step while
    the GPU runs. Without the mask the model does what it did with it (the same kernel, no sync)."""
    mask = batch.get("attention_mask")
    if mask is None or "doc_ids" in batch or not mask.numpy().all():  # the loader's CPU tensor
        return batch
    return {k: v for k, v in batch.items() if k != "attention_mask"}
