"""`lmforge bench transfer --gpu`: does pretraining pay when a GPU buys the minutes? One device call of ~9 minutes.

    lmforge bench transfer --gpu --prepare          # here, on the CPU: the inputs into .carry/transfer-gpu (~1 min
                                                    # after `lmforge bench transfer` has built its corpus)
    bash infra/gpu/run.sh transfer                  # on the GPU machine (infra/gpu/README.md): this module's run
    lmforge bench transfer --gpu --work DIR         # on a CPU: the same run as a smoke test (tiny model, seconds)

What one run does, in order, each part bounded by the run's --minutes:
1. **Pretraining**: `lmforge pretrain` on one GPU with its GPU defaults (compiled regions, CUDA graphs, bf16
   autocast, ZeRO-0), `--model` (bert_base: the transfer corpus's 21M tokens are ~5 epochs of its budget, the
   repetition data-constrained scaling finds nearly free; a smaller model would repeat them ~20 times),
   pre-LN, no dropout, for `--budget-minutes` of wall clock, validating every `--eval-every` steps on the whole
   valid split (variant 0 of its precomputed masks).
2. **Fine-tuning**: the bench's three tasks (bench.kit.tasks: vader, reuters, wsj_pos, their caps),
   `lmforge finetune --init pretrained scratch` over `--seeds` with the learning rate chosen per init on
   validation from `--ft-lr` and `--ft-lr-grid` (the one rule by which a pretrained and a random start may
   differ); the majority and TF-IDF + logistic regression controls on the same splits. Every task and init
   runs at once (six processes on the one GPU).
3. **Time to quality** (MLPerf's measure): the HF Trainer (bf16, torch_compile, 4 loader workers,
   `DataCollatorForLanguageModeling`) on the same model, rows and global batch, at the learning rate lmforge's
   run used at each step, validated on the same valid rows and masks at the same steps, until
   `--hf-minutes` of training. The target is the lowest held-out loss the Trainer reached; each system's
   time to it is its training loop's clock (compilation included, evaluations excluded).
Writes <work>/transfer-gpu.json and, on a GPU, docs/BENCHMARKS.md's section with its data in
docs/benchmarks/transfer-on-one-gpu-does-pretraining-pay.json.
On a CPU it runs the tiny preset for seconds on a task's first rows (a test of the script, not a measurement).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.transfer.gpu_report import render, write
from common.config import opt, require

ROOT = Path(__file__).resolve().parents[2]
CARRY = ROOT / ".carry" / "transfer-gpu"


@dataclass
class TransferGpuConfig:
    data: str = opt(str(CARRY), "the carried inputs: corpus/ (or shards/), tokenizer/ and labeled/<task>/ (--prepare "
                    "writes them)")
    work: str = opt("/tmp/bench-transfer-gpu", "runs, logs and results")
    model: str = opt("bert_base", "lmforge's model preset")
    micro_batch_size: int = opt(256, "rows per step (one GPU): 32k tokens, so a few-minute run takes thousands of steps")
    embeddings: str = opt("preset", "pretrain --embeddings: preset | tied | untied")
    min_steps: int = opt(0, "fine-tune for at least this many steps (finetune --min-steps)")
    lr: float = opt(5e-4, "peak pretraining learning rate (pre-LN; Cramming's 1e-3 at 1,536 rows, scaled to 256)")
    budget_minutes: float = opt(3.0, "wall clock of lmforge's pretraining loop, compilation included")
    warmup_ratio: float = opt(0.3, "share of the budget's clock warming the learning rate up (the first ~40 s are "
                              "compilation, in one step: 0.3 leaves some hundreds of steps of warm-up)")
    eval_every: int = opt(100, "steps between held-out losses (both systems)")
    kernel_tuning: str = opt("heuristic", "inductor's kernel configs (coordinate descent costs ~2 minutes of compiling)")
    tasks: list[str] = opt(["vader", "reuters", "wsj_pos"], "tasks (bench.kit.tasks)")
    seeds: list[int] = opt([1, 2, 3], "fine-tune seeds")
    ft_lr: float = opt(3e-4, "fine-tune learning rate (2026-11-28, H200: every init that learned chose 3e-4 of "
                       "3e-5, 1e-4, 3e-4 on validation)")
    ft_lr_grid: list[float] = opt([1e-4], "further fine-tune rates; each init keeps the best on validation")
    hf_minutes: float = opt(2.0, "the HF Trainer's training clock at most (it stops earlier if the run's time is short)")
    minutes: float = opt(9.0, "the whole run: the Trainer is stopped so that the run ends inside it")

    def __post_init__(self) -> None:
        from bench.kit.tasks import TASKS

        bad = [t for t in self.tasks if t not in TASKS]
        require(not bad, f"--tasks: unknown {', '.join(bad)}; choose from {', '.join(sorted(TASKS))}")
        require(self.budget_minutes > 0 and self.eval_every >= 1 and self.micro_batch_size >= 1,
                "--budget-minutes, --eval-every and --micro-batch-size must be positive")


def smoke(cfg: TransferGpuConfig) -> TransferGpuConfig:
    """The CPU's version of the run: the same steps at a size that takes seconds."""
    return replace(cfg, model="tiny", micro_batch_size=16, budget_minutes=0.25, eval_every=5, seeds=[1],
                   ft_lr_grid=[], hf_minutes=0.15, minutes=15.0)


# ---- here, before the call --------------------------------------------------------------------------------------

def prepare(transfer_data: Path, tasks: list[str], out: Path = CARRY) -> Path:
    """The GPU run's inputs from `lmforge bench transfer`'s data steps: its corpus (kept documents) and tokenizer (the
    run builds the shards there, as they are ~140 MB: the call carries 64 MiB), and each
    task's `lmforge labeled prepare` output with its file paths relative to the checkout (the device runs there)."""
    from bench.kit.steps import run_cli

    for part in ("corpus", "tokenizer"):
        src = transfer_data / part
        if not (src / "manifest.json").exists():
            raise SystemExit(f"bench transfer --gpu --prepare: {src} is not a finished {part} stage; build it with "
                             "`lmforge bench transfer` (its data steps) first")
        shutil.rmtree(out / part, ignore_errors=True)
        shutil.copytree(src, out / part, ignore=_carried(src, part))
    shrink_corpus(out / "corpus")
    for task in tasks:
        dest = out / "labeled" / task
        if not (dest / "manifest.json").exists():
            run_cli(f"labeled_{task}", ["labeled", "prepare", task, "--output", str(dest)], out / "logs" / f"{task}.log")
        spec = json.loads((dest / "finetune.json").read_text())
        spec["data"] = [os.path.relpath(gzipped(Path(p).resolve()), ROOT) for p in spec["data"]]
        (dest / "finetune.json").write_text(json.dumps(spec, indent=2) + "\n")
    return out


def _carried(src: Path, part: str):
    """copytree's ignore: of the corpus its kept documents and manifest (its quarantine and reports stay here)."""
    if part != "corpus":
        return shutil.ignore_patterns(".flow-key.json")
    return lambda d, names: [n for n in names if Path(d) == src and n not in ("manifest.json", "data")]


def shrink_corpus(corpus: Path) -> None:
    """The columns the shards stage reads (id, text), zstd at level 19: the call's 64 MiB hold the checkout too."""
    import pyarrow.parquet as pq

    for f in sorted((corpus / "data").glob("*/*.parquet")):
        table = pq.read_table(f, columns=["id", "text"])
        pq.write_table(table, f.with_suffix(".tmp"), compression="zstd", compression_level=19)
        f.with_suffix(".tmp").replace(f)


def gzipped(path: Path) -> Path:
    """A labelled JSONL file as .jsonl.gz (the readers take both), the plain file removed."""
    import gzip

    if path.suffix != ".jsonl":
        return path
    gz = path.with_suffix(".jsonl.gz")
    with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return gz


# ---- 1. pretraining ---------------------------------------------------------------------------------------------

SHARDS = dict(seq_len=128, num_shards=4, valid_per_mille=20)
"""`lmforge bench transfer`'s shards step (bench.transfer.payoff.data_steps), MLM at 0.15 with 4 mask variants."""


def shards(data: Path, work: Path) -> Path:
    """The carried shards, or the shards stage run here (no Beam: pipelines.shards.stage.run_local, the same bytes)
    over the carried corpus and tokenizer when the shards do not fit the call's 64 MiB."""
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.stage import ShardsConfig, run_local

    if (data / "shards" / "manifest.json").exists():
        return data / "shards"
    out = work / "shards"
    if not (out / "manifest.json").exists():
        run_local(ShardsConfig(corpus=str(data / "corpus"), tokenizer=str(data / "tokenizer"), output=str(out),
                               mask=MaskConfig(objective="mlm", rate=0.15, num_variants=4), **SHARDS))
    return out


def pretrain(cfg: TransferGpuConfig, data: Path, shard_dir: Path, work: Path, device: str) -> dict[str, Any]:
    """`lmforge pretrain` on one process; its held-out curve with each point's training seconds."""
    from training.launch.torchrun import launch_pretrain
    from training.pretraining.data import ShardSet
    from training.pretraining.pretrain import PretrainConfig
    from training.runtime.telemetry import METRICS_JSONL, read_metrics

    out = work / "pretrain"
    shutil.rmtree(out, ignore_errors=True)
    valid_rows = ShardSet.open(shard_dir).read("valid").num_rows
    extra: dict[str, Any] = {"compile": False} if device == "cpu" else {"kernel_tuning": cfg.kernel_tuning}
    pc = PretrainConfig(shards=str(shard_dir), tokenizer=str(data / "tokenizer"), output=str(out),
                        model=cfg.model, prenorm=True, dropout=0.0, lr=cfg.lr, micro_batch_size=cfg.micro_batch_size,
                        embeddings=cfg.embeddings,
                        time_budget_minutes=cfg.budget_minutes, warmup_ratio=cfg.warmup_ratio,
                        eval_every=cfg.eval_every, log_every=20,
                        eval_batches=max(1, valid_rows // cfg.micro_batch_size), bf16=True, tensorboard=False, **extra)
    with open(work / "logs" / "pretrain.log", "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        launch_pretrain(pc, nproc=1, accelerator="auto" if device == "cuda" else "cpu")
    metrics = json.loads((out / "metrics.json").read_text())
    curve, spent, lrs = [], 0.0, [[0, 0.0]]
    for r in read_metrics(out / METRICS_JSONL):
        if r.get("kind") == "train":
            lrs.append([r["step"], r["lr"]])
        if r.get("kind") == "valid" and r.get("fit_s") is not None:
            spent += r["eval_s"]
            curve.append({"step": r["step"], "loss": r["loss"], "train_s": r["fit_s"] - spent})
    shutil.rmtree(out / "checkpoints", ignore_errors=True)  # the HF export (hf/) is what the fine-tunes read
    keep = ("steps", "tokens_seen", "valid_loss", "first_loss", "last_loss", "num_parameters", "fit_seconds",
            "global_batch", "seq_len", "micro_batch_size", "peak_gpu_memory_gb", "precision", "compile", "wall_seconds")
    return {**{k: metrics.get(k) for k in keep}, "curve": curve, "lr_by_step": lrs, "valid_rows": valid_rows,
            "eval_batches": pc.eval_batches, "warmup_ratio": pc.warmup_ratio, "seed": pc.seed}


# ---- 2. fine-tuning ---------------------------------------------------------------------------------------------

def finetune(cfg: TransferGpuConfig, data: Path, model: Path, work: Path, device: str) -> dict[str, Any]:
    """`lmforge finetune` per task and init, all at once (six processes on the one GPU: each is bound by its host
    thread, ~20 steps/s on an H200, so one process per task took 6 minutes on 2026-11-28); each init chooses its
    learning rate on validation inside its process (finetune --lr-grid), the controls come with the pretrained one."""
    from bench.kit.steps import run_cli
    from bench.kit.tasks import TASKS, flags
    from flows.stages.runner import StageFailed
    from schemas.finetune import FinetuneMetrics

    def one(job: tuple[str, str]) -> dict[str, Any]:
        task, init = job
        plan, out = TASKS[task], work / "finetune" / task / init
        shutil.rmtree(out, ignore_errors=True)
        small = dict(max_train=200, max_validation=100, max_test=100, epochs=1) if device == "cpu" else {}
        opts = dict(model=model, output=out, init=[init], seeds=cfg.seeds, lr=cfg.ft_lr, lr_grid=cfg.ft_lr_grid,
                    max_train=plan.max_train, max_length=plan.max_length, epochs=plan.epochs, min_steps=cfg.min_steps, bf16=True,
                    threads=2, controls=init == "pretrained")
        t = time.time()
        try:
            run_cli(f"finetune_{task}_{init}", ["finetune", "--config", str(data / "labeled" / task / "finetune.json"),
                                                *flags(**{**opts, **small})], work / "logs" / f"finetune_{task}_{init}.log")
        except StageFailed as e:
            return {"error": str(e), "seconds": time.time() - t}
        m = FinetuneMetrics.read(out / "metrics.json")
        rows = {name: {"test": {k: asdict(v) for k, v in row.scores["test"].items()},
                       "lr": row.details.get("lr"), "lr_search": row.details.get("lr_search")}
                for name, row in m.rows.items()}
        return {"primary": m.primary_metric, "labels": len(m.labels or []), "counts": m.counts, "rows": rows,
                "seconds": time.time() - t}

    jobs = [(task, init) for task in cfg.tasks for init in ("pretrained", "scratch")]
    with ThreadPoolExecutor(len(jobs)) as pool:
        done = dict(zip(jobs, pool.map(one, jobs)))
    out: dict[str, Any] = {}
    for task in cfg.tasks:
        parts = [done[(task, init)] for init in ("pretrained", "scratch")]
        failed = [p["error"] for p in parts if "error" in p]
        out[task] = {"error": "; ".join(failed)} if failed else {
            **parts[0], "rows": {**parts[0]["rows"], **parts[1]["rows"]}, "seconds": max(p["seconds"] for p in parts)}
    return out


# ---- 3. the HF Trainer to the same held-out loss ------------------------------------------------------------------

def hf_peer(spec: dict[str, Any]) -> dict[str, Any]:
    """The HF Trainer on lmforge's model, rows, batch and learning rate by step; validated every `eval_every` steps on lmforge's
    validation batches (same rows, same masks), its clock paused meanwhile; stopped after `seconds` of training."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments
    from transformers.utils import logging as hf_logging

    from training.models.model import build_for_objective
    from training.pretraining.data import RankLoader, ShardSet
    from training.pretraining.module import model_config

    hf_logging.set_verbosity_error()
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    shards = ShardSet.open(spec["shards"])
    table = shards.read("train")
    ids, lengths = table.column("input_ids").to_pylist(), table.column("length").to_pylist()
    rows = [{"input_ids": r[:n]} for r, n in zip(ids, lengths)]
    valid = shards.read("valid")
    vloader = RankLoader(valid, 0, 1, min(spec["micro_batch_size"], valid.num_rows), spec["seed"], shards.num_variants)
    vbatches = [{k: b[k] for k in ("input_ids", "attention_mask", "labels")}
                for _, b in zip(range(spec["eval_batches"]), vloader.epoch(0))]
    torch.manual_seed(spec["seed"])
    mc = model_config(argparse.Namespace(model=spec["model"], prenorm=True, max_position=0, dropout=0.0,
                                         embeddings=spec.get("embeddings", "preset")))
    model = build_for_objective(shards.objective, mc, shards.vocab_size, shards.pad_id, shards.eos_id,
                                shards.seq_len).hf
    tok = AutoTokenizer.from_pretrained(spec["tokenizer"])
    args = TrainingArguments(
        output_dir=str(Path(spec["out"]).parent / "hf-trainer-output"), max_steps=spec["max_steps"],
        per_device_train_batch_size=spec["micro_batch_size"], learning_rate=spec["lr"], adam_beta1=0.9,
        adam_beta2=0.98, adam_epsilon=1e-6, weight_decay=0.01, max_grad_norm=1.0, use_cpu=not cuda, bf16=True,
        torch_compile=cuda, eval_strategy="no", save_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=4 if cuda else 0, dataloader_drop_last=True, seed=spec["seed"])

    def held_out(m) -> float:
        m = getattr(m, "_orig_mod", m)  # eager: compiling the evaluation's shapes would cost minutes of nothing
        total = count = 0.0
        m.eval()
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16):
            for b in vbatches:
                b = {k: v.to(dev, non_blocking=True) for k, v in b.items()}
                n = (b["labels"] != -100).sum()
                total += float(m(**b).loss.float() * n)
                count += float(n)
        m.train()
        return total / max(count, 1.0)

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.curve: list[dict[str, float]] = []
            self.t0 = self.paused = 0.0

        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, model=None, **kw):
            late = time.time() > spec["deadline"]  # the run's end: validate here and stop, whatever the clock says
            if state.global_step % spec["eval_every"] and state.global_step < spec["max_steps"] and not late:
                return
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            train_s = t - self.t0 - self.paused
            self.curve.append({"step": state.global_step, "loss": held_out(model), "train_s": train_s})
            self.paused += time.perf_counter() - t
            if train_s >= spec["seconds"] or late:
                control.should_training_stop = True

    steps, rates = zip(*spec["lr_by_step"])

    def factor(done: int) -> float:  # the rate of step done + 1 as lmforge ran it, over the peak
        return float(np.interp(done + 1, steps, rates)) / spec["lr"]

    class SameSchedule(Trainer):
        """The Trainer's own AdamW and loop; the learning rate lmforge's run used at each step (its budget clock's
        warm-up and decay, read from its metrics every 20 steps and interpolated)."""

        def create_scheduler(self, num_training_steps, optimizer=None):
            self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, factor)
            return self.lr_scheduler

    clock = Clock()
    SameSchedule(model=model, args=args, train_dataset=rows, data_collator=DataCollatorForLanguageModeling(tok, 0.15),
                 callbacks=[clock]).train()
    return {"curve": clock.curve, "max_steps": spec["max_steps"], "micro_batch_size": spec["micro_batch_size"],
            "peak_gpu_memory_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None}


def time_to_quality(cfg: TransferGpuConfig, data: Path, shard_dir: Path, pre: dict[str, Any], work: Path,
                    seconds: float, deadline: float) -> dict[str, Any]:
    from bench.kit.steps import run_command

    out = work / "hf" / "result.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    spec = {"shards": str(shard_dir), "tokenizer": str(data / "tokenizer"), "model": cfg.model,
            "embeddings": cfg.embeddings, "micro_batch_size": pre["micro_batch_size"], "lr": cfg.lr, "max_steps": pre["steps"],
            "lr_by_step": pre["lr_by_step"], "eval_every": cfg.eval_every, "eval_batches": pre["eval_batches"],
            "seed": pre["seed"], "seconds": seconds, "deadline": deadline, "out": str(out)}
    (out.parent / "spec.json").write_text(json.dumps(spec, indent=1))
    t = time.time()
    run_command("hf_trainer", [sys.executable, "-m", "bench.transfer.gpu", "--hf-peer", str(out.parent / "spec.json")],
                work / "logs" / "hf_trainer.log", env={"PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))},
                cwd=ROOT)
    hf = json.loads(out.read_text())
    hf["wall_seconds"] = time.time() - t
    return {"hf": hf, **compare(pre["curve"], hf["curve"])}


def compare(ours: list[dict[str, float]], hf: list[dict[str, float]]) -> dict[str, Any]:
    """The target (the Trainer's lowest held-out loss), each system's first training-seconds at or under it, and
    lmforge's loss minus the Trainer's at the steps both validated (learning per step: same batch, same schedule)."""
    if not hf or not ours:
        return {"target": None}
    target = min(p["loss"] for p in hf)

    def first(curve: list[dict[str, float]]) -> float | None:
        return next((p["train_s"] for p in curve if p["loss"] <= target), None)

    a, b = first(ours), first(hf)
    at = {p["step"]: p["loss"] for p in hf}
    same = [{"step": p["step"], "lmforge": p["loss"], "hf": at[p["step"]]} for p in ours if p["step"] in at]
    return {"target": target, "lmforge_s": a, "hf_s": b, "ratio": a / b if a is not None and b else None,
            "same_steps": same}


# ---- the run --------------------------------------------------------------------------------------------------------

def paired(res: dict[str, Any], metric: str) -> dict[str, Any] | None:
    from flows.ablation.stats import paired as paired_diff

    rows = res["rows"]
    if "pretrained" not in rows or "scratch" not in rows:
        return None
    get = lambda r: {int(s): 100 * v for s, v in rows[r]["test"][metric]["per_seed"].items() if v is not None}  # noqa: E731
    return paired_diff(get("pretrained"), get("scratch"))


def data_counts(data: Path, shard_dir: Path) -> dict[str, Any]:
    from schemas.manifest import read_manifest

    c, corpus = read_manifest(shard_dir)["counts"], data / "corpus"
    kept = read_manifest(corpus)["counts"].get("kept_by_language") if (corpus / "manifest.json").exists() else None
    return {"train_tokens": c.get("train_tokens"), "valid_tokens": c.get("valid_tokens"), "kept_by_language": kept}


def run(cfg: TransferGpuConfig, device: str) -> dict[str, Any]:
    work, t0 = Path(cfg.work), time.time()
    deadline = t0 + 60 * cfg.minutes
    (work / "logs").mkdir(parents=True, exist_ok=True)
    data = Path(cfg.data)
    res: dict[str, Any] = {"config": asdict(cfg), "device": device, "timings": {}}

    def save() -> None:
        (work / "transfer-gpu.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
        if os.environ.get("OUT"):  # the device call's folder: what has finished comes back even if the call is cut
            shutil.copy(work / "transfer-gpu.json", Path(os.environ["OUT"]) / "transfer-gpu.json")

    t = time.time()
    shard_dir = shards(data, work)
    res["timings"]["shards"] = time.time() - t
    res["data"] = data_counts(data, shard_dir)
    t = time.time()
    res["pretraining"] = pretrain(cfg, data, shard_dir, work, device)
    res["timings"]["pretraining"] = time.time() - t
    print(f"transfer-gpu: pretrained {res['pretraining']['steps']} steps, held-out loss "
          f"{res['pretraining']['valid_loss']:.4f} ({time.time() - t:.0f} s)", flush=True)
    save()
    t = time.time()
    res["tasks"] = finetune(cfg, data, work / "pretrain" / "hf", work, device)
    res["timings"]["finetuning"] = time.time() - t
    for task, r in res["tasks"].items():
        if "error" not in r:
            r["paired"] = paired(r, r["primary"])
        print(f"transfer-gpu: {task}: " + (r.get("error") or ", ".join(
            f"{n} {100 * x['test'][r['primary']]['mean']:.1f}" for n, x in r["rows"].items())), flush=True)
    save()
    left = deadline - time.time() - 45  # the Trainer's data and compilation come before its clock starts
    seconds = min(60 * cfg.hf_minutes, left)
    if left < 10:
        res["time_to_quality"] = {"error": f"not run: {left:.0f} s of the run's {cfg.minutes:g} minutes were left"}
    else:
        t = time.time()
        try:
            res["time_to_quality"] = time_to_quality(cfg, data, shard_dir, res["pretraining"], work, seconds, deadline - 15)
        except Exception as e:  # noqa: BLE001  (the run's other parts stand; the error is a finding)
            res["time_to_quality"] = {"error": f"{type(e).__name__}: {str(e)[-500:]}"}
        res["timings"]["time_to_quality"] = time.time() - t
    res["wall_seconds"] = time.time() - t0
    res["measured_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    save()
    return res


def parse(argv: list[str] | None) -> tuple[TransferGpuConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench transfer --gpu", __doc__, TransferGpuConfig)
    ap.add_argument("--prepare", action="store_true", help="here, before the device call: write --data from "
                    "--transfer-data and the tasks' labelled files")
    ap.add_argument("--transfer-data", default="runs/bench-transfer/data",
                    help="with --prepare: `lmforge bench transfer`'s data directory (default: %(default)s)")
    ap.add_argument("--hf-peer", metavar="SPEC", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update on a GPU (default: %(default)s)")
    ap.add_argument("--render", metavar="JSON", help="rewrite the report from a run's transfer-gpu.json")
    return parse_bench(ap, TransferGpuConfig, argv)


def main(argv: list[str] | None = None) -> int:
    cfg, a = parse(argv)
    if a.hf_peer:
        spec = json.loads(Path(a.hf_peer).read_text())
        Path(spec["out"]).write_text(json.dumps(hf_peer(spec), indent=1) + "\n")
        return 0
    if a.prepare:
        out = prepare(Path(a.transfer_data), cfg.tasks, Path(cfg.data))
        print(f"transfer-gpu: inputs ready in {out}")
        return 0
    if a.render:
        res = json.loads(Path(a.render).read_text())
        write(res, Path(a.out))
        print(render(res))
        return 0
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    res = run(cfg if device == "cuda" else smoke(cfg), device)
    from bench.kit.report import device_facts

    res["machine"] = device_facts()
    (Path(cfg.work) / "transfer-gpu.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(render(res))
    if device == "cuda":
        write(res, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
