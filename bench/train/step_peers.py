"""The peers of lmforge's training step, on the same model, rows and batch: a plain PyTorch loop and the HF Trainer.

    python -m bench.train.step_peers --system plain --shards DIR --tokenizer DIR --model bert_base --micro-batch-size 64 \\
        --steps 30 --warmup 10 --profile 3 --bf16 --out plain.json
    python -m bench.train.step_peers --system hf_trainer --compile ...     # the Trainer with torch_compile=True

- `plain`: the loop a user would write in 30 lines: the same `BertForMaskedLM` lmforge builds for the preset
  (training.models.model, same initialisation), the vocabulary head at every position (the HF model's own loss), bf16
  autocast when --bf16, torch's fused AdamW with lmforge's betas, epsilon and weight decay, clipping at 1.0,
  linear warm-up and decay; the shards' rows with their precomputed masks (variant 0), built on the CPU each step
  and copied to the device. `--compile`: `torch.compile(model)`, the whole model, as a user would.
- `hf_trainer`: `transformers.Trainer` with its defaults on the same model and rows (unmasked, masked on the fly
  by `DataCollatorForLanguageModeling(mlm_probability=0.15)`), bf16=--bf16, torch_compile=--compile, lmforge's
  learning rate, betas, epsilon, weight decay and clipping (bench.train.hf_trainer).
Each runs `warmup` steps, profiles `profile` steps (training.pretraining.step_profile: ops, kernels and the GPU's busy share
per step), then times `steps` steps (on the CPU the median step, on a GPU the window's mean: timing one GPU step
would need a sync per step); writes --out (JSON): seconds and tokens per step, the profile, peak memory.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.kit.options import bench_parser, parse_bench
from common.config import opt, require

SYSTEMS = ("plain", "hf_trainer")
DEVICES = ("auto", "cpu")


@dataclass
class StepPeersBenchConfig:
    system: str = opt(help=f"the peer, from {list(SYSTEMS)}")
    shards: str = opt(help="a shards stage directory (MLM objective)")
    tokenizer: str = opt(help="its tokenizer stage directory")
    model: str = opt(help="training.models.model preset")
    micro_batch_size: int = opt(help="rows per step")
    steps: int = opt(20, "timed steps")
    warmup: int = opt(5, "untimed first steps, compile included")
    profile: int = opt(0, "profiled steps after the warm-up; 0: none")
    bf16: bool = opt(False, "bf16 autocast (the Trainer's bf16=True)")
    compile: bool = opt(False, "torch.compile the model (the Trainer's torch_compile)")
    dropout: float = opt(-1.0, "override the preset's dropout (-1: keep it)")
    lr: float = opt(1e-3, "peak learning rate")
    device: str = opt("auto", f"from {list(DEVICES)}: auto takes the GPU if there is one")

    def __post_init__(self) -> None:
        require(self.system in SYSTEMS, f"--system {self.system}: choose from {', '.join(SYSTEMS)}")
        require(self.device in DEVICES, f"--device {self.device}: choose from {', '.join(DEVICES)}")
        require(min(self.steps, self.warmup, self.micro_batch_size) >= 1,
                "--steps, --warmup and --micro-batch-size must be >= 1")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_gb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None


def build_model(shards, preset_name: str, dropout: float):
    """lmforge's BertForMaskedLM for the preset (same config and initialisation as pretraining's)."""
    import dataclasses

    from training.models.model import build_for_objective, preset

    m = preset(preset_name) if dropout < 0 else dataclasses.replace(preset(preset_name), dropout=dropout)
    torch.manual_seed(0)
    return build_for_objective(shards.objective, m, shards.vocab_size, shards.pad_id, shards.eos_id, shards.seq_len).hf


def plain(a: StepPeersBenchConfig, out: Path) -> dict[str, Any]:
    from training.pretraining.data import RankLoader, ShardSet
    from training.pretraining.step_profile import StepProfiler, enable_kernel_events
    from training.runtime.recipe import param_groups, schedule_fn

    device = torch.device("cuda" if torch.cuda.is_available() and a.device != "cpu" else "cpu")
    if a.profile:
        enable_kernel_events()
    shards = ShardSet.open(a.shards)
    model = build_model(shards, a.model, a.dropout).to(device)
    if a.compile:
        model = torch.compile(model)
    total = a.warmup + a.profile + a.steps
    opt = torch.optim.AdamW(param_groups(model, 0.01), lr=a.lr, betas=(0.9, 0.98), eps=1e-6, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_fn("linear", int(0.06 * total), total))
    loader = RankLoader(shards.read("train"), 0, 1, a.micro_batch_size, 0, shards.num_variants)
    keys = ("input_ids", "attention_mask", "labels")

    def batches():
        epoch = 0
        while True:
            for b in loader.epoch(epoch):
                yield {k: b[k].to(device, non_blocking=True) for k in keys}
            epoch += 1

    feed = batches()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.bf16)

    def step() -> None:
        batch = next(feed)
        with autocast:
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    sync(device)
    warm_s = time.perf_counter() - t0
    profile = None
    if a.profile:
        prof = StepProfiler(f"1-{a.profile}", out.parent, device, write=False)
        for i in range(1, a.profile + 1):
            prof.before(i)
            step()
            prof.after(i)
        profile = prof.summary
    sync(device)
    t = time.perf_counter()
    times, last = [], t
    for _ in range(a.steps):
        step()
        if device.type == "cpu":  # per step on the CPU (nothing to wait for); the window's mean on a GPU
            now = time.perf_counter()
            times.append(now - last)
            last = now
    sync(device)
    mean = (time.perf_counter() - t) / a.steps
    return {"seconds_per_step": statistics.median(times) if times else mean, "mean_seconds_per_step": mean,
            "warmup_seconds": warm_s, "profile": profile, "peak_memory_gb": peak_gb(device),
            "rows_per_step": a.micro_batch_size, "seq_len": shards.seq_len, "head_share": 1.0,
            "optimizer": "torch.optim.AdamW(fused)", "device": str(device), "threads": torch.get_num_threads()}


def hf_trainer(a: StepPeersBenchConfig, out: Path) -> dict[str, Any]:
    """The HF Trainer on the same model and rows (bench.train.hf_trainer)."""
    from bench.train.hf_trainer import trainer_run

    return trainer_run(a.shards, a.tokenizer, a.model, a.micro_batch_size, a.steps, a.warmup, a.dropout, a.lr,
                       a.bf16, a.compile, a.profile, use_cpu=a.device == "cpu" or not torch.cuda.is_available(),
                       out_dir=out.parent)


def parse(argv: list[str] | None) -> tuple[StepPeersBenchConfig, argparse.Namespace]:
    ap = bench_parser("python -m bench.train.step_peers", __doc__, StepPeersBenchConfig)
    ap.add_argument("--out", help="the JSON file the result is written to (required)")
    return parse_bench(ap, StepPeersBenchConfig, argv, required=("--out",))


def main(argv: list[str] | None = None) -> int:
    a, ns = parse(argv)
    out = Path(ns.out)
    result = (plain if a.system == "plain" else hf_trainer)(a, out)
    result.update(system=a.system, compiled=a.compile, bf16=a.bf16, model=a.model, micro_batch_size=a.micro_batch_size,
                  tokens_per_s=result["rows_per_step"] * result["seq_len"] / result["seconds_per_step"]
                  if result["seconds_per_step"] > 0 else math.nan)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
