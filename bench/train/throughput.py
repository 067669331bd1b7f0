"""Training step: lmforge's pretraining against the Hugging Face Trainer, tokens/s and model FLOPs utilisation.

    lmforge bench train [--presets tiny demo mini] [--nproc 1 2] [--steps 60] [--warmup 10] [--resume]
    lmforge bench train --presets tiny --steps 20 --work /tmp/bt --no-report      # a quick trial

One run, on this machine, the same rows, model and batch for both:
1. data: the bundled crawl (samples/crawl) through `lmforge corpus`, `lmforge tokenizer` (8,000
   WordPiece) and `lmforge shards` (128 tokens a row, MLM masks), with the demo's settings, once,
   under <work>/data (reused while its manifests are there);
2. for every preset (tiny, demo, mini = bert_mini) and process count (1: one process with every core
   as torch threads; 2: two processes, the cores shared out, training.runtime.accelerator's plan for both):
   - lmforge: `training.launch.torchrun.launch_pretrain` (torchrun, DeepSpeed ZeRO-2, SparseMLM), fp32, for
     --warmup + --steps steps, timed by its own telemetry (metrics.jsonl: every record stamps the end
     of its step) from the end of step --warmup to the end of the last, loading included;
   - HF Trainer (`bench.train.hf_trainer`): BertForMaskedLM of the same config on the same rows'
     unmasked ids with `DataCollatorForLanguageModeling(mlm_probability=0.15)`, the same per-process
     batch, in one process or under `torch.distributed.run` (DDP over gloo), timed from the end of step
     --warmup to the end of the last by a TrainerCallback;
3. tokens/s = steps x rows per step x seq_len / seconds (positions, padding included; the rows are
   packed, so nearly all are real), MFU against this CPU's peak (`training.models.flops`), the goals judged in
   `throughput_report`, the section written to docs/BENCHMARKS.md.
Then (--host-work, the default) each system's host work per step (bench.train.host_work): ops per optimizer step on
bert_base's shape and milliseconds per step on a launch-bound one, lmforge as its plan configures it for one GPU
(compiled, ZeRO-0, bf16 autocast) and eager against the plain PyTorch loop and the HF Trainer; the figures also go
to docs/benchmarks/train.json. About 6 minutes more.
Each finished measurement is kept in <work>/results.json under its settings (and a digest of training/
and the library versions); `--resume` skips those. Each records how much of the CPU other processes
took meanwhile (/proc/stat); the report flags the disturbed ones, and `--resume` measures them again:
run it with the machine to itself.
About 10-15 minutes on 2 cores at the defaults, most of it the mini preset (the data stages: 20 s, once).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.kit.steps import Steps, run_command
from bench.train import host_work
from bench.train.machine import machine_peak, matmul_ceiling
from bench.train.throughput_report import QUIET, TITLE, render
from common.config import opt
from flows.stages.runner import StageFailed
from schemas.manifest import MANIFEST_NAME, atomic_write_bytes
from training.models.flops import ModelShape, cpu_watch

ROOT = Path(__file__).resolve().parents[2]
PRESETS = {"tiny": "tiny", "demo": "demo", "mini": "bert_mini", "mini-d0": "bert_mini", "llama-tiny": "tiny",
           "llama-demo": "demo"}
"""Benchmark name -> training.models.model preset."""
OBJECTIVE = {"llama-tiny": "causal", "llama-demo": "causal"}
"""Benchmark name -> the shards' objective where it is not mlm: on causal shards the tiny and demo presets build the
Llama-style decoder (LlamaForCausalLM) that `lmforge run --objective causal` trains."""
CAUSAL_TOKENIZER = "byte_bpe"
"""The causal rows' tokenizer, as `lmforge run --objective causal` trains it (schemas.objectives)."""
DROPOUT = {"mini-d0": 0.0}
"""Diagnostic variants: the preset with its dropout overridden, in both systems alike. mini-d0 is mini without
dropout (the preset's 0.1), to show what drawing dropout masks costs; the goals are judged on the presets."""
SYSTEMS = ("lmforge", "hf_trainer")


@dataclass
class TrainBenchConfig:
    work: str = opt("runs/bench-train", "runs, logs and results.json")
    data: str = opt("", "corpus, tokenizer and shards, built once (default: <work>/data)")
    crawl: list[str] = opt([str(ROOT / "samples" / "crawl")], "crawl inputs for the corpus stage")
    vocab_size: int = opt(8000, "tokenizer stage")
    seq_len: int = opt(128, "tokens per row, shards stage")
    presets: list[str] = opt(list(PRESETS), "model presets (mini = bert_mini, 4 x 256; mini-d0 = the same without "
                             "dropout, a diagnostic outside the goals; llama-tiny and llama-demo = the Llama-style "
                             f"decoder of those sizes on causal shards); from {list(PRESETS)}")
    nproc: list[int] = opt([1, 2], "process counts; one process gets every core as threads")
    systems: list[str] = opt(list(SYSTEMS), f"from {list(SYSTEMS)}")
    micro_batch_size: int = opt(16, "rows per process per step, both systems (the demo's): 16 x 128 = 2,048 tokens "
                                "per process per step")
    steps: int = opt(60, "steps timed after the warm-up")
    warmup: int = opt(10, "steps run first and not timed")

    def __post_init__(self) -> None:
        bad = [p for p in self.presets if p not in PRESETS]
        if bad:
            raise ValueError(f"unknown presets {bad}; choose from {list(PRESETS)}")
        if [s for s in self.systems if s not in SYSTEMS]:
            raise ValueError(f"systems must be among {SYSTEMS}, got {self.systems}")
        if min(self.steps, self.warmup, self.micro_batch_size, *self.nproc) < 1:
            raise ValueError("--steps, --warmup, --micro-batch-size and --nproc must be >= 1")


def measurement_key(system: str, preset: str, nproc: int, cfg: TrainBenchConfig, data_id: str, code_id: str) -> str:
    """Everything a measurement depends on; a cached result counts only under the same key."""
    return (f"{system}|{preset}|nproc={nproc}|batch={cfg.micro_batch_size}|steps={cfg.steps}|warmup={cfg.warmup}"
            f"|data={data_id}|code={code_id}")


def code_id() -> str:
    """The training code and library versions: an edit to training/ or an upgrade measures again."""
    # every file under training/, named by its path there: a move between subpackages measures again too
    return code_digest([*(ROOT / "training").rglob("*.py"), *(ROOT / "bench" / "train" / n for n in (
        "hf_trainer.py", "step_peers.py", "host_work.py"))])


def code_digest(files: list[Path]) -> str:
    """12 hex digits over the torch, transformers and DeepSpeed versions and each file's path and bytes."""
    import deepspeed
    import torch
    import transformers

    h = hashlib.sha256(f"{torch.__version__} {transformers.__version__} {deepspeed.__version__}".encode())
    for f in sorted(files):
        h.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    return h.hexdigest()[:12]


# ---- data: the repo's own stages over the bundled crawl --------------------------------------------

def build_data(cfg: TrainBenchConfig, steps: Steps) -> dict[str, Path]:
    """The demo's corpus, tokenizer and shards settings (flows.presets.demo) over --crawl; each step is kept while
    its command and what it reads are the same (bench.kit.steps). Where a causal preset is asked for, also a
    byte-level BPE of the same size and causal shards of the same corpus (`causal_tokenizer`, `causal_shards`)."""
    d = Path(cfg.data or Path(cfg.work, "data"))
    paths = {k: d / k for k in ("corpus", "tokenizer", "shards")}
    steps.run("corpus", paths["corpus"], ["corpus", "--input", *cfg.crawl, "--output", str(paths["corpus"]),
                                          "--num-shards", "2", "--line-dedup"])
    steps.run("tokenizer", paths["tokenizer"], ["tokenizer", "--corpus", str(paths["corpus"]), "--output",
                                                str(paths["tokenizer"]), "--vocab-size", str(cfg.vocab_size)])
    steps.run("shards", paths["shards"], shards_argv(cfg, paths, paths["shards"]))
    if any(p in OBJECTIVE for p in cfg.presets):
        paths.update(causal_tokenizer=d / f"tokenizer-{CAUSAL_TOKENIZER}", causal_shards=d / "shards-causal")
        steps.run("causal tokenizer", paths["causal_tokenizer"],
                  ["tokenizer", "--corpus", str(paths["corpus"]), "--output", str(paths["causal_tokenizer"]),
                   "--vocab-size", str(cfg.vocab_size), "--model", CAUSAL_TOKENIZER])
        steps.run("causal shards", paths["causal_shards"],
                  shards_argv(cfg, {**paths, "tokenizer": paths["causal_tokenizer"]}, paths["causal_shards"])
                  + ["--mask-objective", "causal"])
    return paths


def inputs_of(data: dict[str, Path], preset: str) -> tuple[Path, Path]:
    """(shards, tokenizer) a preset trains on: the causal ones for a decoder's preset, else the MLM ones."""
    if preset in OBJECTIVE:
        return data["causal_shards"], data["causal_tokenizer"]
    return data["shards"], data["tokenizer"]


def shards_argv(cfg: TrainBenchConfig, paths: dict[str, Path], out: Path) -> list[str]:
    """The bench's shards step over `paths`' corpus and tokenizer into `out` (MLM masks unless more is added)."""
    return ["shards", "--corpus", str(paths["corpus"]), "--tokenizer", str(paths["tokenizer"]), "--output", str(out),
            "--seq-len", str(cfg.seq_len), "--num-shards", "2", "--valid-per-mille", "50"]


# ---- the two systems -------------------------------------------------------------------------------

def model_shape(preset: str, vocab: int, seq_len: int) -> ModelShape:
    from training.models.flops import model_shape as shape_of
    from training.models.model import preset as model_preset

    return shape_of(model_preset(PRESETS[preset]), vocab, seq_len, "causal_lm" if preset in OBJECTIVE else "masked_lm")


def vocab_and_len(shards_dir: Path) -> tuple[int, int]:
    from training.pretraining.data import ShardSet

    s = ShardSet.open(shards_dir)
    return s.vocab_size, s.seq_len


def steady_seconds(records: list[dict[str, Any]], warmup: int, steps: int) -> float:
    """Seconds from the end of step `warmup` to the end of step `warmup + steps`, from the `train`
    records of a metrics.jsonl (each stamped with the run's `elapsed_s` when its step ended)."""
    at = {r["step"]: r["elapsed_s"] for r in records if r.get("kind") == "train"}
    if warmup not in at or warmup + steps not in at:
        raise ValueError(f"metrics.jsonl has train records at steps {sorted(at)}, not at {warmup} and {warmup + steps}")
    return at[warmup + steps] - at[warmup]


def measure_lmforge(cfg: TrainBenchConfig, data: dict[str, Path], preset: str, nproc: int) -> dict[str, Any]:
    """One `launch_pretrain` run of warmup + steps steps, timed from its own per-step telemetry."""
    import math

    from training.launch.torchrun import launch_pretrain
    from training.pretraining.pretrain import PretrainConfig
    from training.runtime.accelerator import launch_plan
    from training.runtime.telemetry import METRICS_JSONL, read_metrics

    out = Path(cfg.work, "lmforge", f"{preset}-{nproc}p")
    shutil.rmtree(out, ignore_errors=True)
    # a record at the end of step `warmup` and at the end of the last step (the defaults: every 10th step)
    shards, tokenizer = inputs_of(data, preset)
    pc = PretrainConfig(shards=str(shards), tokenizer=str(tokenizer), output=str(out),
                        model=PRESETS[preset], dropout=DROPOUT.get(preset, -1.0), steps=cfg.warmup + cfg.steps,
                        micro_batch_size=cfg.micro_batch_size,
                        eval_batches=0, tensorboard=False, log_every=math.gcd(cfg.warmup, cfg.steps))
    log = Path(cfg.work, "logs", f"lmforge-{preset}-{nproc}p.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            launch_pretrain(pc, nproc=nproc, accelerator="cpu")
    except RuntimeError as e:
        raise SystemExit(f"bench train: lmforge {preset} on {nproc} processes failed; log {log}\n{e}") from None
    metrics = json.loads((out / "metrics.json").read_text())
    counts = json.loads((out / MANIFEST_NAME).read_text())["counts"]
    seconds = steady_seconds(read_metrics(out / METRICS_JSONL), cfg.warmup, cfg.steps)
    for sub in ("checkpoints", "hf"):  # the weights are not what is measured; mini's checkpoint is ~150 MB
        shutil.rmtree(out / sub, ignore_errors=True)
    # the MLM head runs at masked positions only: their share of all positions the run trained on (a decoder's head
    # runs at every position)
    head_share = 1.0 if preset in OBJECTIVE else counts["masked_tokens"] / (counts["sequences"] * metrics["seq_len"])
    return {"seconds": seconds, "steps": cfg.steps, "rows_per_step": metrics["global_batch"],
            "seq_len": metrics["seq_len"], "threads": launch_plan("cpu", nproc).threads_per_process,
            "head_share": head_share, "num_parameters": metrics["num_parameters"], "fit_seconds": metrics["fit_seconds"]}


def measure_hf(cfg: TrainBenchConfig, data: dict[str, Path], preset: str, nproc: int) -> dict[str, Any]:
    from training.launch.torchrun import free_port
    from training.runtime.accelerator import launch_plan

    threads = launch_plan("cpu", nproc).threads_per_process
    out = Path(cfg.work, "hf_trainer", f"{preset}-{nproc}p.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    shards, tokenizer = inputs_of(data, preset)
    args = ["-m", "bench.train.hf_trainer", "--shards", str(shards), "--tokenizer", str(tokenizer),
            "--model", PRESETS[preset], "--micro-batch-size", str(cfg.micro_batch_size), "--steps", str(cfg.steps),
            "--warmup", str(cfg.warmup), "--out", str(out), "--dropout", str(DROPOUT.get(preset, -1.0))]
    if nproc > 1:
        args = ["-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}", *args]
    name = f"hf_trainer-{preset}-{nproc}p"
    env = {"OMP_NUM_THREADS": str(threads), "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    try:
        run_command(name, [sys.executable, *args], Path(cfg.work, "logs", f"{name}.log"), env=env)
    except StageFailed as e:
        raise SystemExit(f"bench train: HF Trainer {preset} on {nproc} processes: {e}") from None
    if not out.exists():
        raise SystemExit(f"bench train: HF Trainer {preset} on {nproc} processes wrote no {out}")
    r = json.loads(out.read_text())
    return {"seconds": r["seconds"], "steps": r["steps"], "rows_per_step": r["micro_batch_size"] * r["world_size"],
            "seq_len": r["seq_len"], "threads": r["threads"], "head_share": 1.0, "num_parameters": r["num_parameters"],
            "optimizer": r["optimizer"]}


# ---- entry point -----------------------------------------------------------------------------------

def load_results(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"measurements": {}}


def parse(argv: list[str] | None) -> tuple[TrainBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench train", __doc__, TrainBenchConfig)
    ap.add_argument("--host-work", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure each system's host work per step: ops on bert_base's shape and milliseconds on "
                         "a launch-bound one, lmforge as planned for one GPU against the plain PyTorch loop and the HF "
                         "Trainer (bench.train.host_work; ~6 minutes) (default: on)")
    ap.add_argument("--resume", action="store_true", help="keep the measurements <work>/results.json has for these "
                    "settings, except those during which other processes took more than 5%% of the CPU")
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: %(default)s)")
    ap.add_argument("--no-report", action="store_true", help="measure and print only (trials): docs/ stays as it is")
    ap.add_argument("--render", metavar="JSON", default=None, help="write the report from a run's saved report data")
    return parse_bench(ap, TrainBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    cfg, a = parse(argv)
    if a.render:
        write_section(Path(a.out), json.loads(Path(a.render).read_text()))
        return 0
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    t0 = time.time()
    steps = Steps("train", Path(cfg.work, "logs"))
    data = build_data(cfg, steps)
    from training.pretraining.data import ShardSet

    shards = ShardSet.open(data["shards"])
    data_id = hashlib.sha256(b"".join((data[k] / MANIFEST_NAME).read_bytes() for k in ("shards", "causal_shards")
                                      if k in data)).hexdigest()[:12]
    code = code_id()
    peak = machine_peak()
    ceiling = matmul_ceiling(peak.cores)
    print(f"train: peak {peak.describe()}; a {ceiling['n']}^2 matmul: {ceiling['flops'] / 1e9:,.1f} GFLOP/s", flush=True)
    results_path = Path(cfg.work, "results.json")
    results = load_results(results_path)
    rows = measure_rows(cfg, data, shards, results, results_path, a.resume, data_id, code)
    host = measure_host(cfg, data, steps, results, results_path, a.resume, data_id, code) if a.host_work else {}
    report = {"rows": rows, "host": host, "peak": {**asdict(peak), "flops": peak.flops, "text": peak.describe()}, "matmul": ceiling,
              "settings": {**asdict(cfg), "data_id": data_id, "code_id": code, "vocab_size": shards.vocab_size},
              "wall_seconds": time.time() - t0, "measured_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    atomic_write_bytes(Path(cfg.work, "report.json"), (json.dumps(report, indent=1) + "\n").encode())
    print(full_text(report))
    if not a.no_report:
        write_section(Path(a.out), report)
        if host:
            host_work.write_json(Path(a.out).parent / "benchmarks" / "train.json", host, report["measured_utc"])
    print(f"train: report data in {Path(cfg.work, 'report.json')} ({time.time() - t0:.0f} s)", flush=True)
    return 0


def measure_rows(cfg: TrainBenchConfig, data: dict[str, Path], shards, results: dict[str, Any], results_path: Path,
                 resume: bool, data_id: str, code: str) -> list[dict[str, Any]]:
    """Each system on each preset and process count, kept in results.json under its measurement_key."""
    plan = [(s, p, n) for p in cfg.presets for n in cfg.nproc for s in cfg.systems]
    rows = []
    for i, (system, preset, nproc) in enumerate(plan, 1):
        key = measurement_key(system, preset, nproc, cfg, data_id, code)
        label = f"[{i}/{len(plan)}] {system} {preset} x{nproc} proc"
        kept = results["measurements"].get(key) if resume else None
        if kept and kept.get("foreign_share", 0.0) <= QUIET:
            r = kept
            print(f"train: {label}: done earlier, {r['tokens_per_s']:,.0f} tokens/s", flush=True)
        else:
            why = f" (earlier other processes took {kept['foreign_share']:.0%} of the CPU: again)" if kept else ""
            print(f"train: {label} ...{why}", flush=True)
            t = time.time()
            with cpu_watch() as busy:
                r = (measure_lmforge if system == "lmforge" else measure_hf)(cfg, data, preset, nproc)
            r.update(**busy, system=system, preset=preset, model=PRESETS[preset], nproc=nproc, wall_seconds=time.time() - t,
                     tokens_per_s=r["steps"] * r["rows_per_step"] * r["seq_len"] / r["seconds"],
                     shape=asdict(model_shape(preset, *vocab_and_len(inputs_of(data, preset)[0]))),
                     measured_utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
            results["measurements"][key] = r
            atomic_write_bytes(results_path, (json.dumps(results, indent=1) + "\n").encode())
            other = f", other processes took {r['foreign_share']:.0%} of the CPU" if "foreign_share" in r else ""
            print(f"train: {label}: {r['tokens_per_s']:,.0f} tokens/s ({r['seconds'] / r['steps']:.3f} s/step, "
                  f"{r['wall_seconds']:.0f} s wall{other})", flush=True)
        rows.append(r)
    return rows


def measure_host(cfg: TrainBenchConfig, data: dict[str, Path], steps: Steps, results: dict[str, Any], results_path: Path, resume: bool,
                 data_id: str, code: str) -> dict[str, Any]:
    """bench.train.host_work's measurements (each system on each shape), kept in results.json like the others."""
    data = host_work.with_launch_shards(data, steps)
    kept = results.setdefault("host", {})
    host = {}
    plan = [(system, shape) for shape in host_work.SHAPES for system in host_work.SYSTEMS]
    for i, (system, shape) in enumerate(plan, 1):
        key = f"{system}|{shape}|data={data_id}|code={code}"
        label = f"[host {i}/{len(plan)}] {system} on the {shape} shape"
        r = kept.get(key) if resume else None
        if r and r.get("foreign_share", 0.0) <= QUIET:
            print(f"train: {label}: done earlier", flush=True)
        else:
            print(f"train: {label} ...", flush=True)
            t = time.time()
            with cpu_watch() as busy:
                r = host_work.measure(system, shape, Path(cfg.work, "host"), data, Path(cfg.work, "logs"))
            r.update(**busy, wall_seconds=time.time() - t)
            kept[key] = r
            atomic_write_bytes(results_path, (json.dumps(results, indent=1) + "\n").encode())
        host[f"{system}|{shape}"] = r
    return host


def write_section(out: Path, report: dict[str, Any]) -> None:
    from bench.kit.report import write_section as write

    write(out, TITLE, full_text(report), report, measured=report.get("measured_utc"))


def full_text(report: dict[str, Any]) -> str:
    """The section: the presets' table and goals (bench.train.throughput_report), then the host work (bench.train.host_work)."""
    text = render(report)
    return text + "\n" + host_work.render(report["host"]) + "\n" if report.get("host") else text


if __name__ == "__main__":
    raise SystemExit(main())
