"""Pretraining under DeepSpeed, on CPU processes over gloo or one process per GPU over NCCL: a BERT on MLM shards
(mlm, whole_word, span), a GPT-2 on causal shards, a T5 on t5_span shards (`training.models.model`).

Run with two CPU processes:

    DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 torchrun --nproc_per_node=2 -m training.pretraining.pretrain \\
        --shards runs/demo/shards --tokenizer runs/demo/tokenizer --output runs/demo/pretrain \\
        --model demo --steps 600   # ~0.25 s/step at seq 128, micro batch 16: ~3 min with startup

or from Python, `training.launch.torchrun.launch_pretrain(PretrainConfig(...), nproc=2)`; `--help` lists
every option. Writes, under --output: `checkpoints/` (DeepSpeed's files from every rank, lmforge's
JSON state and sha256 digests: `training.pretraining.checkpoint`), `hf/` (model and tokenizer for
`AutoModelForMaskedLM` / `AutoTokenizer`), `metrics.jsonl` (streamed) and `tensorboard/`
(`training.runtime.telemetry`), `metrics.json`, and last `manifest.json` (rank 0). A rerun into the same
directory first deletes the old manifest, so a crashed rerun never looks finished.

The shell is thin: the options in `training.pretraining.config`; what the run does on this machine (ZeRO stage,
compile, micro batch, precision, each with its reason) in `training.pretraining.run_plan`; set-up in
`training.pretraining.setup` (the micro batch a GPU holds: `training.pretraining.micro_batch`); the engine and the step in
`training.pretraining.engine` (compiled regions: `training.pretraining.compiled`); data, model, recipe (optimizer, schedule, held-out
loss), checkpoints and export in `training.pretraining.data`, `training.models.model`, `training.runtime.recipe`, `training.pretraining.checkpoint`
and `training.models.export`; the DeepSpeed config in `training.runtime.ds_config`, resuming in `training.pretraining.resume`, the time
budget in `training.pretraining.budget`, the output folder and the final export in `training.pretraining.outputs`. This file
runs the loop, its log records, validation and the last save. The first run on a machine
spends ~45 s compiling DeepSpeed's CPU shared-memory comm op (cached per Python environment under
~/.cache/torch_extensions: common/cache.py torch_extensions_dir).
"""
from __future__ import annotations

import argparse
import logging
import os
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from common.config import add_config_args, config_from_args, config_to_dict
from common.logs import setup as setup_logs
from training.models.export import loss_summary
from training.models.model import num_parameters
from training.pretraining.compiled import CompileWatch, eval_stance
from training.pretraining.config import TRAINABLE, PretrainConfig, plan_steps  # noqa: F401  (re-exported)
from training.pretraining.data import RankLoader, ShardSet
from training.pretraining.feed import DeviceFeed
from training.pretraining.outputs import write_outputs
from training.pretraining.setup import Setup, prepare_batch, setup
from training.pretraining.step_profile import StepProfiler
from training.pretraining.step_stats import StepStats, check_finite, log_window_steps
from training.runtime import processes
from training.runtime.recipe import heldout_loss, rank_seed
from training.runtime.telemetry import Telemetry, peak_rss_mb

log = logging.getLogger("lmforge.pretrain")


def run(cfg: PretrainConfig) -> Path:
    """setup -> fit -> validate -> save, on every rank; returns the output directory."""
    from deepspeed.utils import logger as ds_logger
    from transformers.utils import logging as hf_logging

    t0 = time.time()
    ds_logger.setLevel(logging.WARNING)
    hf_logging.disable_progress_bar()  # no tqdm bars in a multi-process log
    # DeepSpeed's ZeRO-2 calls the deprecated all_gather_into_tensor; the warning is not ours to fix.
    warnings.filterwarnings("ignore", message=".*all_gather_into_tensor.*", category=FutureWarning)
    s = setup(cfg)
    cfg, engine = s.cfg, s.engine
    model = engine.module.hf
    global_batch = cfg.micro_batch_size * cfg.grad_accum * s.world
    if s.rank == 0:
        log.info("%s: %s parameters | %s x %d seq x %d tok = %s tokens/step (incl. padding) | %d steps/epoch | "
                 "%d procs (%s) | %s, %s schedule | attention %s%s", cfg.init_from or cfg.model,
                 f"{num_parameters(model):,}", f"{cfg.time_budget_minutes:g} min" if s.clock else f"{s.total} steps",
                 global_batch, s.shards.seq_len, f"{global_batch * s.shards.seq_len:,}",
                 s.loader.batches_per_epoch // cfg.grad_accum, s.world, engine.device,
                 type(getattr(engine, "client_optimizer", None) or engine.optimizer).__name__, cfg.schedule,
                 s.notes["attention"],
                 " | dropout masks from SFC64" if s.notes["dropout_masks"] == "sfc64" else "")
        for line in s.plan.lines():
            log.info("plan: %s", line)
        log.info("plan: residual stream %s", s.notes["residual"])
        if s.plan.compile:
            log.info("plan: compile mode %s: %s", cfg.compile_mode, s.notes["compile_mode"])
            tuned, why = s.notes["kernel_tuning"]
            log.info("plan: kernel tuning %s: %s", "coordinate-descent" if tuned else "heuristic", why)
    result = fit(s, t0)
    last_valid = (validate(s, result["step"], result["telemetry"], t0, result["t_fit"]) if cfg.eval_batches
                  else result["last_valid"])
    finish(s, result, last_valid, global_batch, t0)
    return s.out


def restore(s: Setup, stats: StepStats) -> int:
    """A --resume run's state from its checkpoint (s.resumed): weights, optimizer, loader, counters, RNG, budget
    clock; the step it continues after."""
    from training.pretraining import checkpoint
    from training.pretraining.safe_load import UnsafeCheckpoint, weights_only_loads

    plan, state = s.resumed, s.resumed.state
    try:
        with weights_only_loads():  # DeepSpeed's pickles: tensors and its own state, never code
            path, _ = s.engine.load_checkpoint(str(s.ckpt_dir), tag=plan.load_tag)
    except UnsafeCheckpoint as e:
        raise SystemExit(f"pretrain --resume: {e}") from None
    if path is None:
        raise SystemExit(f"pretrain --resume: DeepSpeed could not load {s.ckpt_dir / plan.load_tag}")
    s.loader.load_state_dict(state["loader"])
    step = int(state["step"])
    stats.load(state["seen"], state["curve"])
    if not checkpoint.restore_rng(s.ckpt_dir / plan.load_tag, s.rank, rank_seed(s.cfg.seed, s.rank, step)):
        log.warning("rank %d: %s has no RNG state for this rank (saved on %d processes); dropout reseeded",
                    s.rank, plan.tag, plan.world_size)
    log.info("resumed from %s at step %d (epoch %d, sample %d)%s", s.ckpt_dir / plan.load_tag, step,
             *s.loader.position, f", {plan.world_size} -> {s.world} processes" if plan.universal else "")
    if s.clock:
        s.clock.resume_at(float(state.get("budget_elapsed", 0.0)))
    return step


def fit(s: Setup, t0: float) -> dict[str, Any]:
    """The training loop: micro-batches, optimizer steps, log records, checkpoints and validations on schedule."""
    cfg, engine, loader, stats = s.cfg, s.engine, s.loader, StepStats(s.engine.device)
    total, clock = s.total, s.clock
    step = restore(s, stats) if s.resumed else 0
    micro = step * cfg.grad_accum  # this process's micro-batches (checkpoints fall on step boundaries)
    telemetry = Telemetry(s.out, s.rank == 0, cfg.tensorboard, resume_step=step if s.resumed else None)
    watch = CompileWatch() if s.plan.compile else None
    profiler = StepProfiler(cfg.profile_steps, s.out / "profile", engine.device, write=s.rank == 0)
    epoch, start = loader.position  # (0, 0) for a fresh run
    resumed_at = step
    t_fit = t_log = time.time()
    last_valid: dict[str, float | None] = {}
    engine.train()
    while step < total:
        for position, batch in feed(engine, loader, epoch, start, s.plan.compile):
            loader.position = position
            if micro % cfg.grad_accum == 0:
                profiler.before(step + 1)
            loss = s.step.forward_backward(batch)
            lr = engine.get_lr()[0]  # the rate this step uses; the scheduler moves it in step()
            norm = s.step.update()
            stats.add_micro(loss, batch, engine.module.last_counted, engine.module.last_correct)
            micro += 1
            if micro % cfg.grad_accum:
                continue
            step += 1
            stats.end_step(step, lr, norm)
            profiler.after(step)
            if watch:
                watch.after_step(step)
            if clock and clock.tick(engine.device):  # a budgeted run agrees on the clock every step, by design
                total = step
            if log_window_steps(step, cfg.log_every, total):
                log_window(s, stats, telemetry, watch, step, total, epoch, lr, t0, t_log)
                t_log = time.time()
            if cfg.eval_every and cfg.eval_batches and step % cfg.eval_every == 0 and step < total:
                last_valid = validate(s, step, telemetry, t0, t_fit)
            if step >= total:
                break
            if cfg.save_every and step % cfg.save_every == 0:
                save_state(s, step, stats)
        else:
            epoch, start = epoch + 1, 0
    return {"step": step, "epoch": epoch, "micro": micro, "stats": stats, "telemetry": telemetry, "watch": watch,
            "profile": profiler.summary,
            "fit_seconds": time.time() - t_fit, "t_fit": t_fit, "resumed_at": resumed_at, "last_valid": last_valid}


def log_window(s: Setup, stats: StepStats, telemetry: Telemetry, watch: CompileWatch | None, step: int, total: int,
               epoch: int, lr: float, t0: float, t_log: float) -> None:
    """A log step: the window's one all-reduce and host read, the progress line and the metrics record."""
    cfg = s.cfg
    steps = log_window_steps(step, cfg.log_every, total)
    window, norms = stats.take_window()  # the one all-reduce and host read of the window
    check_finite(step - steps + 1, step, window, norms)
    if watch:
        watch.check(step)
    dt = time.time() - t_log
    rss = torch.tensor([peak_rss_mb()], dtype=torch.float64, device=s.engine.device)
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    record = {"epoch": epoch, "variant": s.loader.variant(epoch),
              "loss": window["loss_sum"] / window["micro_batches"],
              "mlm_accuracy": window["correct"] / max(window["labelled"], 1), "lr": lr,
              "grad_norm": sum(norms) / len(norms) if norms else None,
              "tokens_per_s": window["tokens"] / dt, "samples_per_s": window["sequences"] / dt,
              "seconds_per_step": dt / steps, "peak_rss_mb": rss.item(), "elapsed_s": time.time() - t0}
    if s.engine.device.type == "cuda":
        record["peak_gpu_memory_gb"] = torch.cuda.max_memory_allocated(s.engine.device) / 1e9
    telemetry.write("train", step, **record)
    log.info("step %d/%s | epoch %d (variant %d) | loss %.4f | acc %.3f | lr %.2e | %.2f s/step | %s tok/s", step,
             f"{s.clock.progress:.0%} of {cfg.time_budget_minutes:g} min" if s.clock else total, epoch,
             record["variant"], record["loss"], record["mlm_accuracy"], lr, record["seconds_per_step"],
             f"{record['tokens_per_s']:,.0f}")


def finish(s: Setup, r: dict[str, Any], last_valid: dict[str, float | None], global_batch: int, t0: float) -> None:
    """The last checkpoint, the HF export, metrics.json and the manifest (written last, by rank 0)."""
    cfg, engine, step, stats = s.cfg, s.engine, r["step"], r["stats"]
    save_state(s, step, stats)
    r["telemetry"].close()
    seen = stats.seen
    counts = {
        "steps": step,
        "epochs_started": r["epoch"] + 1,  # the loop breaks inside the epoch that reaches `total`
        "micro_batches_per_rank": r["micro"],
        "sequences": int(seen["sequences"]),
        "tokens": int(seen["tokens"]),
        "masked_tokens": int(seen["labelled"]),
        **s.loader.counts,
    }
    curve = stats.curve
    model = engine.module.hf
    metrics = {
        "loss_curve": curve, **loss_summary(curve), "valid_loss": last_valid.get("loss"),
        "valid_accuracy": last_valid.get("mlm_accuracy"), "train_accuracy": seen["correct"] / max(seen["labelled"], 1),
        "tokens_seen": counts["tokens"], "sequences_seen": counts["sequences"], "steps": step,
        "world_size": s.world, "global_batch": global_batch, "micro_batch_size": cfg.micro_batch_size,
        "grad_accum": cfg.grad_accum, "seq_len": s.shards.seq_len,
        "torch_threads": torch.get_num_threads(), "device": engine.device.type,
        "precision": "bf16" if cfg.bf16 else "fp16" if cfg.fp16 else "fp32",
        "attention": cfg.attention, "attention_kernel": s.notes["attention"],
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "dropout_masks": s.notes["dropout_masks"], "residual": s.notes["residual"], "plan": s.plan.as_dict(),
        "compile": {"regions": s.notes["compiled_regions"], "mode": cfg.compile_mode if s.plan.compile else None,
                    "mode_reason": s.notes["compile_mode"],
                    "kernel_tuning": "coordinate-descent" if s.notes["kernel_tuning"][0] else "heuristic",
                    **(r["watch"].summary() if r["watch"] else {})},
        **({"micro_batch_probe": s.notes["micro_batch_probe"]} if "micro_batch_probe" in s.notes else {}),
        **({"profile": r["profile"]} if r["profile"] else {}),
        "model": cfg.init_from or cfg.model, "num_parameters": num_parameters(model),
        "time_budget_minutes": cfg.time_budget_minutes or None,
        "fit_seconds": r["fit_seconds"], "seconds_per_step": r["fit_seconds"] / max(step - r["resumed_at"], 1),
        "resumed_from_step": r["resumed_at"] if cfg.resume else None,
        "resumed_from_world_size": s.resumed.world_size if s.resumed else None,
        "wall_seconds": time.time() - t0,
    }
    if engine.device.type == "cuda":
        metrics["peak_gpu_memory_gb"] = torch.cuda.max_memory_allocated(engine.device) / 1e9
    write_outputs(cfg, engine, s.tokenizer, metrics, counts, t0, step, s.rank, s.ds_config)
    dist.barrier()
    s.held.close()


def feed(engine, loader: RankLoader, epoch: int, start: int = 0, fixed: bool = False) -> DeviceFeed:
    """The loader's (position, batch) pairs on the engine's device (training.pretraining.feed), prepared (`prepare_batch`)."""
    most = loader.most_masks_per_row()

    def prepare(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return prepare_batch(engine.module, batch, loader.batch_size, most, fixed)

    return DeviceFeed(loader.batches(epoch, start), engine.device, prepare)


def save_state(s: Setup, step: int, stats: StepStats) -> None:
    """A checkpoint (training.pretraining.checkpoint) that --resume continues from exactly: DeepSpeed's weights, ZeRO
    optimizer partitions and LR scheduler, each rank's RNG, and lmforge's JSON state (loader position in
    samples, loss curve and counts, options, world size)."""
    from training.pretraining import checkpoint

    state = {"step": step, "epoch": s.loader.position[0], "world_size": s.world, "config": config_to_dict(s.cfg),
             "loader": s.loader.state_dict(), **stats.state(), "budget_elapsed": s.clock.elapsed if s.clock else 0.0}
    checkpoint.save(s.engine, s.ckpt_dir, step, state, s.rank)


def validate(s: Setup, step: int, telemetry: Telemetry, t0: float, t_fit: float) -> dict[str, float | None]:
    """The held-out loss at `step`, logged and written to the metrics; {loss: None} without a valid split.
    The record's `fit_s` is the training loop's clock (from its start, this evaluation included) and `eval_s`
    this evaluation's own seconds: time to a held-out loss is fit_s less every eval_s so far (bench transfer --gpu)."""
    t = time.time()
    result = evaluate(s.engine, s.shards, s.rank, s.world, s.cfg, s.plan.documents)
    if result["loss"] is not None:
        log.info("step %d: valid loss %.4f (perplexity %.1f) | acc %.3f", step, result["loss"],
                 torch.tensor(result["loss"]).exp().item(), result["mlm_accuracy"])
        now = time.time()
        telemetry.write("valid", step, **result, elapsed_s=now - t0, fit_s=now - t_fit, eval_s=now - t)
    return result


def evaluate(engine, shards: ShardSet, rank: int, world: int, cfg: PretrainConfig,
             documents: bool) -> dict[str, float | None]:
    """Mean loss per labelled token and top-1 accuracy over up to eval_batches batches per rank (variant 0):
    masked tokens for MLM, target tokens for T5, real tokens for causal (each batch's loss weighted by its
    labels; GPT-2 averages over one position fewer per row, as it shifts the labels)."""
    table = shards.read("valid") if shards.splits.get("valid") else None
    batch_size = min(cfg.micro_batch_size, table.num_rows // world) if table is not None else 0
    if batch_size < 1:
        log.warning("validation skipped: the valid split has fewer rows than processes")
        return {"loss": None, "mlm_accuracy": None}
    loader = RankLoader(table, rank, world, batch_size, cfg.seed, shards.num_variants, documents)

    def step(item):  # device tensors: the sums are read once, after the all-reduce
        _, batch = item
        return engine(**batch), engine.module.last_counted, engine.module.last_correct

    engine.eval()
    with eval_stance(cfg.compile_mode):  # no CUDA graph replays outside autograd (training.pretraining.compiled)
        held = heldout_loss(step, feed(engine, loader, 0, fixed=bool(cfg.compile)), cfg.eval_batches,
                            engine.device)  # training.runtime.recipe: the stages' one held-out loss
    engine.train()
    dist.all_reduce(held.sums)
    return {"loss": held.loss, "mlm_accuracy": held.accuracy}


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m training.pretraining.pretrain", description=__doc__,
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
