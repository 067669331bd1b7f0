"""Evaluate a run: held-out MLM loss and perplexity of teacher and student, the fine-tune's test
scores next to its controls (random-init twin, majority class, TF-IDF + logistic regression),
parameter counts and CPU inference throughput.

Run alone:  lmforge evaluate --run runs/demo --output runs/demo/eval

MLM loss is measured on the valid split with mask variant 0 for every row, so teacher and
student see exactly the same masked tokens. Throughput is forward passes over valid rows at
batch 32 on this process's torch threads, after one warm-up batch.
Writes report.json and report.md (the table also goes to the Prefect UI as an artifact).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.config import config_to_dict, opt, parse_config, require
from schemas.manifest import (
    Manifest,
    atomic_write_bytes,
    atomic_write_json,
    describe_outputs,
    input_ref,
    read_manifest,
    write_manifest,
)


@dataclass(kw_only=True)
class EvaluateConfig:
    run: str = opt(help="run directory holding shards/, pretrain/, finetune/ and distill/")
    output: str = opt(help="stage directory to write report.json, report.md and manifest.json to")
    batch_size: int = opt(32, "sequences per forward pass")
    max_batches: int = opt(0, "evaluate at most this many valid batches (0 = all)")
    threads: int = opt(2, "torch CPU threads")

    def __post_init__(self) -> None:
        require(self.batch_size >= 1 and self.max_batches >= 0, "batch_size must be >= 1 and max_batches >= 0")


def mlm_loss(model, table, batch_size: int, max_batches: int) -> tuple[float, int]:
    """Mean cross-entropy over all masked tokens of the valid split (variant 0), and the token count."""
    import numpy as np
    import torch

    from training.data import build_batch

    model.eval()
    total, count = 0.0, 0
    n_batches = math.ceil(table.num_rows / batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    with torch.no_grad():
        for b in range(n_batches):
            rows = np.arange(b * batch_size, min((b + 1) * batch_size, table.num_rows))
            batch = build_batch(table, rows, variant=0)
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            labels = batch["labels"]
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1),
                                                     ignore_index=-100, reduction="sum")
            total += float(loss)
            count += int((labels != -100).sum())
    return total / max(1, count), count


def throughput(model, table, batch_size: int, batches: int = 5) -> float:
    """Sequences per second for forward passes (after one warm-up batch)."""
    import numpy as np
    import torch

    from training.data import build_batch

    rows = np.arange(min(batch_size, table.num_rows))
    batch = build_batch(table, rows, variant=0)
    with torch.no_grad():
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        t0 = time.perf_counter()
        for _ in range(batches):
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return len(rows) * batches / (time.perf_counter() - t0)


def model_entry(hf_dir: Path, table, cfg: EvaluateConfig) -> dict[str, Any]:
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(hf_dir)
    loss, tokens = mlm_loss(model, table, cfg.batch_size, cfg.max_batches)
    return {"path": str(hf_dir), "params": sum(p.numel() for p in model.parameters()),
            "layers": model.config.num_hidden_layers, "hidden": model.config.hidden_size,
            "mlm_loss": round(loss, 4), "perplexity": round(math.exp(min(loss, 50)), 2), "masked_tokens": tokens,
            "sequences_per_second": round(throughput(model, table, cfg.batch_size), 1)}


def render_markdown(report: dict[str, Any]) -> str:
    t, s, f = report["teacher"], report["student"], report["finetune"]
    lines = [
        f"# lmforge evaluation: {report['run']}",
        "",
        "| model | layers | params | held-out MLM loss | perplexity | seq/s (CPU, batch 32) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| teacher | {t['layers']} | {t['params']:,} | {t['mlm_loss']:.3f} | {t['perplexity']:.1f} | {t['sequences_per_second']:.1f} |",
        f"| student | {s['layers']} | {s['params']:,} | {s['mlm_loss']:.3f} | {s['perplexity']:.1f} | {s['sequences_per_second']:.1f} |",
        "",
        f"Student/teacher: {s['params'] / t['params']:.2f}x parameters, {s['sequences_per_second'] / max(t['sequences_per_second'], 1e-9):.2f}x throughput, "
        f"MLM loss {s['mlm_loss'] - t['mlm_loss']:+.3f}.",
        "",
        f"Fine-tune ({f['task']}, {f['test_examples']:,} held-out test examples; mean ± sd over seeds; "
        f"`scratch` is the same architecture from a random start, the controls run on the same split):",
        "",
        f["table"],
        "",
        f"Pretraining: training MLM loss {_fmt(report['pretrain'].get('first_loss'))} -> {_fmt(report['pretrain'].get('last_loss'))} "
        f"over {report['pretrain'].get('steps')} steps.",
        f"Held-out masked tokens: {t['masked_tokens']:,}.",
    ]
    return "\n".join(lines) + "\n"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run(cfg: EvaluateConfig) -> Path:
    import torch

    from schemas.finetune import FinetuneMetrics
    from schemas.shards import MLM_OBJECTIVES
    from training.data import ShardSet
    from training.finetune import summary_table

    t0 = time.time()
    torch.set_num_threads(cfg.threads)
    run_dir, out = Path(cfg.run), Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    stages = {s: run_dir / s for s in ("shards", "pretrain", "finetune", "distill")}
    for d in stages.values():
        read_manifest(d)  # every upstream stage must have finished
    shards = ShardSet.open(stages["shards"])
    shards.require_objective(MLM_OBJECTIVES, "evaluate (masked-LM loss)")
    table = shards.read("valid")
    ft = FinetuneMetrics.read(stages["finetune"] / "metrics.json")
    pre = json.loads((stages["pretrain"] / "metrics.json").read_text())
    report = {
        "run": run_dir.name,
        "teacher": model_entry(stages["pretrain"] / "hf", table, cfg),
        "student": model_entry(stages["distill"] / "hf", table, cfg),
        "finetune": {"task": ft.task, "primary_metric": ft.primary_metric, "test_examples": ft.counts["test_examples"],
                     "train_examples": ft.counts["train_examples"], "table": summary_table(ft),
                     "test": {row: ft.mean(row) for row in ft.rows}},
        "pretrain": {"first_loss": pre.get("first_loss"), "last_loss": pre.get("last_loss"), "steps": pre.get("steps")},
        "valid_rows": table.num_rows,
    }
    atomic_write_json(out / "report.json", report)
    atomic_write_bytes(out / "report.md", render_markdown(report).encode())
    write_manifest(out, Manifest(
        stage="evaluate", config=config_to_dict(cfg), inputs=[input_ref(d) for d in stages.values()],
        counts={"valid_rows": table.num_rows, "masked_tokens": report["teacher"]["masked_tokens"]},
        outputs=describe_outputs(out, [out / "report.json", out / "report.md"]),
        wall_seconds=round(time.time() - t0, 2)))
    print(render_markdown(report), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    run(parse_config(EvaluateConfig, "lmforge evaluate", __doc__, argv))


if __name__ == "__main__":
    main()
