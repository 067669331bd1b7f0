"""Pretraining under DeepSpeed ZeRO, on CPU processes talking over gloo: a BERT on MLM shards
(mlm, whole_word, span), a GPT-2 on causal shards, a T5 on t5_span shards (`training.model`).

Run with two CPU processes:

    DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 torchrun --nproc_per_node=2 -m training.pretrain \\
        --shards runs/demo/shards --tokenizer runs/demo/tokenizer --output runs/demo/pretrain \\
        --model demo --steps 600   # ~0.25 s/step at seq 128, micro batch 16: ~3 min with startup

or from Python, `training.launch.launch_pretrain(PretrainConfig(...), nproc=2)`; `--help` lists
every option. Writes, under --output: `checkpoints/` (DeepSpeed, every rank), `hf/` (model and
tokenizer for `AutoModelForMaskedLM` / `AutoTokenizer`), `tensorboard/`, `metrics.json`, and
last `manifest.json` (rank 0). A rerun into the same directory first deletes the old manifest,
so a crashed rerun never looks finished.

The shell is thin: data, model and export live in `training.data`, `training.model` and
`training.export`; this file only sets up the process group and the engine, runs the loop,
and writes the outputs. The first run on a machine spends ~45 s compiling DeepSpeed's CPU
shared-memory comm op (cached in ~/.cache/torch_extensions afterwards).
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lmforge.config import add_config_args, config_from_args, config_to_dict, opt, require
from lmforge.logs import setup as setup_logs
from schemas.manifest import MANIFEST_NAME, Manifest, atomic_write_json, describe_outputs, input_ref, write_manifest
from schemas.shards import MLM_OBJECTIVES
from training.accelerator import dist_backend
from training.data import RankLoader, ShardSet
from training.export import HF_DIR, METRICS_NAME, check_tokenizer, load_tokenizer, loss_summary, save_hf
from training.model import build_for_objective, load_for_objective, num_parameters, param_groups, preset

TRAINABLE = (*MLM_OBJECTIVES, "causal", "t5_span")
"""MLM shards train a BERT, causal a GPT-2, t5_span a T5 (training.model.build_for_objective)."""

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
    lr: float = opt(1e-3, help="Peak AdamW learning rate (small BERTs tolerate 1e-3; BERT-base used 1e-4).")
    warmup_ratio: float = opt(0.06, help="Fraction of steps spent warming the LR up linearly (RoBERTa's 6%), then linear decay to 0.")
    weight_decay: float = opt(0.01, help="AdamW weight decay on matrices; biases and LayerNorm get none.")
    seed: int = opt(1234, help="Seeds the model init, the per-epoch shuffles and dropout (offset by rank).")
    zero_stage: int = opt(2, help="DeepSpeed ZeRO stage 0-2 (3 would shard parameters and complicate the HF export).")
    bf16: bool = opt(False, help="Train in bfloat16 (fp32 is the safe default on CPU).")
    log_every: int = opt(10, help="Optimizer steps between progress lines.")
    eval_batches: int = opt(10, help="Validation batches per process after training; 0 skips validation.")
    tensorboard: bool = opt(True, help="Also write a TensorBoard event log to output/tensorboard (if installed).")
    save_every: int = opt(0, help="Also save a checkpoint every N optimizer steps (0: only at the end), so a run "
                                  "that dies can continue with --resume.")
    resume: bool = opt(False, help="Continue from the newest checkpoint in output/checkpoints: weights, optimizer, "
                                   "LR schedule, loader position and each rank's RNG. The finished run then matches "
                                   "one that never stopped. The training options and world size must be the same.")

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
        require(self.zero_stage in (0, 1, 2), f"zero_stage must be 0, 1 or 2, got {self.zero_stage}")
        require(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")
        require(self.eval_batches >= 0, f"eval_batches must be >= 0, got {self.eval_batches}")
        require(self.save_every >= 0, f"save_every must be >= 0, got {self.save_every}")


# Options that may change between a run and its --resume (a moved output directory included):
# they do not touch the weights.
RESUME_FREE = frozenset({"output", "resume", "save_every", "log_every", "eval_batches", "tensorboard"})


def resume_mismatch(saved: dict[str, Any], now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Options whose change would make a resumed run differ from an uninterrupted one: (saved, now)."""
    return {k: (saved.get(k), v) for k, v in now.items() if k not in RESUME_FREE and saved.get(k) != v}


def deepspeed_config(cfg: PretrainConfig) -> dict[str, Any]:
    """The engine's config; the global batch is micro_batch_size * grad_accum * world size."""
    return {
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": cfg.zero_stage},
        # torch AdamW as the client optimizer: DeepSpeed's CPU Adam would JIT-compile C++ for ~2 min.
        "zero_allow_untested_optimizer": True,
        "bf16": {"enabled": cfg.bf16},
        "steps_per_print": 1 << 30,  # we log ourselves
    }


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
    return m if cfg.dropout == -1.0 else dataclasses.replace(m, dropout=cfg.dropout)


class BudgetClock:
    """Progress through a wall-clock budget, the same number on every rank (the slowest rank's clock,
    all-reduced each step), so all ranks see one learning rate and stop at the same step.

    The schedule is linear warm-up over `warmup_ratio` of the budget, then linear decay to 0 at its
    end: `factor(p) = p / w` for p < w, else `(1 - p) / (1 - w)`."""

    def __init__(self, budget_seconds: float, warmup_ratio: float):
        self.budget, self.warmup = budget_seconds, warmup_ratio
        self.resume_at(0.0)

    def resume_at(self, elapsed: float) -> None:
        """Continue a run that had spent `elapsed` seconds of its budget."""
        self.elapsed = elapsed
        self._t = time.time() - elapsed

    @property
    def progress(self) -> float:
        return min(1.0, self.elapsed / self.budget)

    def factor(self, _step: int = 0) -> float:
        p, w = self.progress, self.warmup
        return p / w if p < w else max(0.0, (1 - p) / (1 - w))

    def tick(self) -> bool:
        """Agree on the elapsed time (max over ranks); True once the budget is spent."""
        import torch.distributed as dist

        t = torch.tensor([time.time() - self._t], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        self.elapsed = t.item()
        return self.elapsed >= self.budget


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
    import torch.distributed as dist
    from deepspeed.utils import logger as ds_logger
    from transformers import get_linear_schedule_with_warmup
    from transformers.utils import logging as hf_logging

    t0 = time.time()
    ds_logger.setLevel(logging.WARNING)
    hf_logging.disable_progress_bar()  # no tqdm bars in a multi-process log
    # DeepSpeed's ZeRO-2 calls the deprecated all_gather_into_tensor; the warning is not ours to fix.
    warnings.filterwarnings("ignore", message=".*all_gather_into_tensor.*", category=FutureWarning)
    with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed prints "... built successfully": chatter, not progress
        deepspeed.init_distributed(dist_backend=dist_backend())  # gloo on CPU, nccl on CUDA (training/accelerator.py)
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(cfg.output)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST_NAME).unlink(missing_ok=True)
    ckpt_dir = out / "checkpoints"
    if cfg.resume and not (ckpt_dir / "latest").exists():
        raise SystemExit(f"pretrain --resume: no checkpoint to resume in {ckpt_dir} (no 'latest' file); "
                         "run without --resume to start from scratch")

    # --- setup: data, model, engine -----------------------------------------------------------
    shards = ShardSet.open(cfg.shards)
    shards.require_objective(TRAINABLE, "pretrain")
    tokenizer = load_tokenizer(cfg.tokenizer, max_length=shards.seq_len)
    check_tokenizer(tokenizer, shards.vocab_size, shards.pad_id, shards.mask_id, f"{cfg.shards}/manifest.json")
    loader = RankLoader(shards.read("train"), rank, world, cfg.micro_batch_size, cfg.seed, shards.num_variants)
    total = plan_steps(cfg, loader.batches_per_epoch)

    torch.manual_seed(cfg.seed)  # same init everywhere; DeepSpeed also broadcasts rank 0's weights
    if cfg.init_from:
        check_same_tokenizer(tokenizer, cfg.init_from)
        module = load_for_objective(shards.objective, cfg.init_from, shards.vocab_size, shards.pad_id, shards.seq_len)
        log.info("init from %s: %s", cfg.init_from, module.loading_info or "every weight loaded")
    else:
        module = build_for_objective(shards.objective, model_config(cfg), shards.vocab_size, shards.pad_id,
                                     shards.eos_id, shards.seq_len)
    model = module.hf
    if cfg.freeze_encoder:
        frozen = freeze_all_but_head(model)
        log.info("freeze_encoder: %s of %s parameters frozen", f"{frozen:,}", f"{num_parameters(model):,}")
    torch.manual_seed(cfg.seed + rank)  # different dropout masks per rank
    optimizer = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-6)
    warmup = int(cfg.warmup_ratio * total)
    clock = BudgetClock(cfg.time_budget_minutes * 60, cfg.warmup_ratio) if cfg.time_budget_minutes else None
    engine, _, _, _ = deepspeed.initialize(
        model=module, optimizer=optimizer, config=deepspeed_config(cfg),
        lr_scheduler=(lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, clock.factor)) if clock
        else (lambda opt: get_linear_schedule_with_warmup(opt, warmup, total)),
    )
    tokens_per_step = cfg.micro_batch_size * cfg.grad_accum * world * shards.seq_len
    log.info("%s: %s parameters | %s x %d seq x %d tok = %s tokens/step (incl. padding) | "
             "%d batches/epoch/rank | ZeRO-%d on %d procs", cfg.init_from or cfg.model, f"{num_parameters(model):,}",
             f"{cfg.time_budget_minutes:g} min" if clock else f"{total} steps",
             cfg.micro_batch_size * cfg.grad_accum * world, shards.seq_len, f"{tokens_per_step:,}",
             loader.batches_per_epoch, cfg.zero_stage, world)
    writer = _tensorboard(out / "tensorboard") if cfg.tensorboard and rank == 0 else None

    # --- fit ----------------------------------------------------------------------------------
    curve: list[dict[str, Any]] = []
    acc = torch.zeros(4, dtype=torch.float64)  # this step: loss sum, micro-batches, tokens, masked
    seen = torch.zeros(4, dtype=torch.float64)  # whole run, all ranks
    step, micro = 0, 0
    if cfg.resume:
        step, micro, curve, seen, elapsed = resume(engine, loader, ckpt_dir, cfg, rank, world)
        log.info("resumed from %s at step %d (epoch %d, batch %d)", ckpt_dir, step, *loader.position)
        if clock:
            clock.resume_at(elapsed)
    epoch, start = loader.position  # (0, 0) for a fresh run
    resumed_at = step
    t_fit = t_log = time.time()
    engine.train()
    while step < total:
        for batch in loader.epoch(epoch, start=start):
            batch = {k: v.to(engine.device) for k, v in batch.items()}
            loss = engine(**batch)
            engine.backward(loss)
            lr = engine.get_lr()[0]  # the rate this step uses; the scheduler moves it in step()
            engine.step()
            acc += torch.tensor([loss.item(), 1, batch["attention_mask"].sum().item(),
                                 (batch["labels"] != -100).sum().item()], dtype=torch.float64)
            micro += 1
            if micro % cfg.grad_accum:
                continue
            step += 1
            spent = clock.tick() if clock else False
            dist.all_reduce(acc)  # sum over ranks: the curve is the mean loss of the global batch
            seen += acc
            curve.append({"step": step, "loss": acc[0].item() / acc[1].item(), "lr": lr})
            acc.zero_()
            if writer is not None:
                writer.add_scalar("train/loss", curve[-1]["loss"], step)
                writer.add_scalar("train/lr", curve[-1]["lr"], step)
            if spent:
                total = step
            if step % cfg.log_every == 0 or step == total:
                window = curve[-(cfg.log_every if step % cfg.log_every == 0 else step % cfg.log_every):]
                dt = time.time() - t_log
                t_log = time.time()
                log.info("step %d/%s | epoch %d (variant %d) | loss %.4f | lr %.2e | %.2f s/step | %s tok/s",
                         step, f"{clock.progress:.0%} of {cfg.time_budget_minutes:g} min" if clock else total, epoch,
                         loader.variant(epoch), sum(p["loss"] for p in window) / len(window),
                         curve[-1]["lr"], dt / len(window), f"{tokens_per_step * len(window) / dt:,.0f}")
            if step >= total:
                break
            if cfg.save_every and step % cfg.save_every == 0:
                save_checkpoint(engine, ckpt_dir, cfg, rank, world, step, micro, loader, curve, seen,
                                clock.elapsed if clock else 0.0)
        else:
            epoch, start = epoch + 1, 0
    fit_seconds = time.time() - t_fit

    # --- validate -----------------------------------------------------------------------------
    valid_loss = evaluate(engine, shards, rank, world, cfg) if cfg.eval_batches else None
    if valid_loss is not None:
        log.info("valid loss %.4f (perplexity %.1f)", valid_loss, torch.tensor(valid_loss).exp().item())
        if writer is not None:
            writer.add_scalar("valid/loss", valid_loss, step)

    # --- save ---------------------------------------------------------------------------------
    save_checkpoint(engine, ckpt_dir, cfg, rank, world, step, micro, loader, curve, seen,
                    clock.elapsed if clock else 0.0)
    if rank == 0:
        if writer is not None:
            writer.close()
        counts = {
            "steps": step,
            "epochs_started": epoch + 1,  # the loop breaks inside the epoch that reaches `total`
            "micro_batches_per_rank": micro,
            "sequences": micro * cfg.micro_batch_size * world,
            "tokens": int(seen[2].item()),
            "masked_tokens": int(seen[3].item()),
            **{k: v for k, v in loader.counts.items() if k != "rows_per_rank"},
        }
        metrics = {
            "loss_curve": curve, **loss_summary(curve), "valid_loss": valid_loss,
            "tokens_seen": counts["tokens"], "sequences_seen": counts["sequences"], "steps": step,
            "world_size": world, "global_batch": cfg.micro_batch_size * cfg.grad_accum * world,
            "seq_len": shards.seq_len, "model": cfg.init_from or cfg.model, "num_parameters": num_parameters(model),
            "time_budget_minutes": cfg.time_budget_minutes or None,
            "fit_seconds": fit_seconds, "seconds_per_step": fit_seconds / max(step - resumed_at, 1),
            "resumed_from_step": resumed_at if cfg.resume else None,
            "wall_seconds": time.time() - t0,
        }
        write_outputs(cfg, engine.module.hf, tokenizer, metrics, counts, t0, step)
    dist.barrier()
    return out


def save_checkpoint(engine, ckpt_dir: Path, cfg: PretrainConfig, rank: int, world: int, step: int, micro: int,
                    loader: RankLoader, curve: list[dict[str, Any]], seen: torch.Tensor, elapsed: float = 0.0) -> None:
    """A DeepSpeed checkpoint tagged global_step<step> that --resume continues from exactly.

    DeepSpeed saves weights, ZeRO optimizer partitions and the LR scheduler, plus rank 0's
    client state: the loader position (the same on every rank), the loss curve and token counts
    so far. Dropout draws from each rank's own torch RNG, so every rank writes its RNG state
    into the tag directory first; DeepSpeed writes `latest` last, so a crash mid-save leaves
    `latest` on the previous, complete checkpoint."""
    tag = f"global_step{step}"
    (ckpt_dir / tag).mkdir(parents=True, exist_ok=True)
    torch.save({"torch": torch.get_rng_state()}, ckpt_dir / tag / f"rng_rank{rank}.pt")
    client_state = {"step": step, "micro": micro, "epoch": loader.position[0], "world_size": world,
                    "config": config_to_dict(cfg), "loader": loader.state_dict(), "curve": curve, "seen": seen.tolist(),
                    "budget_elapsed": elapsed}
    engine.save_checkpoint(str(ckpt_dir), tag=tag, client_state=client_state)


def resume(engine, loader: RankLoader, ckpt_dir: Path, cfg: PretrainConfig, rank: int,
           world: int) -> tuple[int, int, list[dict[str, Any]], torch.Tensor, float]:
    """Load the newest checkpoint into `engine` and `loader`; returns (step, micro, curve, seen,
    seconds of the time budget already spent)."""
    tag = (ckpt_dir / "latest").read_text().strip()
    path, client = engine.load_checkpoint(str(ckpt_dir), tag=tag)
    if path is None:
        raise SystemExit(f"pretrain --resume: DeepSpeed could not load a checkpoint from {ckpt_dir}")
    missing = [k for k in ("step", "micro", "world_size", "config", "loader", "curve", "seen") if k not in client]
    if missing:
        raise SystemExit(f"pretrain --resume: {ckpt_dir / tag} lacks {', '.join(missing)} in its client state "
                         "(written by an older lmforge, without --save-every); it cannot be resumed exactly")
    diff = resume_mismatch(client["config"], config_to_dict(cfg))
    if client["world_size"] != world:
        diff["world_size"] = (client["world_size"], world)
    if diff:
        raise SystemExit(f"pretrain --resume: {ckpt_dir / tag} was saved with other options, so the resumed run would not "
                         "match an uninterrupted one (saved, now): "
                         + ", ".join(f"{k}={a!r} vs {b!r}" for k, (a, b) in sorted(diff.items())))
    loader.load_state_dict(client["loader"])
    rng = ckpt_dir / tag / f"rng_rank{rank}.pt"
    if not rng.exists():
        raise SystemExit(f"pretrain --resume: {rng} is missing (the checkpoint was written by an older lmforge "
                         "or another world size); dropout would differ from an uninterrupted run")
    torch.set_rng_state(torch.load(rng)["torch"])
    return (client["step"], client["micro"], client["curve"], torch.tensor(client["seen"], dtype=torch.float64),
            float(client.get("budget_elapsed", 0.0)))


def evaluate(engine, shards: ShardSet, rank: int, world: int, cfg: PretrainConfig) -> float | None:
    """Mean loss per labelled token over up to eval_batches batches per rank (variant 0): masked
    tokens for MLM, target tokens for T5, real tokens for causal (each batch's loss weighted by
    its labels; GPT-2 averages over one position fewer per row, as it shifts the labels)."""
    import torch.distributed as dist

    table = shards.read("valid") if shards.splits.get("valid") else None
    batch_size = min(cfg.micro_batch_size, table.num_rows // world) if table is not None else 0
    if batch_size < 1:
        log.warning("validation skipped: the valid split has fewer rows than processes")
        return None
    loader = RankLoader(table, rank, world, batch_size, cfg.seed, shards.num_variants)
    sums = torch.zeros(2, dtype=torch.float64)  # loss * masked, masked
    engine.eval()
    with torch.no_grad():
        for i, batch in enumerate(loader.epoch(0)):
            if i == cfg.eval_batches:
                break
            n = (batch["labels"] != -100).sum().item()
            sums += torch.tensor([engine(**{k: v.to(engine.device) for k, v in batch.items()}).item() * n, n],
                                 dtype=torch.float64)
    engine.train()
    dist.all_reduce(sums)
    return (sums[0] / sums[1]).item() if sums[1] > 0 else None


def write_outputs(cfg: PretrainConfig, model, tokenizer, metrics: dict, counts: dict, t0: float, step: int) -> None:
    """Rank 0: the HF export, metrics.json, then the manifest, last."""
    out = Path(cfg.output)
    if cfg.bf16:
        model = model.float()  # export fp32 weights whatever the training precision
    hf_files = save_hf(model, tokenizer, out / HF_DIR)
    atomic_write_json(out / METRICS_NAME, metrics)
    summary = {k: metrics[k] for k in ("first_loss", "last_loss", "loss_window", "valid_loss", "seconds_per_step",
                                       "world_size", "global_batch", "num_parameters")}
    write_manifest(out, Manifest(
        stage="pretrain",
        config=config_to_dict(cfg),
        inputs=[input_ref(cfg.shards), input_ref(cfg.tokenizer)],
        counts=counts,
        outputs=describe_outputs(out, [*(f.relative_to(out) for f in hf_files), METRICS_NAME]),
        extra={**summary, "deepspeed": deepspeed_config(cfg), "checkpoint": f"checkpoints/global_step{step}",
               "versions": _versions()},
        wall_seconds=time.time() - t0,
    ))
    log.info("wrote %s: first loss %.4f -> last loss %.4f", out / MANIFEST_NAME, metrics["first_loss"], metrics["last_loss"])


def _tensorboard(path: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        log.warning("tensorboard not installed; no event log")
        return None
    return SummaryWriter(str(path))


def _versions() -> dict[str, str]:
    import deepspeed
    import transformers

    return {"torch": torch.__version__, "deepspeed": deepspeed.__version__, "transformers": transformers.__version__}


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m training.pretrain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, PretrainConfig)
    # the DeepSpeed launcher (`deepspeed --hostfile ...`) passes --local_rank=N besides setting LOCAL_RANK
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    local_rank = vars(ns).pop("local_rank")
    if local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(local_rank))
    cfg = config_from_args(PretrainConfig, ns)
    rank = int(os.environ.get("RANK", "0"))
    setup_logs(logging.INFO if rank == 0 else logging.WARNING, f"%(asctime)s [rank{rank}] %(name)s: %(message)s")
    return run(cfg)


if __name__ == "__main__":
    main()
