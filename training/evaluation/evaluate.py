"""Evaluate a run: held-out MLM loss and perplexity of teacher and student, the fine-tune's test
scores next to its controls (random-init twin, majority class, TF-IDF + logistic regression),
parameter counts and CPU inference throughput.

Run alone:  lmforge evaluate --run runs/demo --output runs/demo/eval
            lmforge evaluate --model DIR [DIR ...] [--shards S | --texts FILE] --output O   # any model's card
            lmforge evaluate --shards S --pretrain P [--finetune F] [--distill D] [--previous HF] --output O

Needs the shards and the pretrained model; reports the fine-tune and the student when they finished
(a failed fine-tune does not hide the distillation, and the other way round). `--previous` scores
an earlier model (a refresh's last one) on the same held-out masked tokens, so a refresh shows
whether it helped or forgot.

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

from common.config import config_to_dict, opt, parse_config, require
from schemas.card import Card
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
    output: str = opt(help="stage directory to write report.json, report.md and manifest.json to", path=True)
    model: list[str] = opt([], "card mode: these Hugging Face model directories (masked LM, causal LM, T5, classifier, "
                               "encoder), each with its language-model quality where it applies and its cost "
                               "(training/evaluation/card.py); --shards gives the held-out data", path=True)
    name: list[str] = opt([], "card mode: a name per --model, in the same order (default: each model's role in its run, "
                              "read from the stage manifests: teacher or pretrained, student, fine-tuned, student "
                              "fine-tuned, int8, pruned 25%; training/evaluation/card_roles.py)")
    texts: str = opt("", "card mode: real texts (one per line, or JSONL with `text`) to measure cost on, tokenized with "
                         "each model's own tokenizer (default: the --shards valid rows)", path=True)
    max_length: int = opt(128, "card mode with --texts: tokens per input")
    task_config: str = opt("", "card mode: a `lmforge finetune --config` JSON (e.g. runs/demo/labeled/vader/finetune.json): "
                               "fine-tuned models are scored on its test split, the split the finetune stage scored", path=True)
    task_note: str = opt("", "card mode without --task-config: why the card has no task score (printed on it)")
    not_run: list[str] = opt([], "card mode: parts of the run that did not run, each with why (printed under Not run)")
    probe_corpus: str = opt("", "card mode: a corpus stage directory whose held-out documents (the shards' valid split) "
                                "give the probing sentences (SentLen, WC, BShift per layer; training/evaluation/probing.py)", path=True)
    probe_languages: list[str] = opt([], "card mode: languages to probe in (default: each language the corpus kept "
                                         "20 or more documents of; one it has none of is skipped, named on the card)")
    probe_min_per_class: int = opt(10, "card mode: fewest held-out sentences a probing class may have")
    probe_wc_words: int = opt(20, "card mode: words of the WC task")
    pppl_sentences: int = opt(100, "card mode, masked LMs with --probe-corpus: held-out sentences per language for the "
                                   "pseudo-perplexity (Salazar et al. 2020; and Kauf & Ivanova 2023's word-l2r)")
    cost_inputs: int = opt(2000, "card mode: inputs per throughput run (MOROCCO: 2,000)")
    cost_repeats: int = opt(5, "card mode: throughput runs; the median is reported")
    latency_inputs: int = opt(200, "card mode: batch-1 inputs for the p50/p95 latency")
    run: str = opt("", "run directory holding shards/, pretrain/, finetune/ and distill/ (the defaults of the four below)", path=True)
    shards: str = opt("", "shards stage directory (default: <run>/shards)", path=True)
    pretrain: str = opt("", "pretrain stage directory (default: <run>/pretrain)", path=True)
    finetune: str = opt("", "finetune stage directory (default: <run>/finetune; reported if finished)", path=True)
    distill: str = opt("", "distill stage directory (default: <run>/distill; reported if finished)", path=True)
    skip: list[str] = opt([], "finetune and/or distill: stages not to report (they did not finish in this run)")
    previous: str = opt("", "an earlier masked LM (HF directory) scored on the same held-out tokens, e.g. the "
                        "previous refresh's model", path=True)
    few_shot: list[str] = opt([], "a decoder's or a T5's run: `lmforge finetune --config` JSONs of classification tasks, each "
                                  "named by its file's stem; the teacher is prompted with each task's test split "
                                  "(few-shot accuracy beside the majority class, training/evaluation/few_shot.py), as "
                                  "published data ablations judge decoders", path=True)
    batch_size: int = opt(32, "sequences per forward pass")
    max_batches: int = opt(0, "evaluate at most this many valid batches (0 = all)")
    split: str = opt("valid", "the shards' rows the masked-LM loss is read on: valid (held out from pretraining), or all "
                              "(train and valid: shards made only to be scored, e.g. a corpus ablation's reference set)",
                     choices=("valid", "all"))
    threads: int = opt(2, "torch CPU threads")

    def __post_init__(self) -> None:
        require(self.batch_size >= 1 and self.max_batches >= 0, "batch_size must be >= 1 and max_batches >= 0")
        require(bool(self.run) or bool(self.shards and self.pretrain) or bool(self.model),
                "evaluate needs --model DIR, or --run, or --shards and --pretrain")
        require(self.cost_inputs >= 1 and self.cost_repeats >= 1 and self.latency_inputs >= 2,
                "cost_inputs and cost_repeats must be >= 1, latency_inputs >= 2")
        require(self.split in ("valid", "all"), f"split must be valid or all, got {self.split!r}")
        require(set(self.skip) <= {"finetune", "distill"}, f"--skip takes finetune and/or distill, got {self.skip}")
        require(len({Path(c).stem for c in self.few_shot}) == len(self.few_shot),
                f"--few-shot: each task config needs its own file name (its stem names the task), got {self.few_shot}")

    def stage_dir(self, stage: str) -> Path:
        return Path(getattr(self, stage) or Path(self.run, stage))


def valid_mlm_loss(model, table, batch_size: int, max_batches: int, causal: bool = False) -> tuple[float, int]:
    """Mean cross-entropy over all masked tokens of the valid split (variant 0, rows in order, up to max_batches
    batches), or with `causal` over every next token, or an encoder-decoder's over its span targets (t5_span rows),
    and the token count: training.runtime.recipe.mlm_loss over this table's batches."""
    import itertools

    import numpy as np

    from training.pretraining.data import build_batch
    from training.runtime.recipe import mlm_loss

    starts = itertools.islice(range(0, table.num_rows, batch_size), max_batches or None)  # build only those read
    batches = (build_batch(table, np.arange(b, min(b + batch_size, table.num_rows)), variant=0) for b in starts)
    held = mlm_loss(model, batches, shift=causal)
    return held.loss or 0.0, held.tokens


def throughput(model, table, batch_size: int, batches: int = 5) -> float:
    """Sequences per second for forward passes (after one warm-up batch)."""
    import numpy as np
    import torch

    from training.pretraining.data import build_batch

    rows = np.arange(min(batch_size, table.num_rows))
    batch = build_batch(table, rows, variant=0)
    feed = {k: batch[k] for k in ("input_ids", "attention_mask", "decoder_input_ids") if k in batch}
    with torch.no_grad():
        model(**feed)
        t0 = time.perf_counter()
        for _ in range(batches):
            model(**feed)
    return len(rows) * batches / (time.perf_counter() - t0)


def unigram_control(stages: dict[str, Path], cfg: EvaluateConfig, causal: bool = False) -> float | None:
    """What the pretraining corpus's token frequencies alone score on the tokens the teacher is scored on
    (training.evaluation.lm_controls): the frequencies of the shards the pretraining read, as its manifest names them
    (an encoder-decoder's: of their span targets)."""
    from training.evaluation.lm_controls import unigram_loss

    trained_on = (read_manifest(stages["pretrain"]).get("config") or {}).get("shards") or stages["shards"]
    if not Path(trained_on, "manifest.json").exists():
        trained_on = stages["shards"]  # moved since: the scored shards' own train split
    return unigram_loss(stages["shards"], causal, frequencies_from=trained_on, split=cfg.split,
                        max_rows=cfg.max_batches * cfg.batch_size)["value"]


def model_entry(hf_dir: Path, table, cfg: EvaluateConfig, kind: str = "masked_lm") -> dict[str, Any]:
    """A model of the shards' kind (training.models.model_kinds: masked_lm, causal_lm or seq2seq): its held-out loss
    (`mlm_loss`: over the masked tokens, a decoder's over the next tokens, T5's over the span targets), perplexity,
    size and forward throughput."""
    from training.models.model_kinds import KINDS, auto_class

    model = auto_class(kind).from_pretrained(hf_dir)
    loss, tokens = valid_mlm_loss(model, table, cfg.batch_size, cfg.max_batches, KINDS[kind].shift_labels)
    return {"path": str(hf_dir), "params": sum(p.numel() for p in model.parameters()),
            "layers": model.config.num_hidden_layers, "hidden": model.config.hidden_size,
            "mlm_loss": round(loss, 4), "perplexity": round(math.exp(min(loss, 50)), 2), "masked_tokens": tokens,
            "sequences_per_second": round(throughput(model, table, cfg.batch_size), 1)}


def few_shot_scores(hf_dir: Path, configs: list[str]) -> dict[str, dict[str, Any]]:
    """The decoder or encoder-decoder in `hf_dir` prompted with each task config's test split, keyed by the config's
    file stem."""
    from training.evaluation.card import few_shot_quality
    from training.models.model_formats import ModelHandle

    h = ModelHandle.open(hf_dir)
    return {Path(c).stem: few_shot_quality(str(hf_dir), c, h.model, h.tokenizer) for c in configs}


def render_markdown(report: dict[str, Any]) -> str:
    t, s, f, prev = report["teacher"], report.get("student"), report.get("finetune"), report.get("previous")
    figure = report.get("figure", "masked-token loss")

    def row(name: str, m: dict[str, Any]) -> str:
        return (f"| {name} | {m['layers']} | {m['params']:,} | {m['mlm_loss']:.3f} | {m['perplexity']:.1f} | "
                f"{m['sequences_per_second']:.1f} |")

    lines = [
        f"# lmforge evaluation: {report['run']}",
        "",
        f"| model | layers | params | held-out {figure} | perplexity | seq/s (CPU, batch 32) |",
        "|---|---:|---:|---:|---:|---:|",
        row("teacher", t),
    ]
    if s:
        lines.append(row("student", s))
    if prev:
        lines.append(row("previous model", prev))
    lines.append("")
    if s:
        lines += [f"Student/teacher: {s['params'] / t['params']:.2f}x parameters, "
                  f"{s['sequences_per_second'] / max(t['sequences_per_second'], 1e-9):.2f}x throughput, "
                  f"{figure} {s['mlm_loss'] - t['mlm_loss']:+.3f}.", ""]
    if prev:
        verdict = "better" if t["mlm_loss"] < prev["mlm_loss"] else "not better"
        lines += [f"Against the previous model ({prev['path']}) on the same held-out tokens: {figure} "
                  f"{t['mlm_loss'] - prev['mlm_loss']:+.3f} ({verdict}).", ""]
    for task, fs in (report.get("few_shot") or {}).items():
        if fs["applies"]:
            lines += [f"Few-shot ({task}, {fs['test_examples']:,} test items, {fs['shots']} demonstrations): accuracy "
                      f"{fs['accuracy']:.4f} [{fs['interval'][0]:.3f}, {fs['interval'][1]:.3f}]; the majority class "
                      f"{fs['majority']:.4f}.", ""]
        else:
            lines += [f"Few-shot ({task}): not scored ({fs['why']}).", ""]
    if f:
        lines += [f"Fine-tune ({f['task']}, {f['test_examples']:,} held-out test examples; mean ± sd over seeds; "
                  f"`scratch` is the same architecture from a random start, the controls run on the same split):",
                  "", f["table"], ""]
    for stage, why in (report.get("missing") or {}).items():
        lines += [f"Not reported: {stage} ({why}).", ""]
    lines += [
        f"Pretraining: training {figure} {_fmt(report['pretrain'].get('first_loss'))} -> {_fmt(report['pretrain'].get('last_loss'))} "
        f"over {report['pretrain'].get('steps')} steps.",
        f"Held-out {report.get('tokens', 'masked tokens')}: {t['masked_tokens']:,}.",
    ]
    if report.get("unigram_control") is not None:
        from training.evaluation.lm_controls import context_line

        line, warning = context_line(t["mlm_loss"], report["unigram_control"], f"held-out {figure}")
        lines += ["", f"Teacher: {line}." + (f" Warning: {warning}." if warning else "")]
    return "\n".join(lines) + "\n"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run(cfg: EvaluateConfig) -> Path:
    import torch

    from schemas.finetune import FinetuneMetrics
    from schemas.objectives import objective
    from training.finetuning.finetune import summary_table
    from training.models.model_kinds import KINDS
    from training.pretraining.data import ShardSet

    t0 = time.time()
    if cfg.model:
        return run_card(cfg, t0)
    torch.set_num_threads(cfg.threads)
    stages = {s: cfg.stage_dir(s) for s in ("shards", "pretrain", "finetune", "distill")}
    for s in ("shards", "pretrain"):
        read_manifest(stages[s])  # required: the held-out data and the model, before the output folder exists
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    missing = {s: "it did not finish in this run" if s in cfg.skip else f"{stages[s]} has no manifest (it did not finish)"
               for s in ("finetune", "distill") if s in cfg.skip or not (stages[s] / "manifest.json").exists()}
    shards = ShardSet.open(stages["shards"])
    kind = KINDS[objective(shards.objective).model_kind]
    table = shards.read("valid")
    if cfg.split == "all":
        import pyarrow as pa

        table = pa.concat_tables([shards.read("train"), table])
    pre = json.loads((stages["pretrain"] / "metrics.json").read_text())
    report = {
        "run": Path(cfg.run).name if cfg.run else stages["pretrain"].parent.name,
        "kind": kind.name, "causal": kind.shift_labels, "figure": kind.loss_name, "tokens": kind.scored_tokens,
        "teacher": model_entry(stages["pretrain"] / "hf", table, cfg, kind.name),
        "student": None if "distill" in missing else model_entry(stages["distill"] / "hf", table, cfg, kind.name),
        "previous": model_entry(Path(cfg.previous), table, cfg, kind.name) if cfg.previous else None,
        "finetune": None,
        "missing": missing,
        "pretrain": {"first_loss": pre.get("first_loss"), "last_loss": pre.get("last_loss"), "steps": pre.get("steps")},
        "valid_rows": table.num_rows,
        "unigram_control": unigram_control(stages, cfg, kind.shift_labels),
        "few_shot": (few_shot_scores(stages["pretrain"] / "hf", cfg.few_shot) if kind.prompted else
                     {Path(c).stem: {"applies": False, "why": f"few-shot prompting scores decoders and encoder-decoders; "
                                                              f"this run's model is a {kind.name}"} for c in cfg.few_shot}),
    }
    if "finetune" not in missing:
        ft = FinetuneMetrics.read(stages["finetune"] / "metrics.json")
        report["finetune"] = {"task": ft.task, "primary_metric": ft.primary_metric,
                              "test_examples": ft.counts["test_examples"], "train_examples": ft.counts["train_examples"],
                              "table": summary_table(ft), "test": {row: ft.mean(row) for row in ft.rows}}
    atomic_write_json(out / "report.json", report)
    atomic_write_bytes(out / "report.md", render_markdown(report).encode())
    write_manifest(out, Manifest(
        stage="evaluate", config=config_to_dict(cfg),
        inputs=[input_ref(d) for s, d in stages.items() if s not in missing],
        counts={"valid_rows": table.num_rows, kind.scored_tokens.replace(" ", "_").replace("-", "_"):
                report["teacher"]["masked_tokens"]},
        outputs=describe_outputs(out, [out / "report.json", out / "report.md"]),
        extra={"missing": missing},
        wall_seconds=round(time.time() - t0, 2)))
    print(render_markdown(report), flush=True)
    return out


def run_card(cfg: EvaluateConfig, t0: float) -> Path:
    """`--model`: the card of each model (quality where it applies, cost), report.json and report.md."""
    from schemas.hf import require_model_dir
    from training.evaluation.card import card_entry, render
    from training.evaluation.card_roles import names

    for m in cfg.model:
        require_model_dir(m, "--model")
    if len(cfg.name) > len(cfg.model):
        raise ValueError(f"--name: {len(cfg.name)} names for {len(cfg.model)} models")
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    entries = []
    for m, name in zip(cfg.model, names(cfg.model, cfg.name)):
        print(f"evaluate: {name} ({m}) ...", flush=True)
        entries.append(card_entry(m, cfg, name))
    from training.evaluation.card_contamination import contamination, lines
    from training.evaluation.card_plots import loss_curves, probing, quality_cost, write_html
    from training.evaluation.card_summary import summary

    found = contamination(cfg.shards or None, cfg.task_config)
    plain = [e.to_dict() for e in entries]
    images = [p for p in (quality_cost(plain, out / "quality_cost.png"), probing(plain, out / "probing.png"),
                          loss_curves(plain, out / "loss_curves.png")) if p]
    opening, facts = summary(entries, cfg)
    chart = [f"![{p.stem}]({p.name})" for p in images if p.stem == "quality_cost"]  # right after the verdict
    md = (render(entries, [*opening, *([""] + chart if chart else [])], base=out.parent, title=out.parent.name)
          + "\n" + "\n\n".join(lines(found, base=out.parent)) + "\n")
    if not cfg.task_config:
        md += (f"\nTask: none: {cfg.task_note}.\n" if cfg.task_note else
               "\nTask: none. The card scores a labelled task given one (--task-config; `lmforge run --labeled FILE` "
               "fine-tunes on your file and passes its test split here).\n")
    atomic_write_json(out / "report.json", Card(entries, [p.name for p in images], found, facts).to_dict())
    atomic_write_bytes(out / "report.md", (md + "".join(f"\n![{p.stem}]({p.name})\n" for p in images
                                                         if p.stem != "quality_cost")).encode())
    write_html(md, images, out / "report.html")
    write_manifest(out, Manifest(
        stage="evaluate", config=config_to_dict(cfg),
        inputs=[input_ref(m) for m in cfg.model] + ([input_ref(cfg.shards)] if cfg.shards else []),
        counts={"models": len(entries)},
        outputs=describe_outputs(out, [out / "report.json", out / "report.md", out / "report.html", *images]),
        extra={"mode": "card"}, wall_seconds=round(time.time() - t0, 2)))
    print(md, flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    run(parse_config(EvaluateConfig, "lmforge evaluate", __doc__, argv))


if __name__ == "__main__":
    main()
