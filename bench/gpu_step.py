"""lmforge's pretraining step on one GPU against a plain PyTorch loop over the same model: where the GPU's time
goes. Not part of `make bench` (it needs a CUDA device); run on a GPU node from the checkout:

    OUT=runs/gpu-step python -m bench.gpu_step        # bert_base, 64 x 128 tokens, 30 steps per variant

Variants, each a real `lmforge pretrain` launch (training.launch) on shards built from the bundled VADER
sample (training.doctor_checks.build_tiny_data): ZeRO-2 with DeepSpeed's bf16 per-gradient overflow check on
(lmforge before 2026-11-26), ZeRO-2 as lmforge now configures it, and ZeRO-0. The control: the same
BertForMaskedLM config in a plain loop (bf16 autocast, torch's fused AdamW, no DeepSpeed, random tokens,
the MLM head at every position, so it computes more per token than lmforge's SparseMLM). Writes
$OUT/gpu_step.json; docs/BENCHMARKS.md "gpu" has the figures measured on an H100 and an H200. Without
CUDA it runs the tiny preset on the CPU (a smoke test of the script, not a measurement).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from transformers import BertForMaskedLM

from training import doctor_checks as probe
from training.launch import launch
from training.model import bert_config, preset
from training.pretrain import PretrainConfig


def variants(work: Path) -> list[tuple[str, dict]]:
    check_on = work / "check_on.json"
    check_on.write_text('{"bf16": {"check_grad_overflow": true}}')
    return [("zero2-check-on", {"deepspeed_config": str(check_on)}), ("zero2", {}), ("zero0", {"zero_stage": 0})]


def plain_loop(model: str, seq: int, micro: int, device: str, steps: int = 20) -> dict[str, float]:
    """Seconds per step and tokens/s of the control, after 5 warm-up steps."""
    cfg = bert_config(preset(model), 2000, 0, seq)
    cfg._attn_implementation = "sdpa"
    m = BertForMaskedLM(cfg).to(device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 2000, (micro, seq), generator=g).to(device)
    labels = torch.where(torch.rand(micro, seq, generator=g).to(device) < 0.15, ids, torch.full_like(ids, -100))
    mask = torch.ones_like(ids)

    def one() -> None:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = m(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        one()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        one()
    if device == "cuda":
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps
    return {"s_per_step": dt, "tok_s": micro * seq / dt}


def main() -> dict:
    out = Path(os.environ.get("OUT", "runs/gpu-step"))
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, seq, micro, steps = ("bert_base", 128, 64, 30) if device == "cuda" else ("tiny", 64, 8, 22)
    shards, tok = probe.build_tiny_data(work / "data", seq_len=seq)
    base = dict(shards=str(shards), tokenizer=str(tok), model=model, steps=steps, micro_batch_size=micro, lr=1e-3,
                log_every=10, eval_batches=0, dropout=0.0, tensorboard=False, seed=0)
    res: dict = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "model": model,
                 "micro_batch": micro, "seq_len": seq}
    for name, extra in variants(work):
        t0 = time.time()
        cfg = PretrainConfig(output=str(work / name), **base, **extra)
        try:
            launch("training.pretrain", cfg, cfg.output, nproc=1, accelerator=device)
            recs = [json.loads(line) for line in open(work / name / "metrics.jsonl") if '"train"' in line]
            res[name] = {"windows": [(r.get("step"), round(r["seconds_per_step"], 4), round(r["tokens_per_s"]))
                                     for r in recs], "wall": time.time() - t0}
        except Exception as e:  # noqa: BLE001  (a failed variant is a finding; the others still run)
            res[name] = {"error": str(e)[-2000:]}
        print(name, res[name], flush=True)
    res["plain_torch"] = plain_loop(model, seq, micro, device)
    print("plain_torch", res["plain_torch"], flush=True)
    (out / "gpu_step.json").write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
