"""Pretraining under DeepSpeed ZeRO, on CPU processes talking over gloo: a BERT on MLM shards
(mlm, whole_word, span), a GPT-2 on causal shards, a T5 on t5_span shards (`training.model`).

Run with two CPU processes:

    DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 torchrun --nproc_per_node=2 -m training.pretrain \\
        --shards runs/demo/shards --tokenizer runs/demo/tokenizer --output runs/demo/pretrain \\
        --model demo --steps 600   # ~0.25 s/step at seq 128, micro batch 16: ~3 min with startup

or from Python, `training.launch.launch_pretrain(PretrainConfig(...), nproc=2)`; `--help` lists
every option. Writes, under --output: `checkpoints/` (DeepSpeed's files from every rank, lmforge's
JSON state and sha256 digests: `training.checkpoint`), `hf/` (model and tokenizer for
`AutoModelForMaskedLM` / `AutoTokenizer`), `metrics.jsonl` (streamed) and `tensorboard/`
(`training.telemetry`), `metrics.json`, and last `manifest.json` (rank 0). A rerun into the same
directory first deletes the old manifest, so a crashed rerun never looks finished.

The shell is thin: data, model, recipe (optimizer, schedule, held-out loss), checkpoints and export
live in `training.data`, `training.model`, `training.recipe`, `training.checkpoint` and
`training.export`; the DeepSpeed config in `training.ds_config`, resuming in `training.resume`, the
time budget in `training.budget`, the output folder and the final export in `training.pretrain_outputs`.
This file sets up the process group and the engine and runs the loop. The first run on a machine
spends ~45 s compiling DeepSpeed's CPU shared-memory comm op (cached in ~/.cache/torch_extensions).
"""
from __future__ import annotations

import argparse
import logging
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from common.config import add_config_args, config_from_args, config_to_dict, opt, require
from common.logs import setup as setup_logs
from schemas.manifest import MANIFEST_NAME
from schemas.objectives import OBJECTIVES
from training import cpu_dropout, processes
from training.budget import BudgetClock
from training.data import RankLoader, ShardSet
from training.distributed import init_worker
from training.ds_config import apply_deepspeed_file, deepspeed_config
from training.export import check_tokenizer, load_tokenizer, loss_summary
from training.feed import DeviceFeed
from training.model import SparseMLM, build_for_objective, load_for_objective, num_parameters, preset, sparse_targets
from training.pretrain_outputs import check_shared_output, hold_output, open_verified, write_outputs
from training.recipe import (
    OPTIMIZERS,
    SCHEDULES,
    build_optimizer,
    check_optimizer,
    heldout_loss,
    param_groups,
    schedule_fn,
)
from training.resume import plan_resume
from training.step_stats import StepStats, check_finite
from training.telemetry import Telemetry, peak_rss_mb

TRAINABLE = OBJECTIVES
"""Every registered objective: MLM shards train a BERT, causal a GPT-2, t5_span a T5 (training.model.build_for_objective
builds the model of the objective's kind; tests/unit/test_registries.py checks each kind has a builder)."""

log = logging.getLogger("lmforge.pretrain")


@dataclass
class PretrainConfig:
    shards: str = opt(help="Shards stage directory (manifest.json, train/ and valid/ Arrow streams).")
    tokenizer: str = opt(help="Tokenizer stage directory (tokenizer.json and its HF config).")
    output: str = opt(help="Stage directory to write: checkpoints/, hf/, metrics.json, manifest.json.")
    model: str = opt("demo", help="Model preset from training.model.PRESETS (tiny, demo, bert_base, and Turc et al.'s "
                                  "miniatures bert_tiny 2x128, bert_mini 4x256, bert_small 4x512, bert_medium 8x512).")
    prenorm: bool = opt(False, help="Pre-LN transformer (LayerNorm before each sublayer; transformers' "
                                    "RobertaPreLayerNormForMaskedLM) instead of BERT's post-LN, for MLM shards.")
    dropout: float = opt(-1.0, help="Dropout of the fresh model (-1: the preset's). Short pretraining runs see each "
                                    "row about once and do better without (Cramming).")
    init_from: str = opt("", help="Continue pretraining this Hugging Face model directory (domain-adaptive pretraining) "
                                  "instead of a fresh --model preset; its tokenizer must be the shards' (lmforge "
                                  "tokenizer --from the same directory), a mismatch is an error.")
    freeze_encoder: bool = opt(False, help="Train only the MLM head's transform and output bias, the encoder and the "
                                           "(tied) embeddings frozen: fits a head to an encoder that has none, e.g. a "
                                           "sentence-embedding model, to measure its masked-token loss as it is.")
    steps: int = opt(0, help="Optimizer steps to run; 0 means run `epochs` full epochs.")
    time_budget_minutes: float = opt(0.0, help="Train for this many minutes of the training loop instead of --steps/"
                                               "--epochs; warm-up and decay then follow elapsed time, as in Cramming "
                                               "(Geiping & Goldstein 2022). Not bit-reproducible: steps depend on speed.")
    epochs: int = opt(1, help="Full passes over the train split when steps is 0.")
    micro_batch_size: int = opt(16, help="Sequences per process per forward pass.")
    grad_accum: int = opt(1, help="Micro-batches accumulated per optimizer step.")
    lr: float = opt(1e-3, help="Peak learning rate (small BERTs tolerate 1e-3; BERT-base used 1e-4).")
    warmup_ratio: float = opt(0.06, help="Fraction of steps spent warming the LR up linearly (RoBERTa's 6%), then "
                                         "the --schedule's decay.")
    schedule: str = opt("linear", help="LR decay after the warm-up: linear (to 0, BERT/RoBERTa), cosine (to 0, GPT-3) "
                                       "or inverse_sqrt (sqrt(warmup/step), open-ended; Transformer, T5).")
    optimizer: str = opt("adamw", help="adamw (torch AdamW; DeepSpeed's FusedAdam on CUDA) or lamb (You et al. 2019 "
                                       "for large batches; pytorch-optimizer's Lamb, DeepSpeed's FusedLamb on CUDA).")
    weight_decay: float = opt(0.01, help="Weight decay on matrices; biases and LayerNorm get none.")
    max_position: int = opt(0, help="Learned positions of a fresh model (0: the preset's, 512 for BERTs, 1024 for "
                                    "GPT-2); at least the shards' row length, so the model accepts longer inputs "
                                    "than it was trained on.")
    seed: int = opt(1234, help="Seeds the model init, the per-epoch shuffles and dropout (offset by rank).")
    zero_stage: int = opt(2, help="DeepSpeed ZeRO stage: 0 (plain data parallel), 1 (optimizer state sharded), 2 "
                                  "(+ gradients) or 3 (+ parameters; the HF export gathers them).")
    deepspeed_config: str = opt("", help="A DeepSpeed JSON config merged over lmforge's defaults (infra/deepspeed/*.json); "
                                         "its micro batch, accumulation, ZeRO stage and bf16 replace the options'. "
                                         "The optimizer and scheduler stay lmforge's (--optimizer, --schedule).")
    bf16: bool = opt(False, help="Train in bfloat16 (fp32 weights kept by the optimizer and exported). On CUDA the "
                                 "launcher turns it on unless --fp16 or --fp32 is given; on CPU fp32 is the default.")
    fp32: bool = opt(False, help="Train in fp32 even on a GPU that has bf16 (TF32 matmuls stay on).")
    fp16: bool = opt(False, help="Train in float16 with DeepSpeed's dynamic loss scaling: for CUDA GPUs before compute "
                                 "capability 8.0, which have no bf16; refused on CPU.")
    dist_timeout_minutes: float = opt(30.0, help="How long a collective waits for the slowest process before the "
                                                 "run fails (DeepSpeed's default is 10): rank 0's checkpoint "
                                                 "conversion on --resume and the HF export happen inside it.")
    log_every: int = opt(10, help="Optimizer steps between progress lines and metrics.jsonl records; the step "
                                  "counters are summed over processes and read only then.")
    eval_every: int = opt(0, help="Also validate every N optimizer steps (0: only after training).")
    eval_batches: int = opt(10, help="Validation batches per process at each validation; 0 skips validation.")
    tensorboard: bool = opt(True, help="Also write a TensorBoard event log to output/tensorboard (if installed).")
    save_every: int = opt(0, help="Also save a checkpoint every N optimizer steps (0: only at the end), so a run "
                                  "that dies can continue with --resume.")
    resume: bool = opt(False, help="Continue from the newest checkpoint in output/checkpoints whose sha256 digests "
                                   "match (an older good one if the newest is damaged): weights, optimizer, LR "
                                   "schedule, loader position and each rank's RNG. On the same world size the "
                                   "finished run matches one that never stopped; on another, the checkpoint is "
                                   "converted to DeepSpeed's universal format and the data continue at the same "
                                   "sample. The training options must be the same (micro batch and accumulation "
                                   "may change if the global batch stays).")

    def __post_init__(self) -> None:
        preset(self.model)  # raises on an unknown name
        require(self.steps >= 0, f"steps must be >= 0, got {self.steps}")
        require(self.steps > 0 or self.epochs >= 1, f"epochs must be >= 1 when steps is 0, got {self.epochs}")
        require(self.dropout == -1.0 or 0 <= self.dropout < 1, f"dropout must be in [0, 1) or -1, got {self.dropout}")
        require(self.time_budget_minutes >= 0, f"time_budget_minutes must be >= 0, got {self.time_budget_minutes}")
        require(not (self.time_budget_minutes and self.steps), "give --steps or --time-budget-minutes, not both")
        require(self.micro_batch_size >= 1, f"micro_batch_size must be >= 1, got {self.micro_batch_size}")
        require(self.grad_accum >= 1, f"grad_accum must be >= 1, got {self.grad_accum}")
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(0 <= self.warmup_ratio < 1, f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        require(self.schedule in SCHEDULES, f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        require(self.optimizer in OPTIMIZERS, f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        require(self.max_position >= 0, f"max_position must be >= 0, got {self.max_position}")
        if self.deepspeed_config:
            apply_deepspeed_file(self)
        require(self.zero_stage in (0, 1, 2, 3), f"zero_stage must be 0, 1, 2 or 3, got {self.zero_stage}")
        require(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")
        require(self.eval_every >= 0, f"eval_every must be >= 0, got {self.eval_every}")
        require(self.bf16 + self.fp16 + self.fp32 <= 1, "give one of --bf16, --fp16 and --fp32")
        require(self.eval_batches >= 0, f"eval_batches must be >= 0, got {self.eval_batches}")
        require(self.save_every >= 0, f"save_every must be >= 0, got {self.save_every}")
        require(self.dist_timeout_minutes > 0, f"dist_timeout_minutes must be > 0, got {self.dist_timeout_minutes}")
        check_optimizer(self.optimizer, self.zero_stage, self.bf16 or self.fp16)


def plan_steps(cfg: PretrainConfig, batches_per_epoch: int) -> int:
    """Optimizer steps to run. E.g. 2,000 rows, 2 ranks, micro batch 16: 1,000 // 16 = 62 batches
    per epoch per rank; with grad_accum 2, one epoch is 62 // 2 = 31 steps. Under a time budget
    there is no step count: the loop ends when the budget is spent (`BudgetClock`)."""
    per_epoch = batches_per_epoch // cfg.grad_accum
    if cfg.time_budget_minutes:
        return 1 << 62
    if cfg.steps:
        return cfg.steps
    require(per_epoch >= 1, f"{batches_per_epoch} batches per epoch < grad_accum {cfg.grad_accum}: no full step")
    return cfg.epochs * per_epoch


def model_config(cfg: PretrainConfig):
    """The preset's sizes with this run's architecture and dropout choices."""
    import dataclasses

    m = dataclasses.replace(preset(cfg.model), prenorm=cfg.prenorm)
    if cfg.max_position:
        m = dataclasses.replace(m, max_position=cfg.max_position)
    return m if cfg.dropout == -1.0 else dataclasses.replace(m, dropout=cfg.dropout)


def freeze_all_but_head(model) -> int:
    """requires_grad=False on every parameter but the MLM head's own (BERT's cls.predictions.transform
    and bias; the decoder matrix is the tied word embedding and stays frozen). Returns the count frozen."""
    head = [n for n, _ in model.named_parameters() if n.startswith("cls.predictions.")]
    if not head:
        raise ValueError(f"--freeze-encoder: {type(model).__name__} has no BERT MLM head (cls.predictions.*)")
    frozen = 0
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith("cls.predictions.")
        frozen += 0 if p.requires_grad else p.numel()
    return frozen


def check_same_tokenizer(tokenizer, model_dir: str) -> None:
    """--init-from: the model's own tokenizer (when its directory has one) must be the shards' one."""
    from transformers import AutoTokenizer

    try:
        theirs = AutoTokenizer.from_pretrained(model_dir).get_vocab()
    except (OSError, ValueError):  # no tokenizer files: only the vocabulary size is checked
        log.warning("--init-from %s has no tokenizer; only its vocabulary size is checked", model_dir)
        return
    ours = tokenizer.get_vocab()
    if theirs != ours:
        diff = sorted(set(theirs.items()) ^ set(ours.items()), key=lambda kv: kv[1])[:3]
        raise ValueError(f"--init-from {model_dir}: its tokenizer differs from the shards' ({len(theirs)} vs "
                         f"{len(ours)} entries; first differences {diff}); adopt it with `lmforge tokenizer --from "
                         f"{model_dir}` and rebuild the shards")


def run(cfg: PretrainConfig) -> Path:
    """setup -> fit -> validate -> save, on every rank; returns the output directory."""
    import deepspeed
    from deepspeed.utils import logger as ds_logger
    from transformers.utils import logging as hf_logging

    from training import checkpoint

    t0 = time.time()
    ds_logger.setLevel(logging.WARNING)
    hf_logging.disable_progress_bar()  # no tqdm bars in a multi-process log
    # DeepSpeed's ZeRO-2 calls the deprecated all_gather_into_tensor; the warning is not ours to fix.
    warnings.filterwarnings("ignore", message=".*all_gather_into_tensor.*", category=FutureWarning)
    # the GPU bound first, then gloo on CPU or NCCL beside gloo on CUDA, with the run's timeout (training.distributed)
    device = init_worker(cfg.dist_timeout_minutes, deepspeed=True)
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(cfg.output)
    held = hold_output(out, rank)  # one run per output folder, or two runs would interleave checkpoints
    if rank == 0:
        (out / MANIFEST_NAME).unlink(missing_ok=True)
    ckpt_dir = out / "checkpoints"
    check_shared_output(out, rank, device)
    resumed = plan_resume(cfg, ckpt_dir, rank, world) if cfg.resume else None

    # --- setup: data, model, engine -----------------------------------------------------------
    shards = open_verified(cfg.shards, rank, world)
    shards.require_objective(TRAINABLE, "pretrain")
    tokenizer = load_tokenizer(cfg.tokenizer, max_length=shards.seq_len)
    check_tokenizer(tokenizer, shards.vocab_size, shards.pad_id, shards.mask_id, f"{cfg.shards}/manifest.json")
    loader = RankLoader(shards.read("train"), rank, world, cfg.micro_batch_size, cfg.seed, shards.num_variants)
    total = plan_steps(cfg, loader.batches_per_epoch)
    ds_config = deepspeed_config(cfg, load_universal=bool(resumed and resumed["universal"]))

    torch.manual_seed(cfg.seed)  # same init everywhere; DeepSpeed also broadcasts rank 0's weights
    module = build_module(cfg, shards, tokenizer, ds_config)
    model = module.hf
    # torch draws CPU dropout masks one element at a time: 13-17% of a step here (training.cpu_dropout)
    fast_dropout = cpu_dropout.install(module) if device.type == "cpu" else 0
    if cfg.freeze_encoder:
        frozen = freeze_all_but_head(model)
        log.info("freeze_encoder: %s of %s parameters frozen", f"{frozen:,}", f"{num_parameters(model):,}")
    torch.manual_seed(cfg.seed + rank)  # different dropout masks per rank
    optimizer = build_optimizer(cfg.optimizer, param_groups(model, cfg.weight_decay), cfg.lr, device.type)
    warmup = int(cfg.warmup_ratio * total)
    clock = BudgetClock(cfg.time_budget_minutes * 60, cfg.warmup_ratio, cfg.schedule) if cfg.time_budget_minutes else None
    factor = clock.factor if clock else schedule_fn(cfg.schedule, warmup, total)
    engine, _, _, _ = deepspeed.initialize(
        model=module, optimizer=optimizer, config=ds_config,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, factor),
    )
    global_batch = cfg.micro_batch_size * cfg.grad_accum * world
    tokens_per_step = global_batch * shards.seq_len
    log.info("%s: %s parameters | %s x %d seq x %d tok = %s tokens/step (incl. padding) | "
             "%d steps/epoch | ZeRO-%d on %d procs (%s) | %s, %s schedule | attention %s%s", cfg.init_from or cfg.model,
             f"{num_parameters(model):,}", f"{cfg.time_budget_minutes:g} min" if clock else f"{total} steps",
             global_batch, shards.seq_len, f"{tokens_per_step:,}", loader.batches_per_epoch // cfg.grad_accum,
             cfg.zero_stage, world, device, type(optimizer).__name__, cfg.schedule,
             getattr(model.config, "_attn_implementation", "?"),
             f" | dropout masks from SFC64 in {fast_dropout} modules" if fast_dropout else "")

    # --- fit ----------------------------------------------------------------------------------
    stats = StepStats(engine.device)  # counters on the device, read at log steps (training.step_stats)
    step = 0
    if resumed:
        state = resumed["state"]
        path, _ = engine.load_checkpoint(str(ckpt_dir), tag=resumed["load_tag"])
        if path is None:
            raise SystemExit(f"pretrain --resume: DeepSpeed could not load {ckpt_dir / resumed['load_tag']}")
        loader.load_state_dict(state["loader"])
        step = int(state["step"])
        stats.load(state["seen"], state["curve"])
        if not checkpoint.restore_rng(ckpt_dir / resumed["load_tag"], rank, cfg.seed + rank + 7919 * step):
            log.warning("rank %d: %s has no RNG state for this rank (saved on %d processes); dropout reseeded",
                        rank, resumed["tag"], state["world_size"])
        log.info("resumed from %s at step %d (epoch %d, sample %d)%s", ckpt_dir / resumed["load_tag"], step,
                 *loader.position, f", {state['world_size']} -> {world} processes" if resumed["universal"] else "")
        if clock:
            clock.resume_at(float(state.get("budget_elapsed", 0.0)))
    micro = step * cfg.grad_accum  # this process's micro-batches (checkpoints fall on step boundaries)
    telemetry = Telemetry(out, rank == 0, cfg.tensorboard, resume_step=step if resumed else None)
    epoch, start = loader.position  # (0, 0) for a fresh run
    resumed_at = step
    t_fit = t_log = time.time()
    last_valid: dict[str, float | None] = {}
    engine.train()
    while step < total:
        for position, batch in feed(engine, loader, epoch, start):
            loader.position = position
            loss = engine(**batch)
            engine.backward(loss)
            lr = engine.get_lr()[0]  # the rate this step uses; the scheduler moves it in step()
            boundary = engine.is_gradient_accumulation_boundary()
            norm = grad_norm(engine) if boundary and cfg.zero_stage == 0 else None
            engine.step()
            stats.add_micro(loss, batch, engine.module.last_counted, engine.module.last_correct)
            micro += 1
            if micro % cfg.grad_accum:
                continue
            step += 1
            stats.end_step(step, lr, norm if norm is not None else engine.get_global_grad_norm())
            if clock and clock.tick(engine.device):  # a budgeted run agrees on the clock every step, by design
                total = step
            if step % cfg.log_every == 0 or step == total:
                steps = cfg.log_every if step % cfg.log_every == 0 else step % cfg.log_every
                window, norms = stats.take_window()  # the one all-reduce and host read of the window
                check_finite(step - steps + 1, step, window, norms)
                dt = time.time() - t_log
                t_log = time.time()
                rss = torch.tensor([peak_rss_mb()], dtype=torch.float64, device=engine.device)
                dist.all_reduce(rss, op=dist.ReduceOp.MAX)
                record = {"epoch": epoch, "variant": loader.variant(epoch),
                          "loss": window["loss_sum"] / window["micro_batches"],
                          "mlm_accuracy": window["correct"] / max(window["labelled"], 1), "lr": lr,
                          "grad_norm": sum(norms) / len(norms) if norms else None,
                          "tokens_per_s": window["tokens"] / dt, "samples_per_s": window["sequences"] / dt,
                          "seconds_per_step": dt / steps, "peak_rss_mb": rss.item(), "elapsed_s": time.time() - t0}
                telemetry.write("train", step, **record)
                log.info("step %d/%s | epoch %d (variant %d) | loss %.4f | acc %.3f | lr %.2e | %.2f s/step | "
                         "%s tok/s", step, f"{clock.progress:.0%} of {cfg.time_budget_minutes:g} min" if clock else total,
                         epoch, record["variant"], record["loss"], record["mlm_accuracy"], lr,
                         record["seconds_per_step"], f"{record['tokens_per_s']:,.0f}")
            if cfg.eval_every and cfg.eval_batches and step % cfg.eval_every == 0 and step < total:
                last_valid = validate(engine, shards, rank, world, cfg, step, telemetry, t0)
            if step >= total:
                break
            if cfg.save_every and step % cfg.save_every == 0:
                save_state(engine, ckpt_dir, cfg, rank, world, step, loader, stats, clock)
        else:
            epoch, start = epoch + 1, 0
    fit_seconds = time.time() - t_fit

    # --- validate -----------------------------------------------------------------------------
    if cfg.eval_batches:
        last_valid = validate(engine, shards, rank, world, cfg, step, telemetry, t0)
    valid_loss = last_valid.get("loss")

    # --- save ---------------------------------------------------------------------------------
    save_state(engine, ckpt_dir, cfg, rank, world, step, loader, stats, clock)
    telemetry.close()
    seen = stats.seen
    counts = {
        "steps": step,
        "epochs_started": epoch + 1,  # the loop breaks inside the epoch that reaches `total`
        "micro_batches_per_rank": micro,
        "sequences": int(seen["sequences"]),
        "tokens": int(seen["tokens"]),
        "masked_tokens": int(seen["labelled"]),
        **loader.counts,
    }
    curve = stats.curve
    metrics = {
        "loss_curve": curve, **loss_summary(curve), "valid_loss": valid_loss,
        "valid_accuracy": last_valid.get("mlm_accuracy"), "train_accuracy": seen["correct"] / max(seen["labelled"], 1),
        "tokens_seen": counts["tokens"], "sequences_seen": counts["sequences"], "steps": step,
        "world_size": world, "global_batch": global_batch, "seq_len": shards.seq_len,
        "torch_threads": torch.get_num_threads(), "device": device.type,
        "precision": "bf16" if cfg.bf16 else "fp16" if cfg.fp16 else "fp32",
        "attention": getattr(model.config, "_attn_implementation", None),
        "dropout_masks": "sfc64" if fast_dropout else "torch",
        "model": cfg.init_from or cfg.model, "num_parameters": num_parameters(model),
        "time_budget_minutes": cfg.time_budget_minutes or None,
        "fit_seconds": fit_seconds, "seconds_per_step": fit_seconds / max(step - resumed_at, 1),
        "resumed_from_step": resumed_at if cfg.resume else None,
        "resumed_from_world_size": resumed["state"]["world_size"] if resumed else None,
        "wall_seconds": time.time() - t0,
    }
    write_outputs(cfg, engine, tokenizer, metrics, counts, t0, step, rank, ds_config)
    dist.barrier()
    held.close()
    return out


def feed(engine, loader: RankLoader, epoch: int, start: int = 0) -> DeviceFeed:
    """The loader's (position, batch) pairs on the engine's device (training.feed); for SparseMLM each batch gets
    its masked positions on the CPU, before it moves, so the head needs no boolean mask on the GPU."""
    prepare = sparse_targets if isinstance(engine.module, SparseMLM) else None
    return DeviceFeed(loader.batches(epoch, start), engine.device, prepare)


def build_module(cfg: PretrainConfig, shards: ShardSet, tokenizer, ds_config: dict[str, Any]) -> torch.nn.Module:
    """The training module; under ZeRO-3 its parameters are partitioned as they are created: transformers'
    HfDeepSpeedConfig, made before the model and kept alive on the module, makes `from_pretrained` (--init-from)
    and `_from_config` (a fresh model, training.model.instantiate) build it inside deepspeed.zero.Init."""
    hf_ds = None
    if cfg.zero_stage == 3:
        from transformers.integrations import HfDeepSpeedConfig

        hf_ds = HfDeepSpeedConfig(ds_config)  # must exist before the model is built
    if cfg.init_from:
        check_same_tokenizer(tokenizer, cfg.init_from)
        module = load_for_objective(shards.objective, cfg.init_from, shards.vocab_size, shards.pad_id,
                                    shards.seq_len)
        log.info("init from %s: %s", cfg.init_from, module.loading_info or "every weight loaded")
    else:
        module = build_for_objective(shards.objective, model_config(cfg), shards.vocab_size, shards.pad_id,
                                     shards.eos_id, shards.seq_len)
    module._hf_deepspeed_config = hf_ds
    return module


def grad_norm(engine) -> torch.Tensor | float:
    """The global gradient 2-norm before clipping, for ZeRO-0 (DeepSpeed reports it itself for stages 1-3); a
    tensor on the device, read at the next log step."""
    grads = [p.grad for p in engine.module.parameters() if p.grad is not None]
    return torch.nn.utils.get_total_norm(grads) if grads else 0.0


def save_state(engine, ckpt_dir: Path, cfg: PretrainConfig, rank: int, world: int, step: int, loader: RankLoader,
               stats: StepStats, clock: BudgetClock | None) -> None:
    """A checkpoint (training.checkpoint) that --resume continues from exactly: DeepSpeed's weights, ZeRO
    optimizer partitions and LR scheduler, each rank's RNG, and lmforge's JSON state (loader position in
    samples, loss curve and counts, options, world size)."""
    from training import checkpoint

    state = {"step": step, "epoch": loader.position[0], "world_size": world, "config": config_to_dict(cfg),
             "loader": loader.state_dict(), **stats.state(), "budget_elapsed": clock.elapsed if clock else 0.0}
    checkpoint.save(engine, ckpt_dir, step, state, rank)


def validate(engine, shards: ShardSet, rank: int, world: int, cfg: PretrainConfig, step: int, telemetry: Telemetry,
             t0: float) -> dict[str, float | None]:
    result = evaluate(engine, shards, rank, world, cfg)
    if result["loss"] is not None:
        log.info("step %d: valid loss %.4f (perplexity %.1f) | acc %.3f", step, result["loss"],
                 torch.tensor(result["loss"]).exp().item(), result["mlm_accuracy"])
        telemetry.write("valid", step, **result, elapsed_s=time.time() - t0)
    return result


def evaluate(engine, shards: ShardSet, rank: int, world: int, cfg: PretrainConfig) -> dict[str, float | None]:
    """Mean loss per labelled token and top-1 accuracy over up to eval_batches batches per rank (variant 0):
    masked tokens for MLM, target tokens for T5, real tokens for causal (each batch's loss weighted by its
    labels; GPT-2 averages over one position fewer per row, as it shifts the labels)."""
    table = shards.read("valid") if shards.splits.get("valid") else None
    batch_size = min(cfg.micro_batch_size, table.num_rows // world) if table is not None else 0
    if batch_size < 1:
        log.warning("validation skipped: the valid split has fewer rows than processes")
        return {"loss": None, "mlm_accuracy": None}
    loader = RankLoader(table, rank, world, batch_size, cfg.seed, shards.num_variants)

    def step(item):  # device tensors: the sums are read once, after the all-reduce
        _, batch = item
        return engine(**batch), engine.module.last_counted, engine.module.last_correct

    engine.eval()
    held = heldout_loss(step, feed(engine, loader, 0), cfg.eval_batches, engine.device)  # training.recipe: the stages' one held-out loss
    engine.train()
    dist.all_reduce(held.sums)
    return {"loss": held.loss, "mlm_accuracy": held.accuracy}


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m training.pretrain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, PretrainConfig)
    # the DeepSpeed launcher (`deepspeed --hostfile ...`) passes --local_rank=N besides setting LOCAL_RANK
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if "LOCAL_RANK" in os.environ or ns.local_rank is not None:  # a launched worker: die with the agent
        processes.die_with_parent()
    local_rank = vars(ns).pop("local_rank")
    if local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(local_rank))
    cfg = config_from_args(PretrainConfig, ns)
    rank = int(os.environ.get("RANK", "0"))
    setup_logs(logging.INFO if rank == 0 else logging.WARNING, f"%(asctime)s [rank{rank}] %(name)s: %(message)s")
    out = run(cfg)
    if dist.is_initialized():  # NCCL warns of leaked communicators at exit otherwise (seen on an H100)
        dist.destroy_process_group()
    return out


if __name__ == "__main__":
    main()
