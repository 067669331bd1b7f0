"""lmforge's pretraining step on one GPU against a plain PyTorch loop and the HF Trainer, in one call of minutes.

    lmforge bench gpu --corpus runs/bench-gpu-corpus          # on a GPU node: bert_base, 128 tokens, ~6 minutes
    lmforge bench gpu --corpus DIR --work /tmp/bg             # on a CPU: a smoke run of every variant, seconds

Data: a corpus stage's output (`lmforge corpus` over samples/crawl; the GPU machines here have no Beam, so it
is built beforehand and carried: infra/gpu/README.md), then on this machine the tokenizer stage (a 30,522-piece
WordPiece, BERT's size; every piece seen once counts) and the shards stage (128 tokens a row, MLM masks).
Variants, one process each, the same rows and model (bert_base: 12 x 768, its dropout 0.1):
1. `lmforge`: `lmforge pretrain` as a user gets it on a GPU: micro batch auto (the largest that fits), compiled
   regions with CUDA graphs (--compile-mode auto), ZeRO-0, bf16 as autocast with a bf16 residual stream
   (training.pretraining.run_plan, training.pretraining.compiled, training.models.residual);
   inductor's kernels tuned by coordinate descent (--kernel-tuning auto); `lmforge_heuristic`: the same with
   --kernel-tuning heuristic; `lmforge_fp32_residual`: the same with --fp32-residual (autocast's fp32 stream);
2. `lmforge_mb64`: the same at micro batch 64, the peers' batch;
3. `plain` and `plain_compiled`: the 30-line loop (bench.train.step_peers), eager and with torch.compile(model);
4. `hf_trainer` and `hf_trainer_compiled`: the HF Trainer with bf16=True, eager and with torch_compile=True;
5. `lmforge_mb64_no_graphs` and `lmforge_no_graphs`: lmforge at micro batch 64 and auto with --compile-mode
   default (no CUDA graphs, which replay each compiled region's kernels with one launch): what the graphs buy.
   Last, as they may not fit the call's minutes.
Each: warm-up steps (compilation included), a profiled window (training.pretraining.step_profile: kernels per step, the
GPU's busy share), a timed window; tokens/s = rows x 128 / seconds per step; MFU against the GPU's dense bf16 peak
(training.doctor.node.GPU_PEAKS) by the project's FLOP count (training.models.flops: lmforge's head at masked positions only,
the peers' at every position); peak memory. A variant that fails is recorded and the others still run; the
run stops starting variants when --minutes is nearly spent. Writes docs/BENCHMARKS.md's section and
docs/benchmarks/gpu.json on a GPU; on a CPU it runs the tiny preset for a few steps, eager, and writes only
<work>/gpu.json (a test of this script, not a measurement).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import device_facts
from common.config import opt, require

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("lmforge", "lmforge_heuristic", "lmforge_fp32_residual", "lmforge_mb64", "plain", "plain_compiled", "hf_trainer", "hf_trainer_compiled",
            "lmforge_mb64_no_graphs", "lmforge_no_graphs")
PEERS = ("plain", "plain_compiled", "hf_trainer", "hf_trainer_compiled")


GPU_MODELS = {"mlm": ("bert_base", 30522), "causal": ("smollm_135m", 49152)}
"""The GPU run's model and vocabulary per objective: BERT-base's, and SmolLM-135M's (the Llama-style decoder)."""
REPORT_FILES = {"mlm": "gpu.json", "causal": "gpu-causal.json"}
"""docs/benchmarks/ file per objective."""


@dataclass
class GpuBenchConfig:
    corpus: str = opt(str(ROOT / "runs" / "bench-gpu-corpus"), "a corpus stage's output")
    work: str = opt("runs/bench-gpu", "data, runs and logs")
    variants: list[str] = opt(list(VARIANTS), f"variants to run, in this order, from {list(VARIANTS)}")
    minutes: float = opt(7.5, "start no variant after this many minutes of the run; stop a peer still running then "
                         "(7.5: one device call of 8 minutes)")
    objective: str = opt("mlm", "mlm: bert_base on a 30,522-piece WordPiece and MLM shards; causal: the Llama-style "
                                "decoder of SmolLM-135M's sizes (smollm_135m) on a 49,152-piece byte-level BPE and causal "
                                "shards, the model `lmforge run --objective causal` trains (its own section of "
                                "docs/BENCHMARKS.md)", choices=tuple(GPU_MODELS))

    def __post_init__(self) -> None:
        bad = [v for v in self.variants if v not in VARIANTS]
        require(bool(self.variants) and not bad, f"--variants: unknown {', '.join(bad) or '(none named)'}; choose from "
                f"{', '.join(VARIANTS)}")


@dataclass(frozen=True)
class Sizes:
    """What one run measures: the full GPU run, or the CPU smoke run."""

    model: str
    seq_len: int
    vocab: int
    peer_batch: int
    warmup: int
    profiled: int
    timed: int
    window: int
    """lmforge's log records every `window` steps; its time is the median window after the warm-up."""
    objective: str = "mlm"
    """The shards' objective: mlm (a BERT) or causal (the Llama-style decoder)."""

    @property
    def tokenizer(self) -> str:
        """The tokenizer family its objective trains on (schemas.objectives; WordPiece for mlm)."""
        from schemas.objectives import objective

        return objective(self.objective).tokenizer or "wordpiece"

    @property
    def decoder(self) -> bool:
        """Its objective trains a decoder: the head runs at every position (training.models.model_kinds)."""
        from training.models.model_kinds import predicts_next

        return predicts_next(self.objective)

    @classmethod
    def gpu(cls, objective: str = "mlm") -> Sizes:
        model, vocab = GPU_MODELS[objective]
        return cls(model, 128, vocab, 64, warmup=10, profiled=3, timed=20, window=5, objective=objective)

    @classmethod
    def smoke(cls, objective: str = "mlm") -> Sizes:
        return cls("tiny", 32, 2000, 4, warmup=2, profiled=2, timed=4, window=2, objective=objective)


def build_data(corpus: Path, work: Path, sizes: Sizes) -> dict[str, Path]:
    """Tokenizer and shards stages (no Beam) over a corpus stage's output; reused while their manifests stand."""
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.stage import ShardsConfig, run_local
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer

    if not (corpus / "manifest.json").exists():
        raise SystemExit(f"bench gpu: --corpus {corpus}: not a finished corpus stage (no manifest.json); build one "
                         "with `lmforge corpus --input samples/crawl --output DIR` (infra/gpu/README.md)")
    tok = work / f"tokenizer-{sizes.tokenizer}-{sizes.vocab}"
    shards = work / f"shards-{sizes.objective}-{sizes.vocab}-{sizes.seq_len}"
    if not (tok / "manifest.json").exists():
        run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(tok), model=sizes.tokenizer, vocab_size=sizes.vocab,
                                      min_frequency=1))
    if not (shards / "manifest.json").exists():
        run_local(ShardsConfig(corpus=str(corpus), tokenizer=str(tok), output=str(shards), seq_len=sizes.seq_len,
                               valid_per_mille=20, mask=MaskConfig(objective=sizes.objective, num_variants=2)))
    return {"corpus": corpus, "tokenizer": tok, "shards": shards}


def pretrain_variant(name: str, data: dict[str, Path], work: Path, sizes: Sizes, device: str, log: Path) -> dict[str, Any]:
    """`lmforge pretrain` with its defaults (micro batch 64 for lmforge_mb64; eager on the CPU smoke run)."""
    from training.launch.torchrun import launch_pretrain
    from training.pretraining.pretrain import PretrainConfig
    from training.runtime.telemetry import METRICS_JSONL, read_metrics

    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    first = sizes.warmup + sizes.profiled  # a log record falls here: windows after it are timed
    auto = name in ("lmforge", "lmforge_heuristic", "lmforge_fp32_residual", "lmforge_no_graphs")
    extra: dict[str, Any] = {} if auto else {"micro_batch_size": sizes.peer_batch}
    if name == "lmforge_fp32_residual":
        extra["fp32_residual"] = True
    if name == "lmforge_heuristic":
        extra["kernel_tuning"] = "heuristic"
    if name.endswith("_no_graphs"):
        extra["compile_mode"] = "default"
    if device == "cpu":
        extra.update(micro_batch_size=sizes.peer_batch, compile=False)
    cfg = PretrainConfig(shards=str(data["shards"]), tokenizer=str(data["tokenizer"]), output=str(out),
                         model=sizes.model, steps=first + sizes.timed, log_every=sizes.window, eval_batches=0,
                         tensorboard=False, profile_steps=f"{sizes.warmup + 1}-{first}", **extra)
    with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        launch_pretrain(cfg, nproc=1, accelerator="auto" if device == "cuda" else "cpu")
    metrics = json.loads((out / "metrics.json").read_text())
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    at = {r["step"]: r["elapsed_s"] for r in read_metrics(out / METRICS_JSONL) if r.get("kind") == "train"}
    ends = sorted(s for s in at if s >= first)
    seconds = statistics.median((at[b] - at[a]) / (b - a) for a, b in zip(ends, ends[1:]))
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    return {"seconds_per_step": seconds, "rows_per_step": metrics["global_batch"], "seq_len": metrics["seq_len"],
            "micro_batch_size": metrics["micro_batch_size"], "grad_accum": metrics["grad_accum"],
            # the MLM head at masked positions only; a decoder's at every one
            "head_share": 1.0 if sizes.decoder else
            counts["masked_tokens"] / (counts["sequences"] * metrics["seq_len"]),
            "profile": metrics.get("profile"), "peak_memory_gb": metrics.get("peak_gpu_memory_gb"),
            "compile": metrics.get("compile"), "plan": metrics.get("plan"), "residual": metrics.get("residual"),
            "loss_curve": [c["loss"] for c in metrics.get("loss_curve", [])],
            "micro_batch_probe": metrics.get("micro_batch_probe")}


def run_peer(name: str, data: dict[str, Path], work: Path, sizes: Sizes, device: str, log: Path,
             timeout: float) -> dict[str, Any]:
    out = work / name / "result.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    system = name.removesuffix("_compiled")
    argv = [sys.executable, "-m", "bench.train.step_peers", "--system", system, "--shards", str(data["shards"]),
            "--tokenizer", str(data["tokenizer"]), "--model", sizes.model, "--micro-batch-size", str(sizes.peer_batch),
            "--warmup", str(sizes.warmup), "--profile", str(sizes.profiled), "--steps", str(sizes.timed),
            "--out", str(out), *(["--bf16"] if device == "cuda" else ["--device", "cpu"]),
            *(["--compile"] if name.endswith("_compiled") and device == "cuda" else [])]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    with open(log, "w") as f:
        try:
            rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"stopped after {timeout:.0f} s (the run's --minutes)") from None
    if rc != 0 or not out.exists():
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-3:]).strip()
        raise RuntimeError(f"exit {rc}: {tail[-400:]}")
    return json.loads(out.read_text())


def parse(argv: list[str] | None) -> tuple[GpuBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench gpu", __doc__, GpuBenchConfig)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update on a GPU (default: %(default)s)")
    ap.add_argument("--no-report", action="store_true", help="measure and print only: docs/ stays as it is")
    return parse_bench(ap, GpuBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    cfg, a = parse(argv)
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = Sizes.gpu(cfg.objective) if device == "cuda" else Sizes.smoke(cfg.objective)
    work, t0 = Path(cfg.work), time.time()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    deadline = t0 + 60 * cfg.minutes
    data = build_data(Path(cfg.corpus), work, sizes)
    print(f"gpu: data ready in {time.time() - t0:.0f} s: {data['shards']}", flush=True)
    results: dict[str, Any] = {}
    for name in cfg.variants:
        left = deadline - time.time()
        if left < 30:
            results[name] = {"error": f"not run: the run's {cfg.minutes:g} minutes were spent"}
            print(f"gpu: {name}: {results[name]['error']}", flush=True)
            continue
        log, t = work / "logs" / f"{name}.log", time.time()
        try:
            r = (pretrain_variant(name, data, work, sizes, device, log) if name.startswith("lmforge")
                 else run_peer(name, data, work, sizes, device, log, left))
            r["wall_seconds"] = time.time() - t
        except Exception as e:  # noqa: BLE001  (a failed variant is a finding; the others still run)
            r = {"error": f"{type(e).__name__}: {str(e)[-600:]}", "log": str(log), "wall_seconds": time.time() - t}
        results[name] = r
        print(f"gpu: {name}: " + (r["error"] if "error" in r else
                                  f"{r['seconds_per_step'] * 1e3:.1f} ms/step, micro batch {r.get('micro_batch_size')}")
              + f" ({r['wall_seconds']:.0f} s)", flush=True)
    from bench.train.gpu_report import gpu_json, render, title

    report = {"machine": device_facts(), "sizes": asdict(sizes), "results": results, "wall_seconds": time.time() - t0,
              "measured_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    text = render(report)
    print(text)
    (work / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (work / "gpu.json").write_text(json.dumps(gpu_json(report), indent=1) + "\n")
    if device == "cuda" and not a.no_report:
        from bench.kit.report import write_section
        from schemas.manifest import atomic_write_bytes

        write_section(Path(a.out), title(sizes.objective), text, report, measured=report["measured_utc"])
        atomic_write_bytes(Path(a.out).parent / "benchmarks" / REPORT_FILES[sizes.objective],
                           (json.dumps(gpu_json(report), indent=1) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
