"""A corpus ablation's report from its stages' manifests (flows/ablate.py): report.json and report.md.

Per arm: documents kept and dropped (by reason, duplicates by kind, contaminated by the reference), the positions
trained (steps x global batch x row length: equal for every arm by construction), the tokens among them (without
padding, from each pretraining's manifest) and the epochs those were over its corpus, the reference loss per seed with its mean and 95% interval,
and its difference to the baseline paired over seeds (flows.ablation_stats) with a plain sentence where the
interval includes zero. A failed arm is listed with its error.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flows.ablation_stats import interval, paired, sentence
from schemas.manifest import atomic_write_json, read_manifest


def arm_record(r: dict[str, Any]) -> dict[str, Any]:
    """One arm's figures from its corpus, shards and per-seed eval outputs."""
    if "error" in r and "seeds" not in r:
        return {"error": r["error"]}
    counts = read_manifest(Path(r["corpus"]))["counts"]
    train_tokens = read_manifest(Path(r["shards"]))["counts"]["train_tokens"]
    losses = {int(s): json.loads((Path(v["eval"]) / "report.json").read_text())["teacher"]["mlm_loss"]
              for s, v in r["seeds"].items()}
    tokens = {int(s): read_manifest(Path(v["pretrain"]))["counts"]["tokens"] for s, v in r["seeds"].items()}
    trained = sum(tokens.values()) / len(tokens)
    contaminated = (counts.get("contamination") or {})
    return {"docs_in": counts["in"], "docs_kept": counts["kept"], "dropped_by_reason": counts.get("dropped", {}),
            "duplicates_by_kind": counts.get("duplicates_by_kind", {}), "quarantined": counts.get("quarantined", 0),
            "reference_pages_dropped": sum(int(v.get("pages_dropped", 0)) for v in contaminated.values()),
            "train_tokens": train_tokens, "steps": r["steps"], "positions_trained": r["positions_trained"],
            "tokens_trained": trained, "tokens_trained_by_seed": tokens,
            "epochs": trained / train_tokens if train_tokens else None,
            "reference_loss_by_seed": losses, "reference_loss": interval(list(losses.values()))}


def write_report(cfg, root: Path, results: dict[str, dict[str, Any]], tokenizer: str, reference: str) -> Path:
    arms = {name: arm_record(r) for name, r in results.items()}
    base = arms.get("baseline", {})
    sentences = []
    for name, a in arms.items():
        if name == "baseline" or "error" in a or "error" in base:
            continue
        d = paired(a["reference_loss_by_seed"], base["reference_loss_by_seed"])
        a["reference_loss"]["diff_to_baseline"] = d
        sentences.append(sentence("held-out reference loss", name, d, lower_is_better=True))
    report = {"name": cfg.name, "preset": cfg.preset, "seeds": cfg.seeds, "reference": cfg.reference,
              "tokenizer": tokenizer, "reference_shards": reference, "arms": arms, "sentences": sentences}
    atomic_write_json(root / "report.json", report)
    (root / "report.md").write_text(render(report))
    return root / "report.md"


def _ci(x: dict[str, Any]) -> str:
    if x.get("ci_low") is None:
        return f"{x['mean']:.4f} (one seed)"
    return f"{x['mean']:.4f} [{x['ci_low']:.4f}, {x['ci_high']:.4f}]"


def render(report: dict[str, Any]) -> str:
    out = [f"# Corpus ablation `{report['name']}`", "",
           f"Preset {report['preset']}, seeds {report['seeds']}; one tokenizer ({report['tokenizer']}); every model "
           f"scored on the same reference texts ({report['reference']}), which every arm's corpus was decontaminated "
           "against. Intervals: 95%, Student's t over seeds; differences paired by seed.", "",
           "| arm | docs kept / in | dropped (top reasons) | duplicates | tokens trained | epochs | reference loss | "
           "difference to baseline |", "|---|---:|---|---|---:|---:|---:|---:|"]
    for name, a in report["arms"].items():
        if "error" in a:
            out.append(f"| {name} | failed: {a['error'][:200]} | | | | | | |")
            continue
        top = sorted(a["dropped_by_reason"].items(), key=lambda kv: -kv[1])[:3]
        d = a["reference_loss"].get("diff_to_baseline")
        out.append(f"| {name} | {a['docs_kept']:,} / {a['docs_in']:,} | " + ", ".join(f"{k} {v}" for k, v in top)
                   + f" | {', '.join(f'{k} {v}' for k, v in a['duplicates_by_kind'].items()) or '-'} | "
                   f"{a['tokens_trained']:,.0f} | {a['epochs']:.2f} | {_ci(a['reference_loss'])} | "
                   + (_ci(d) if d else "-") + " |")
    out += ["", *[f"- {s}" for s in report["sentences"]]]
    return "\n".join(out) + "\n"
