"""bench learn's transfer check (`--transfer`): does the pretraining of each budget pay on a labelled task?

Each lmforge MLM model bench learn trains (one per preset, budget and seed) is fine-tuned on VADER's sentences
(`lmforge labeled prepare vader`: 3,000 train sentences, 64 tokens, 3 epochs, peak rate 3e-4, batch 32; the transfer
and ablation benches' recipe), beside its random-init twin with the same fine-tuning seed, so the two are paired by
seed; the majority class and TF-IDF + LR stand beside them. The verdict is the card's sentence
(training.evaluation.card_summary.verdict), and each row says how far the model's held-out loss is under the unigram
control (training.evaluation.lm_controls): the finding this check exists for is where along that axis a pretrained
start stops losing to random weights.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.kit.steps import Steps
from bench.kit.tasks import TASKS

TASK = "vader"
FT_LR = 3e-4
"""The fine-tuning rate of bench transfer's small models and of bench ablate's tasks."""


def labeled(work: Path, steps: Steps) -> Path:
    return steps.run(f"labeled_{TASK}", work / "labeled" / TASK, ["labeled", "prepare", TASK, "--output",
                                                                   str(work / "labeled" / TASK)])


def finetune_pair(work: Path, steps: Steps, model_dir: Path, name: str, seed: int) -> dict[str, Any]:
    """The model and its random-init twin fine-tuned with fine-tuning seed `seed`, with the controls: test scores."""
    plan = TASKS[TASK]
    data = labeled(work, steps)
    out = steps.run(f"transfer-{name}", work / "transfer" / name,
                    ["finetune", "--config", str(data / "finetune.json"), "--model", str(model_dir), "--output",
                     str(work / "transfer" / name), "--init", "pretrained", "scratch", "--seeds", str(seed),
                     "--max-train", str(plan.max_train), "--max-length", str(plan.max_length), "--epochs",
                     str(plan.epochs), "--lr", str(FT_LR), "--batch-size", "32"])
    m = json.loads((out / "metrics.json").read_text())
    metric = m["primary_metric"]
    scores = {row: r["scores"]["test"][metric]["per_seed"] for row, r in m["rows"].items()}
    return {"metric": metric, "test_examples": m["counts"].get("test_examples"), "scores": scores}


def case_rows(case: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(metric, the card's rows) of one case's fine-tunes: each seed's pretrained and twin scores, the controls."""
    from training.evaluation.card_summary import rows_of

    per_row: dict[str, dict[str, float | None]] = {}
    metric, n_test = "accuracy", 0
    for seed, t in sorted(case["transfer"].items()):
        metric, n_test = t["metric"], int(t["test_examples"] or 0)
        for row, by_seed in t["scores"].items():
            if row in ("pretrained", "scratch"):
                per_row.setdefault(row, {})[seed] = by_seed.get(seed)
            else:
                per_row.setdefault(row, dict(by_seed))
    return metric, rows_of(per_row, metric, n_test)


def render(report: dict[str, Any]) -> list[str]:
    """The transfer table and each case's verdict, or nothing when no case was fine-tuned."""
    from training.evaluation.card_summary import verdict

    cases = {k: c for k, c in report["cases"].items() if c.get("transfer")}
    if not cases:
        return []
    unigram = report.get("unigram_control") or {}
    lines = ["", f"### Does each budget's pretraining pay? ({TASK}, `--transfer`)", "",
             f"Each lmforge model above fine-tuned on {TASK} (3,000 train sentences, 64 tokens, 3 epochs, peak rate "
             f"{FT_LR:g}, batch 32: bench transfer's recipe) beside its random-init twin, paired by seed; test "
             "accuracy, 95% intervals (Student's t over seeds; the paired difference for the verdict).", "",
             "| case | held-out loss | under the unigram control | pretrained | random-init twin | majority | TF-IDF + LR |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for key, c in cases.items():
        metric, rows = case_rows(c)
        by = {r["row"]: r for r in rows}
        # the mean over the seeds fine-tuned (a case may have more seeds of loss than of fine-tunes)
        ran = (c.get("runs") or {}).get("lmforge", {})
        losses = [ran[s]["held_out_loss"] for s in c["transfer"] if s in ran]
        loss = sum(losses) / len(losses) if losses else c["summary"]["lmforge"]["mean"]
        control = (unigram.get(c["objective"]) or {}).get("value")

        cells = " | ".join(_cell(by.get(row)) for row in ("pretrained", "scratch", "majority", "tfidf_lr"))
        under = f"{control - loss:.3f}" if control is not None else "-"
        lines.append(f"| {key} | {loss:.3f} | {under} | {cells} |")
        verdicts.append(f"- {key}: {verdict(metric, rows)}")
    return [*lines, "", *verdicts]


def _cell(r: dict[str, Any] | None) -> str:
    if not r:
        return "-"
    return f"{r['mean']:.3f}" + (f" ({r['low']:.3f}-{r['high']:.3f})" if r["low"] is not None and r["seeds"] > 1 else "")
