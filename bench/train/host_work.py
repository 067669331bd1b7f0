"""`bench train`'s host work: what a training step costs the host, measured on the CPU to predict a GPU step.

On a GPU a bert_base step's arithmetic takes ~20 ms and the host can take four times that launching it
(docs/BENCHMARKS.md "gpu"). Two figures per system predict that host time without a GPU:
- ops per optimizer step (training.pretraining.step_profile: operations dispatched, each one or more kernel launches on a
  GPU; compiled regions' kernels counted one each), on bert_base's real shape (12 layers, 12 heads, 768 wide,
  3,072 feed-forward; the bench data's vocabulary), 2 rows of 128 tokens;
- milliseconds per optimizer step on `bert_base_launch` (the same 12 layers and heads at width 24) over rows of
  32 tokens, where the arithmetic is negligible and the time is the host's (at 128 tokens the CPU's SDPA
  backward alone took 160 of the 265 ms: 16 times the attention work of 32 tokens, in both systems alike).
Systems, one process with every core, bf16 autocast in all four:
- `lmforge`: `lmforge pretrain` as its launch plan configures it for one GPU (training.pretraining.run_plan with one CUDA
  process: ZeRO-0, compiled regions, bf16 as autocast, lmforge's clipping), run on the CPU;
- `lmforge_eager`: the same with --no-compile;
- `plain`: the 30-line PyTorch loop (bench.train.step_peers: dense head, fused AdamW, clipping, LR schedule);
- `hf_trainer`: the HF Trainer with bf16=True (bench.train.hf_trainer).
Goal: lmforge at or below the plain loop on both figures. Figures go to the report and docs/benchmarks/train.json.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = ("lmforge", "lmforge_eager", "plain", "hf_trainer")
NAMES = {"lmforge": "lmforge, as planned for one GPU (ZeRO-0, compiled, bf16)", "lmforge_eager": "lmforge, eager",
         "plain": "plain PyTorch loop", "hf_trainer": "HF Trainer"}
SHAPES = {"ops": "bert_base", "launch": "bert_base_launch"}
"""What each figure is measured on: ops per step on bert_base's shape, host milliseconds on the launch-bound one."""
ROWS = 2
LAUNCH_SEQ = 32
"""Tokens a row for the host-milliseconds figure (its own shards, built from the same corpus and tokenizer)."""
WARMUP, PROFILED, TIMED, WINDOW = 5, 3, 30, 5
"""Steps run first (compilation included), profiled (the ops figure, bert_base shape), timed (the milliseconds
figure, launch-bound shape: the median over windows of WINDOW steps, or over single steps for the peers)."""


def with_launch_shards(data: dict[str, Path], steps) -> dict[str, Path]:
    """The bench data plus `shards_launch`: the same corpus and tokenizer packed into LAUNCH_SEQ-token rows, by
    bench.train.throughput's `Steps` (bench.kit.steps), kept while its command and the corpus and tokenizer are the same."""
    out = Path(data["shards"]).parent / f"shards-{LAUNCH_SEQ}"
    steps.run(f"shards-{LAUNCH_SEQ}", out, ["shards", "--corpus", str(data["corpus"]), "--tokenizer", str(data["tokenizer"]),
                                           "--output", str(out), "--seq-len", str(LAUNCH_SEQ), "--num-shards", "2",
                                           "--valid-per-mille", "50"])
    return {**data, "shards_launch": out}


def shards_for(data: dict[str, Path], shape: str) -> Path:
    return data["shards_launch"] if shape == "launch" else data["shards"]


def one_gpu_config(work: Path, data: dict[str, Path], shape: str, compiled: bool):
    """The PretrainConfig `lmforge pretrain` runs on one GPU by default (training.pretraining.run_plan for one CUDA process),
    with the CPU-sized batch: the same choices, forced, since this machine's own plan would differ. The ops shape
    runs WARMUP steps and profiles PROFILED; the launch shape runs WARMUP and times TIMED, unprofiled."""
    import dataclasses

    from training.pretraining.pretrain import PretrainConfig
    from training.pretraining.run_plan import resolve

    ops = shape == "ops"
    base = PretrainConfig(shards=str(shards_for(data, shape)), tokenizer=str(data["tokenizer"]), output=str(work),
                          model=SHAPES[shape], micro_batch_size=ROWS, bf16=True, dropout=0.0,
                          steps=WARMUP + (PROFILED if ops else TIMED), log_every=PROFILED if ops else WINDOW,
                          eval_batches=0, tensorboard=False,
                          profile_steps=f"{WARMUP + 1}-{WARMUP + PROFILED}" if ops else "")
    planned, plan = resolve(base, world=1, accelerator="cuda", device_bytes=80 * 10**9, params=110_000_000)
    assert plan.zero_stage == 0 and plan.compile and "autocast" in plan.precision, plan  # what a GPU gets
    return dataclasses.replace(planned, compile=compiled)


def window_median(records: list[dict[str, Any]], first: int, window: int) -> float:
    """Median seconds per step over the windows of `window` steps after step `first`, from metrics.jsonl's train
    records (each stamped with the run's elapsed seconds at its step's end)."""
    at = {r["step"]: r["elapsed_s"] for r in records if r.get("kind") == "train"}
    ends = sorted(s for s in at if s >= first)
    spans = [(at[b] - at[a]) / (b - a) for a, b in zip(ends, ends[1:])]
    if not spans:
        raise ValueError(f"no train records after step {first} (have {sorted(at)})")
    return statistics.median(spans)


def measure_lmforge(work: Path, data: dict[str, Path], shape: str, compiled: bool, log: Path) -> dict[str, Any]:
    from training.launch.torchrun import launch_pretrain
    from training.runtime.telemetry import METRICS_JSONL, read_metrics

    shutil.rmtree(work, ignore_errors=True)
    cfg = one_gpu_config(work, data, shape, compiled)
    with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        launch_pretrain(cfg, nproc=1, accelerator="cpu")
    metrics = json.loads((work / "metrics.json").read_text())
    shutil.rmtree(work / "checkpoints", ignore_errors=True)
    seconds = window_median(read_metrics(work / METRICS_JSONL), WARMUP, WINDOW) if shape == "launch" else None
    return {"seconds_per_step": seconds, "profile": metrics.get("profile"), "compile": metrics["compile"],
            "plan": metrics["plan"]}


def measure_peer(work: Path, data: dict[str, Path], system: str, shape: str, log: Path) -> dict[str, Any]:
    from training.runtime.accelerator import launch_plan

    work.mkdir(parents=True, exist_ok=True)
    out = work / "result.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "bench.train.step_peers", "--system", system, "--shards", str(shards_for(data, shape)),
            "--tokenizer", str(data["tokenizer"]), "--model", SHAPES[shape], "--micro-batch-size", str(ROWS),
            "--warmup", str(WARMUP), "--profile", str(PROFILED if shape == "ops" else 0),
            "--steps", str(1 if shape == "ops" else TIMED), "--bf16", "--dropout", "0",
            "--device", "cpu", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": str(launch_plan("cpu", 1).threads_per_process), "PYTHONUNBUFFERED": "1",
           "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    with open(log, "w") as f:
        rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    if rc != 0 or not out.exists():
        raise SystemExit(f"bench train: {system} host work on {shape} failed (exit {rc}); log {log}:\n"
                         + "".join(log.read_text().splitlines(True)[-30:]))
    return json.loads(out.read_text())


def measure(system: str, shape: str, work: Path, data: dict[str, Path], logs: Path) -> dict[str, Any]:
    """One system on one shape: its profile (ops per step) and steady seconds per step."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"host-{system}-{shape}.log"
    if system.startswith("lmforge"):
        return measure_lmforge(work / f"{system}-{shape}", data, shape, system == "lmforge", log)
    return measure_peer(work / f"{system}-{shape}", data, system, shape, log)


def figures(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{system: {ops_per_step, compute_ops_per_step, host_ms_per_step}} from `results[f"{system}|{shape}"]`."""
    out = {}
    for system in SYSTEMS:
        ops, launch = results.get(f"{system}|ops"), results.get(f"{system}|launch")
        if not ops or not launch:
            continue
        out[system] = {"ops_per_step": ops["profile"]["ops_per_step"],
                       "compute_ops_per_step": ops["profile"]["compute_ops_per_step"],
                       "host_ms_per_step": 1e3 * launch["seconds_per_step"]}
    return out


def judge(fig: dict[str, dict[str, float]]) -> str:
    lm, plain = fig.get("lmforge"), fig.get("plain")
    if not lm or not plain:
        return "not judged: lmforge or the plain loop was not measured"
    ok = lm["ops_per_step"] <= plain["ops_per_step"] and lm["host_ms_per_step"] <= plain["host_ms_per_step"]
    return (f"**{'MET' if ok else 'NOT MET'}**: {lm['ops_per_step']:,.0f} ops a step against the plain loop's "
            f"{plain['ops_per_step']:,.0f} ({lm['ops_per_step'] / plain['ops_per_step']:.2f}x), "
            f"{lm['host_ms_per_step']:.1f} ms against {plain['host_ms_per_step']:.1f} "
            f"({lm['host_ms_per_step'] / plain['host_ms_per_step']:.2f}x)")


def render(results: dict[str, dict[str, Any]]) -> str:
    fig = figures(results)
    lines = ["### Host work per optimizer step (predicts a GPU step's host time)", "",
             f"Ops per step on bert_base's shape ({ROWS} rows of 128 tokens), host milliseconds per step on the same "
             f"12 layers and 12 heads at width 24 (`bert_base_launch`, {ROWS} rows of {LAUNCH_SEQ} tokens), one "
             f"process with every core, bf16 autocast; {PROFILED} profiled steps after {WARMUP} of warm-up for the ops, "
             f"the median over {TIMED} timed steps after {WARMUP} of warm-up for the milliseconds (lmforge: windows "
             f"of {WINDOW} steps between its log records). An op is an operation the "
             "host dispatches (a GPU launches one or more kernels for each; a compiled region's kernels count one "
             "each; view and allocation ops are left out of \"computing\").", "",
             "| system | ops/step | computing ops/step | host ms/step | ops vs plain | ms vs plain |",
             "|---|---:|---:|---:|---:|---:|"]
    plain = fig.get("plain")
    for system, f in fig.items():
        rel = (f"{f['ops_per_step'] / plain['ops_per_step']:.2f}x", f"{f['host_ms_per_step'] / plain['host_ms_per_step']:.2f}x") \
            if plain else ("-", "-")
        lines.append(f"| {NAMES[system]} | {f['ops_per_step']:,.0f} | {f['compute_ops_per_step']:,.0f} | "
                     f"{f['host_ms_per_step']:.1f} | {rel[0]} | {rel[1]} |")
    lines += ["", f"Goal (CPU): lmforge as planned for one GPU at or below the plain loop on both figures: {judge(fig)}."]
    top = results.get("lmforge|ops", {}).get("profile", {}).get("top_ops")
    if top:
        lines += ["", "lmforge's most frequent ops a step (bert_base shape): "
                  + ", ".join(f"{name} {n:.0f}" for name, n in top[:8]) + "."]
    return "\n".join(lines)


def write_json(path: Path, results: dict[str, dict[str, Any]], measured: str) -> None:
    """docs/benchmarks/train.json: for each system its ops_per_step and host_ms_per_step (and the rest)."""
    from schemas.manifest import atomic_write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"measured_utc": measured, "shapes": {"ops_per_step": "bert_base", "host_ms_per_step": "bert_base_launch"},
           "rows": ROWS, "seq_len": 128, **figures(results)}
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())
