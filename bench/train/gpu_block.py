"""One compiled transformer block on the GPU, kernel by kernel, under inductor's tuning settings.

    python -m bench.train.gpu_block --out DIR                       # bert_base's block, 1,024 x 128 rows, every setting
    python -m bench.train.gpu_block --rows 64 --settings default    # the peers' micro batch

Why: in `lmforge bench gpu` (docs/BENCHMARKS.md "gpu") two of inductor's fused dropout + residual + LayerNorm
backward kernels took ~31 ms each of a 248 ms bert_base step at micro batch 1,024, ~2.6 ms a layer where the bytes
they move need a fraction of that at the H100's bandwidth. This times the block that holds them (bert_base's
BertLayer as lmforge trains it: train mode, its dropout 0.1, bf16 autocast, the bf16 residual stream of
training.models.residual, compiled with mode default as training.pretraining.compiled does) forward and backward,
under each inductor setting in SETTINGS, each in its own process (inductor's config is per process) with its own
code cache, and writes per setting: ms per forward + backward (wall time after a sync, median of the timed iterations), GPU
ms per kernel name (torch.profiler) and the generated code (`code-<setting>.tgz`, inductor's output_code files).
`eager` is the same block uncompiled. Runs on a GPU only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

SETTINGS = {
    "default": {},
    "coordinate_descent": {"coordinate_descent_tuning": True},
    "no_persistent_reductions": {"triton.persistent_reductions": False},
    "autotune_pointwise": {"max_autotune_pointwise": True},
    "eager": None,
}


def one(setting: str, rows: int, seq: int, iters: int) -> dict:
    import torch
    from torch._inductor import config as ind
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    from training.models.residual import bf16_residual

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1)
    cfg._attn_implementation = "sdpa"
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a smoke run of this script, not a measurement
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    block = BertLayer(cfg).to(dev).train()
    bf16_residual(block)
    if SETTINGS[setting] is not None:
        for key, value in SETTINGS[setting].items():
            obj, *path = [ind, *key.split(".")]
            for p in path[:-1]:
                obj = getattr(obj, p)
            setattr(obj, path[-1], value)
        block.compile(mode="default")
    x = torch.randn(rows, seq, 768, device=dev, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(rows, seq, 768, device=dev, dtype=torch.bfloat16)

    def step():
        with torch.autocast(dev, dtype=torch.bfloat16):
            out = block(x)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(g)

    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA if dev == "cuda" else ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            step()
        sync()
    kernels: dict[str, list[float]] = {}
    for e in prof.events():
        if str(getattr(e, "device_type", "")).rsplit(".", 1)[-1] == "CUDA":  # as training.pretraining.step_profile
            kernels.setdefault(e.name, []).append((e.time_range.end - e.time_range.start) / 1e3)
    top = sorted(((n, sum(v) / iters, len(v) // iters) for n, v in kernels.items()), key=lambda t: -t[1])
    return {"setting": setting, "rows": rows, "seq": seq, "ms_per_fwd_bwd": statistics.median(times),
            "ms_all": times, "kernels": [{"name": n, "ms": round(ms, 4), "per_iter": c} for n, ms, c in top[:25]],
            "peak_gb": torch.cuda.max_memory_allocated() / 1e9 if dev == "cuda" else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/gpu-block", help="where results.json and the code archives go")
    ap.add_argument("--rows", type=int, nargs="+", default=[1024], help="micro batch rows (default: %(default)s)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.one:
        print("RESULT " + json.dumps(one(a.one, a.rows[0], a.seq, a.iters)), flush=True)
        return 0
    results = []
    for rows in a.rows:
        for s in a.settings:
            cache = Path("/tmp/gpu-block-cache") / f"{s}-{rows}"
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
            argv2 = [sys.executable, "-m", "bench.train.gpu_block", "--one", s, "--rows", str(rows), "--seq", str(a.seq),
                     "--iters", str(a.iters), "--out", str(out)]
            p = subprocess.run(argv2, capture_output=True, text=True, env=env, timeout=400)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            r = json.loads(line[-1][7:]) if line else {"setting": s, "rows": rows,
                                                        "error": (p.stderr or p.stdout)[-1500:]}
            results.append(r)
            print(f"gpu_block: {s} rows {rows}: " + (f"{r['ms_per_fwd_bwd']:.2f} ms; top "
                  + "; ".join(f"{k['name'][:60]} {k['ms']:.2f}" for k in r["kernels"][:4]) if "error" not in r
                  else r["error"][-300:]), flush=True)
            if cache.exists():
                with tarfile.open(out / f"code-{s}-{rows}.tgz", "w:gz") as tar:
                    for f in cache.rglob("*.py"):
                        tar.add(f, arcname=str(f.relative_to(cache)))
            (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
