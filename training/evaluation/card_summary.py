"""The card's first lines: what was trained on, what it was scored on, how it scored against its controls, and one
sentence saying whether pretraining paid; then what the card did not run, and why.

Everything here is read from the stages' own records, so the card and the reports beside it cannot disagree:
  - the corpus: the corpus stage's manifest (the shards' `corpus` input): documents read and kept, per language, the
    language rule and its warnings;
  - the task: the labelled data's stage manifest (the --task-config's data folder): file, task, split sizes, warnings
    (a class too small to reach validation or test);
  - the scores: the fine-tune's metrics.json, as eval/report.md reads it: the fine-tuned model, its random-init twin,
    TF-IDF + LR and the majority class on the same test split, the mean over seeds with a 95% interval (Student's t
    over seeds with two or more; with one, Wilson's over the test items for an accuracy, else none).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.stats import interval, proportion_interval
from schemas.card import CardEntry
from schemas.finetune import FinetuneMetrics
from training.evaluation.lm_controls import context_line
from training.finetuning.encode import fit_line
from training.finetuning.metrics import PROPORTIONS, lower_is_better

ROW_NAMES = {"pretrained": "fine-tuned (pretrained here)", "scratch": "random-init twin (same architecture)",
             "tfidf_lr": "TF-IDF + logistic regression", "majority": "majority class"}


def _manifest(folder: str | Path | None) -> dict[str, Any] | None:
    try:
        return json.loads((Path(folder) / "manifest.json").read_text()) if folder else None
    except (OSError, ValueError):
        return None


def corpus_facts(shards: str) -> dict[str, Any] | None:
    """The pretraining corpus the shards were made from: its counts, languages and warnings; None if unknown."""
    s = _manifest(shards)
    c = _manifest((s or {}).get("config", {}).get("corpus"))
    if not c:
        return None
    counts, extra = c.get("counts", {}), c.get("extra", {})
    return {"in": counts.get("in"), "kept": counts.get("kept"), "kept_by_language": counts.get("kept_by_language", {}),
            "dropped_by_language": counts.get("dropped_by_language", {}),
            "languages": (extra.get("languages") or {}).get("line", ""), "warnings": extra.get("warnings", [])}


def losses_text(dropped_by_language: dict[str, dict[str, int]], most: int = 6) -> str:
    """`fr 22 (gopher_alpha_words 14), de 10 (...)`: documents each language lost to the cleaning rules, the commonest
    reason beside it; the languages that lost most first."""
    by = sorted(dropped_by_language.items(), key=lambda kv: -sum(kv[1].values()))
    parts = [f"{lang} {sum(r.values()):,} ({max(r, key=r.get)} {max(r.values()):,})" for lang, r in by[:most] if r]
    return ", ".join(parts) + (f" and {len(by) - most} more" if len(by) > most else "")


def task_facts(task_config: str) -> dict[str, Any] | None:
    """The labelled data a --task-config reads: the labelled stage's record of it (file, task, warnings), or the
    config's own fields when it was not made by that stage; None without a task."""
    if not task_config:
        return None
    try:
        spec = json.loads(Path(task_config).read_text())
    except (OSError, ValueError):
        return None
    data = (spec.get("data") or [""])[0]
    m = _manifest(Path(data).parent) if data else None
    if m and m.get("stage") == "labeled":
        cfg = m.get("config", {})
        return {"file": Path(cfg["file"]).name if cfg.get("file") else Path(data).parent.name, "task": cfg.get("task", spec.get("task")),
                "label_column": (cfg.get("columns") or {}).get("label"), "warnings": (m.get("extra") or {}).get("warnings", [])}
    return {"file": Path(data).name if data else "", "task": spec.get("task"), "label_column": spec.get("label_column"),
            "warnings": []}


def fine_tuned(entries: list[CardEntry]) -> CardEntry | None:
    """The model the fine-tune stage saved (its hf/ beside metrics.json), not a compressed copy or a distilled student."""
    for e in entries:
        metrics = Path(e.path).parent / "metrics.json"
        if e.task and Path(e.path).name == "hf" and metrics.exists():
            try:
                config = json.loads(metrics.read_text()).get("config") or {}
            except ValueError:
                continue
            if not config.get("teacher"):
                return e
    return None


def pretrained_lm(entries: list[CardEntry]) -> CardEntry | None:
    """The card's pretrained language model scored against the unigram control: the pretrained model (the teacher
    when a student was distilled from it; card_roles), else the first model with a language-model loss and its control."""
    scored = [e for e in entries if e.quality.get("applies") and e.quality.get("unigram_control") is not None]
    return next((e for e in scored if e.name in ("teacher", "pretrained")), scored[0] if scored else None)


def score_rows(entry: CardEntry) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the fine-tune's record, one row per init and control: name, mean, interval, seeds, how the interval was made)."""
    m = FinetuneMetrics.read(Path(entry.path).parent / "metrics.json")
    metric, n_test = m.primary_metric, int(m.counts.get("test_examples") or 0)
    per_row = {}
    for key in [*ROW_NAMES, *sorted(set(m.rows) - set(ROW_NAMES))]:
        if key in m.rows and "test" in m.rows[key].scores and metric in m.rows[key].scores["test"]:
            per_row[key] = m.rows[key].scores["test"][metric].per_seed
    return {"metric": metric, "test_examples": n_test, "counts": m.counts, "saved": m.saved}, rows_of(per_row, metric,
                                                                                                       n_test)


def rows_of(per_row: dict[str, dict[str, float | None]], metric: str, n_test: int) -> list[dict[str, Any]]:
    """{row: {seed: test score}} (rows named as ROW_NAMES's keys; a control's seed may be "null") -> the rows
    `verdict` and the card's table read: mean, 95% interval and how it was made, seeds, per seed."""
    rows = []
    for key, scores in per_row.items():
        per_seed = {s: v for s, v in scores.items() if v is not None}
        if not per_seed:
            continue
        iv = interval(list(per_seed.values()))
        low, high, how = iv["ci_low"], iv["ci_high"], f"Student's t over {len(per_seed)} seeds"
        if low is None and metric in PROPORTIONS and n_test:
            low, high = proportion_interval(iv["mean"], n_test)
            how = f"Wilson, {n_test:,} test items"
        elif low is None:
            how = "one seed: none"
        rows.append({"row": key, "name": ROW_NAMES.get(key, key), "mean": iv["mean"], "low": low, "high": high,
                     "seeds": len(per_seed) if key in ("pretrained", "scratch") or "null" not in per_seed else 0,
                     "per_seed": per_seed, "interval": how})
    return rows


def verdict(metric: str, rows: list[dict[str, Any]]) -> str:
    """One sentence: did pretraining pay against its random-init twin, and where TF-IDF and the majority stand."""
    by = {r["row"]: r for r in rows}
    ft, tw = by.get("pretrained"), by.get("scratch")
    lower = lower_is_better(metric)
    if ft is None:
        return "The fine-tune scored no pretrained model, so this card cannot say whether pretraining paid."
    if tw is None:
        return ("No random-init twin was fine-tuned (finetune --init pretrained only), so this card cannot say whether "
                "pretraining paid.")
    diff = ft["mean"] - tw["mean"]
    shared = sorted(set(ft["per_seed"]) & set(tw["per_seed"]))
    if len(shared) >= 2:
        d = interval([ft["per_seed"][s] - tw["per_seed"][s] for s in shared])
        span = f"{d['mean']:+.3f} (95% interval {d['ci_low']:+.3f} to {d['ci_high']:+.3f}, {len(shared)} paired seeds)"
        better = d["ci_low"] > 0 if not lower else d["ci_high"] < 0
        worse = d["ci_high"] < 0 if not lower else d["ci_low"] > 0
        same = all(ft["per_seed"][s] == tw["per_seed"][s] for s in shared)
        head = (f"Pretraining made no difference: the fine-tuned model and its random-init twin scored the same at each "
                f"of {len(shared)} seeds ({ft['mean']:.3f} on average)" if same else
                f"Pretraining paid: the fine-tuned model beat its random-init twin by {span}" if better else
                f"Pretraining did not pay: the fine-tuned model trailed its random-init twin by {span}" if worse else
                f"Pretraining made no difference these seeds can show against its random-init twin: {span}")
    elif ft["low"] is not None and tw["low"] is not None:
        apart = ft["low"] > tw["high"] or tw["low"] > ft["high"]
        ahead = (diff > 0) != lower
        head = (f"From one seed, pretraining {'paid' if ahead else 'did not pay'}: the fine-tuned model scored "
                f"{ft['mean']:.3f} against its random-init twin's {tw['mean']:.3f}, outside each other's test-set intervals"
                if apart else f"From one seed, the fine-tuned model ({ft['mean']:.3f}) and its random-init twin "
                f"({tw['mean']:.3f}) are within each other's test-set intervals: no verdict on pretraining")
    else:
        head = (f"From one seed, the fine-tuned model scored {ft['mean']:.3f} against its random-init twin's "
                f"{tw['mean']:.3f}, with no interval: no verdict on pretraining")
    best = max(ft["mean"], tw["mean"]) if not lower else min(ft["mean"], tw["mean"])
    tail = []
    tf, mj = by.get("tfidf_lr"), by.get("majority")
    if tf and ((tf["mean"] > best) if not lower else (tf["mean"] < best)):
        tail.append(f"TF-IDF + LR ({tf['mean']:.3f}) is ahead of both")
    if mj and ((best <= mj["mean"]) if not lower else (best >= mj["mean"])):
        tail.append(f"neither beats the majority class ({mj['mean']:.3f})")
    return head + ("; " + "; ".join(tail) if tail else "") + "."


def _interval_text(r: dict[str, Any]) -> str:
    return f"{r['low']:.3f} to {r['high']:.3f}" if r["low"] is not None else "none"


def skipped_parts(entries: list[CardEntry], cfg: Any) -> list[str]:
    """Each part of the card that did not run, with why."""
    out = []
    if not cfg.probe_corpus:
        out.append("probing and pseudo-perplexity: not asked (no --probe-corpus; under `lmforge run` the card's `probe` "
                   "option: off in the tiny preset, on in demo and full, or --param overrides='{\"card\": {\"probe\": true}}')")
    skipped = next((e.quality["probing_skipped"] for e in entries if e.quality.get("probing_skipped")), {})
    out += [f"probing in {lang}: {why}" for lang, why in skipped.items()]
    if not cfg.task_config:
        out.append(f"the task score: {cfg.task_note or 'no labelled task (--task-config)'}")
    return out + list(getattr(cfg, "not_run", []))


def summary(entries: list[CardEntry], cfg: Any) -> tuple[list[str], dict[str, Any]]:
    """(the card's opening markdown lines, the same facts for report.json)."""
    facts: dict[str, Any] = {"corpus": corpus_facts(cfg.shards) if cfg.shards else None, "task": task_facts(cfg.task_config)}
    lines: list[str] = []
    c = facts["corpus"]
    if c:
        langs = ", ".join(f"{k} {v:,}" for k, v in sorted(c["kept_by_language"].items(), key=lambda kv: -kv[1]))
        rule = c["languages"].split("(", 1)[1].rstrip(")") if "(" in c["languages"] else ""
        lines.append(f"**Corpus:** {c['in']:,} documents read, {c['kept']:,} kept ({langs})"
                     + (f"; languages {rule}" if rule else "") + ".")
        if c["dropped_by_language"]:
            lines.append(f"**Dropped, per language** (the corpus report has every reason): "
                         f"{losses_text(c['dropped_by_language'])}.")
        lines += [f"**Corpus warning:** {w}." for w in c["warnings"]]
    lm = pretrained_lm(entries)
    if lm:
        line, warning = context_line(lm.quality["value"], lm.quality["unigram_control"],
                                     lm.quality["figure"].replace(" (nats)", ""))
        facts["language_model"] = {"model": lm.label, "loss": lm.quality["value"],
                                   "unigram_control": lm.quality["unigram_control"], "warning": warning}
        lines.append(f"**Pretrained model** ({lm.label}): {line}.")
        if warning:
            lines.append(f"**Pretraining warning:** {warning}.")
    t = facts["task"]
    ft = fine_tuned(entries)
    if t and ft:
        record, rows = score_rows(ft)
        facts.update(scores=rows, metric=record["metric"], test_examples=record["test_examples"])
        n = record["counts"]
        sizes = " / ".join(f"{s} {n.get(f'{s}_examples', 0):,}" + (f" (of {n[f'{s}_capped_from']:,})"
                           if n.get(f"{s}_capped_from") else "") for s in ("train", "validation", "test"))
        lines.append(f"**Task:** {t['file']} ({t['task']}" + (f", label `{t['label_column']}`" if t.get("label_column") else "")
                     + f"): {sizes} examples.")
        lines += [f"**Task warning:** {w}." for w in t["warnings"]]
        fit, fit_warning = fit_line(n)
        if fit:
            facts["tokenizer_fit"] = fit
            lines.append(f"**Tokenizer fit:** {fit}.")
        if fit_warning:
            lines.append(f"**Task warning:** {fit_warning}.")
        facts["verdict"] = verdict(record["metric"], rows)
        saved = record["saved"] or {}
        lines += ["", f"| test {record['metric']} | mean | 95% interval | seeds | interval from |", "|---|---:|---|---:|---|"]
        lines += [f"| {r['name']} | {r['mean']:.3f} | {_interval_text(r)} | {r['seeds'] or '-'} | {r['interval']} |" for r in rows]
        lines += ["", f"**Verdict:** {facts['verdict']}",
                  "", f"(Means over seeds, as eval/report.md gives them. The models below are scored one by one: the "
                      f"fine-tuned one is the saved seed{' ' + str(saved.get('seed')) if saved.get('seed') is not None else ''}, "
                      f"on the same {record['test_examples']:,} test examples.)"]
    elif t:
        lines.append(f"**Task:** {t['file']} ({t['task']}); no fine-tuned model of it is on this card.")
        lines += [f"**Task warning:** {w}." for w in t["warnings"]]
        facts["verdict"] = "No model fine-tuned on the task is on this card, so it cannot say whether pretraining paid."
        lines += ["", f"**Verdict:** {facts['verdict']}"]
    else:
        facts["verdict"] = ("No labelled task was scored, so this card cannot say whether pretraining paid "
                            "(`lmforge run --labeled FILE` fine-tunes on your file against its controls).")
        lines += ["", f"**Verdict:** {facts['verdict']}"]
    facts["skipped"] = skipped_parts(entries, cfg)
    if facts["skipped"]:
        lines += ["", "**Not run:** " + "; ".join(facts["skipped"]) + "."]
    # each bold fact its own paragraph (markdown would run consecutive lines into one)
    spaced = [x for line in lines for x in ((line, "") if line.startswith("**") else (line,))]
    return [x for i, x in enumerate(spaced) if x or (i and spaced[i - 1])], facts
