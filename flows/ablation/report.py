"""A corpus ablation's report from its stages' manifests (flows/ablation/ablate.py): report.json, and its table and markdown;
flows/ablation/outputs.py writes them with the plot, report.html and the Prefect artifacts.

Per arm: documents kept and dropped (by reason, duplicates by kind, contaminated by the reference), the positions
trained (steps x global batch x row length: equal for every arm by construction), the tokens among them (without
padding, from each pretraining's manifest) and the epochs those were over its corpus; the reference loss per seed
with its mean and 95% interval, and each downstream task's test score (its primary metric) the same way; each with
its difference to the baseline paired over seeds (flows.ablation.stats) and a plain sentence, which says so where
the interval includes zero. The controls stand beside the task scores: the random-init twin (same architecture and
tokenizer, fine-tuned with the same seeds), the majority class and TF-IDF + logistic regression, all on the same
test split (from the baseline's fine-tunes: they do not depend on the arm). A failed arm is listed with its error.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from flows.ablation.arm import corpus_counts
from flows.ablation.stats import interval, paired, sentence
from flows.presets import RUN_PRESETS
from schemas.finetune import FinetuneMetrics
from schemas.manifest import atomic_write_json, read_manifest
from training.evaluation.card_summary import rows_of, verdict
from training.finetuning.metrics import lower_is_better
from training.models.model_kinds import predicts_next


def task_scores(seeds: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task: the primary metric's test score of the pretrained init, per seed, with its interval."""
    out: dict[str, dict[str, Any]] = {}
    for seed, v in seeds.items():
        for task, stage in (v.get("tasks") or {}).items():
            ft = FinetuneMetrics.read(Path(stage) / "metrics.json")
            t = out.setdefault(task, {"metric": ft.primary_metric, "task": ft.task, "test_examples":
                                      ft.counts.get("test_examples"), "by_seed": {}})
            t["by_seed"][int(seed)] = ft.rows["pretrained"].scores["test"][ft.primary_metric].per_seed[str(seed)]
    for t in out.values():
        t.update(interval([x for x in t["by_seed"].values() if x is not None]))
    return out


def controls(seeds: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task, from the baseline's fine-tunes: the random-init twin over seeds, the majority and TF-IDF controls."""
    out: dict[str, dict[str, Any]] = {}
    for seed, v in seeds.items():
        for task, stage in (v.get("tasks") or {}).items():
            ft = FinetuneMetrics.read(Path(stage) / "metrics.json")
            m = ft.primary_metric
            c = out.setdefault(task, {"metric": m, "scratch_by_seed": {}})
            if "scratch" in ft.rows:
                c["scratch_by_seed"][int(seed)] = ft.rows["scratch"].scores["test"][m].per_seed[str(seed)]
            for row in ("majority", "tfidf_lr"):
                if row in ft.rows:
                    c[row] = ft.mean(row)
    for c in out.values():
        vals = [x for x in c["scratch_by_seed"].values() if x is not None]
        c["scratch"] = interval(vals) if vals else None
    return out


def few_shot_scores(evals: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task: a decoder's few-shot test accuracy per seed (the eval stage's, training/evaluation/few_shot.py) with
    its interval, and the majority class on the same items; empty for other models."""
    out: dict[str, dict[str, Any]] = {}
    for seed, e in evals.items():
        for task, f in (e.get("few_shot") or {}).items():
            if f.get("applies"):
                t = out.setdefault(task, {"metric": "accuracy", "test_examples": f["test_examples"],
                                          "majority": f["majority"], "shots": f["shots"], "by_seed": {}})
                t["by_seed"][seed] = f["accuracy"]
    for t in out.values():
        t.update(interval(list(t["by_seed"].values())))
    return out


def arm_record(r: dict[str, Any]) -> dict[str, Any]:
    """One arm's figures from its corpus, shards, per-seed eval and fine-tune outputs."""
    if "error" in r:
        return {"error": r["error"], "flow_run": r.get("flow_run")}
    counts = corpus_counts(r["corpus"], r.get("cleaned"))
    train_tokens = read_manifest(Path(r["shards"]))["counts"]["train_tokens"]
    seeds = r["seeds"]
    evals = {int(s): json.loads((Path(v["eval"]) / "report.json").read_text()) for s, v in seeds.items()}
    losses = {s: e["teacher"]["mlm_loss"] for s, e in evals.items()}
    controls = {e["unigram_control"] for e in evals.values() if e.get("unigram_control") is not None}
    tokens = {int(s): read_manifest(Path(v["pretrain"]))["counts"]["tokens"] for s, v in seeds.items()}
    trained = sum(tokens.values()) / len(tokens)
    contaminated = counts.get("contamination") or {}
    return {"flow_run": r.get("flow_run"), "cleaned": r.get("cleaned"), "docs_in": counts["in"], "docs_kept": counts["kept"], "dropped_by_reason": counts.get("dropped", {}),
            "duplicates_by_kind": counts.get("duplicates_by_kind", {}), "quarantined": counts.get("quarantined", 0),
            "reference_pages_dropped": sum(int(v.get("pages_dropped", 0)) for v in contaminated.values()),
            "train_tokens": train_tokens, "steps": r["steps"], "positions_trained": r["positions_trained"],
            "tokens_trained": trained, "tokens_trained_by_seed": tokens,
            "epochs": trained / train_tokens if train_tokens else None,
            "reference_loss_by_seed": losses, "reference_loss": interval(list(losses.values())),
            "reference_perplexity": math.exp(min(sum(losses.values()) / len(losses), 50)) if losses else None,
            "few_shot": few_shot_scores(evals),
            # the arm's corpus's token frequencies alone on the same reference tokens (one value: the seeds share them)
            "reference_unigram_control": min(controls) if controls else None,
            "tasks": task_scores(seeds)}


def differences(arms: dict[str, dict[str, Any]]) -> list[str]:
    """Each arm's paired difference to the baseline, on the reference loss and every task; the report's sentences."""
    base, out = arms.get("baseline", {}), []
    for name, a in arms.items():
        if name == "baseline" or "error" in a or "error" in base:
            continue
        d = paired(a["reference_loss_by_seed"], base["reference_loss_by_seed"])
        a["reference_loss"]["diff_to_baseline"] = d
        out.append(sentence("held-out reference loss", name, d, lower_is_better=True))
        for task, t in a.get("few_shot", {}).items():
            b = base.get("few_shot", {}).get(task)
            if b:
                t["diff_to_baseline"] = d = paired(t["by_seed"], b["by_seed"])
                out.append(sentence(f"{task} few-shot accuracy", name, d, lower_is_better=False))
        for task, t in a["tasks"].items():
            b = base["tasks"].get(task)
            if not b:
                continue
            d = paired({s: x for s, x in t["by_seed"].items() if x is not None},
                       {s: x for s, x in b["by_seed"].items() if x is not None})
            t["diff_to_baseline"] = d
            out.append(sentence(f"{task} test {t['metric']}", name, d, lower_is_better=lower_is_better(t["metric"])))
    return out


def write_report(cfg, root: Path, results: dict[str, dict[str, Any]], plan: dict[str, Any]) -> dict[str, Any]:
    """The report's figures, written to `root`/report.json and returned (flows.ablation.outputs renders them)."""
    arms = {name: arm_record(r) for name, r in results.items()}
    sentences = differences(arms)
    base = results.get("baseline", {})
    report = {"name": cfg.name, "preset": plan.get("recipe") or cfg.preset, "seeds": list(cfg.seeds), "reference": cfg.reference,
              "objective": cfg.objective, "decoder": bool(cfg.objective) and predicts_next(cfg.objective),
              "tokenizer": plan["tokenizer"], "reference_shards": plan["reference"], "tasks": list(cfg.tasks),
              "stage_options": plan["opts"], "arms": arms, "controls": controls(base["seeds"]) if "seeds" in base else {},
              "sentences": sentences}
    atomic_write_json(root / "report.json", report)
    return report


def pretraining_verdicts(report: dict[str, Any]) -> list[str]:
    """Per task, the card's "did pretraining pay" sentence (training.evaluation.card_summary.verdict) for the baseline
    arm: its pretrained model against the random-init twin, TF-IDF + LR and the majority class, paired by seed."""
    base = report["arms"].get("baseline") or {}
    out = []
    for task, c in report.get("controls", {}).items():
        t = (base.get("tasks") or {}).get(task)
        if not t or "error" in base:
            continue
        per_row = {"pretrained": {str(k): v for k, v in t["by_seed"].items()},
                   "scratch": {str(k): v for k, v in c.get("scratch_by_seed", {}).items()},
                   **{row: {"null": c[row]} for row in ("tfidf_lr", "majority") if c.get(row) is not None}}
        rows = rows_of(per_row, c["metric"], int(t.get("test_examples") or 0))
        out.append(f"{task} (baseline arm, test {c['metric']}): {verdict(c['metric'], rows)}")
    return out


def ci(x: dict[str, Any] | None) -> str:
    if not x or x.get("mean") is None:
        return "-"
    if x.get("ci_low") is None:
        return f"{x['mean']:.4f} (one seed)"
    return f"{x['mean']:.4f} [{x['ci_low']:.4f}, {x['ci_high']:.4f}]"


def table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The report's one table (markdown, HTML and the Prefect table artifact share it): header and rows."""
    tasks = report["tasks"]
    arms = [a for a in report["arms"].values() if "error" not in a]
    shots = [t for t in tasks if any(t in a.get("few_shot", {}) for a in arms)]  # a decoder's, prompted
    ppl = bool(report.get("decoder"))
    header = ["arm", "docs kept / in", "dropped (top reasons)", "duplicates", "tokens trained", "epochs",
              "reference loss", "vs baseline", *(["reference perplexity"] if ppl else []),
              *[x for t in shots for x in (f"{t} (few-shot)", "vs baseline")],
              *[x for t in tasks for x in (f"{t} (test)", "vs baseline")]]
    lead = 8 + ppl  # the columns before the tasks'
    rows = []
    for name, a in report["arms"].items():
        if "error" in a:
            rows.append([name, f"failed: {a['error'][:200]}", *[""] * (len(header) - 2)])
            continue
        top = sorted(a["dropped_by_reason"].items(), key=lambda kv: -kv[1])[:3]
        row = [name, f"{a['docs_kept']:,} / {a['docs_in']:,}", ", ".join(f"{k} {v}" for k, v in top) or "-",
               ", ".join(f"{k} {v}" for k, v in a["duplicates_by_kind"].items()) or "-", f"{a['tokens_trained']:,.0f}",
               f"{a['epochs']:.2f}", ci(a["reference_loss"]), ci(a["reference_loss"].get("diff_to_baseline"))]
        if ppl:
            row.append(f"{a['reference_perplexity']:.1f}" if a.get("reference_perplexity") else "-")
        for t in shots:
            s = a.get("few_shot", {}).get(t, {})
            row += [ci(s), ci(s.get("diff_to_baseline"))]
        for t in tasks:
            s = a["tasks"].get(t, {})
            row += [ci(s), ci(s.get("diff_to_baseline"))]
        rows.append(row)
    for name, a in report["arms"].items():
        if a.get("reference_unigram_control") is not None:
            rows.append([f"control: token frequencies alone ({name}'s corpus)", *[""] * 5,
                         f"{a['reference_unigram_control']:.4f}", *[""] * (len(header) - 7)])
    for t in shots:  # the majority class on the items the decoders were prompted with (the same for every arm)
        majority = next(a["few_shot"][t]["majority"] for a in arms if t in a.get("few_shot", {}))
        col = lead + 2 * shots.index(t)
        rows.append([f"control: majority class ({t}, few-shot items)", *[""] * (col - 1), f"{majority:.4f}",
                     *[""] * (len(header) - col - 1)])
    for t, c in report["controls"].items():
        rows.append([f"control: random init ({t})", *[""] * (lead - 1 + 2 * len(shots)),
                     *[x for u in tasks for x in ((ci(c["scratch"]) if u == t else ""), "")]])
        for kind, label in (("majority", "majority class"), ("tfidf_lr", "TF-IDF + LR")):
            if c.get(kind) is not None:
                rows.append([f"control: {label} ({t})", *[""] * (lead - 1 + 2 * len(shots)),
                             *[x for u in tasks for x in ((f"{c[kind]:.4f}" if u == t else ""), "")]])
    return header, rows


def _recipe(preset: str) -> str:
    return f"preset {preset}" if preset in RUN_PRESETS else f"{preset} (every stage's options: report.json stage_options)"


def render(report: dict[str, Any], png: Path | None) -> str:
    header, rows = table(report)
    metrics = ", ".join(f"{t}: {c['metric']}" for t, c in report["controls"].items())
    out = [f"# Corpus ablation `{report['name']}`", "", "Did pretraining pay:", "",
           *[f"- {v}" for v in pretraining_verdicts(report)], "",
           f"Recipe: {_recipe(report['preset'])}; seeds {report['seeds']}; one tokenizer ({report['tokenizer']}); every model "
           f"scored on the same reference texts ({report['reference']}), which every arm's corpus was decontaminated "
           "against, and fine-tuned on the same task splits (test scores" + (f"; {metrics}" if metrics else "") + "). "
           "Intervals: 95%, Student's t over seeds; differences paired by seed. The controls (random-init twin, "
           "majority class, TF-IDF + logistic regression) do not depend on the arm.", "",
           "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
           *["| " + " | ".join(r) + " |" for r in rows], "", *[f"- {s}" for s in report["sentences"]]]
    shared: dict[str, list[str]] = {}
    for name, a in report["arms"].items():
        if a.get("cleaned"):
            shared.setdefault(a["cleaned"], []).append(name)
    out += ["", *[f"{', '.join(names)} read one cleaning of the crawl ({path}: the rules run once; each arm "
                  "deduplicated it its own way): their documents in, dropped and quarantined are that cleaning's."
                  for path, names in shared.items()]] if shared else []
    if png:
        out += ["", f"![reference loss and task scores per arm]({png.name})"]
    return "\n".join(out) + "\n"
