"""The evaluation card of one or more models: language-model quality where it applies, and cost by
MOROCCO's protocol, side by side (`lmforge evaluate --model DIR [DIR ...] --shards S --output O`).

Quality, named precisely:
- masked LM on MLM shards: the mean cross-entropy (nats) of the held-out masked tokens (valid split,
  mask variant 0, so every model sees the same tokens), with its standard error (sd / sqrt(n));
- causal LM on causal shards: the mean next-token cross-entropy and its exponential, the perplexity;
- encoder-decoder on t5_span shards: the mean cross-entropy of the span-corruption targets;
- a classifier or bare encoder: none here (its quality is a task score: `lmforge finetune`).
Cost (training/evaluation/resources.py, each model in its own process): parameters with and without embeddings,
size on disk, peak RSS, init time, throughput at batch 32 (median of 5) and p50/p95 latency at
batch 1, encoder only and with the head, on real held-out rows (the shards' valid split, or
`--texts`, tokenized with the model's tokenizer).
"""
from __future__ import annotations

import atexit
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from schemas.card import CardEntry, machine_note, markdown_table
from training.models.flops import cpu_watch
from training.models.model_formats import ModelHandle, load_model
from training.models.model_kinds import KINDS, check_tokenizer, max_tokens, model_kind, task_head_kind


def lm_quality(model_dir: str, kind: str, shards: str | None, batch_size: int = 32, max_batches: int = 0,
               model=None) -> dict[str, Any]:
    """The kind's loss on the shards' valid split with its standard error, or why none applies."""
    import numpy as np
    import torch

    from training.pretraining.data import ShardSet, build_batch

    objectives = KINDS[kind].lm_objectives
    if not objectives:
        return {"applies": False, "why": f"a {kind} has no language-model loss; its quality is a task score"}
    if not shards:
        return {"applies": False, "why": "no --shards to score on"}
    s = ShardSet.open(shards)
    if s.objective not in objectives:
        return {"applies": False, "why": f"the shards' objective is {s.objective}; a {kind} is scored on "
                                         f"{' or '.join(objectives)} shards"}
    model = model if model is not None else load_model(model_dir)[0]
    if model.config.vocab_size < s.vocab_size:
        raise ValueError(f"{model_dir}: vocabulary of {model.config.vocab_size} tokens, but {shards} was encoded with "
                         f"{s.vocab_size}: score a model on shards made with its own tokenizer")
    table = s.read("valid")
    n_batches = math.ceil(table.num_rows / batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    losses = []
    model.eval()
    with torch.inference_mode():
        for b in range(n_batches):
            rows = np.arange(b * batch_size, min((b + 1) * batch_size, table.num_rows))
            batch = build_batch(table, rows, variant=0)
            labels = batch.pop("labels")
            logits = model(**batch, **({"labels": labels} if KINDS[kind].encoder_decoder else {})).logits
            if KINDS[kind].shift_labels:  # predict token t+1 from tokens <= t
                logits, labels = logits[:, :-1], labels[:, 1:]
            per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1),
                                                          ignore_index=-100, reduction="none")
            losses.append(per_token[labels.reshape(-1) != -100].numpy())
    x = np.concatenate(losses) if losses else np.zeros(0)
    if x.size < 2:
        raise ValueError(f"{shards}: fewer than 2 scored tokens in the valid split; a loss needs more held-out data")
    mean, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))
    out = {"applies": True, "figure": KINDS[kind].lm_figure, "value": round(mean, 4), "standard_error": round(se, 4),
           "tokens": int(x.size), "rows": int(min(table.num_rows, n_batches * batch_size))}
    if KINDS[kind].perplexity:
        out["perplexity"] = round(math.exp(min(mean, 50)), 2)
    out["unigram_control"] = unigram_control(shards, KINDS[kind].shift_labels)["value"]
    return out


@functools.lru_cache(maxsize=8)
def unigram_control(shards: str, shift: bool) -> dict[str, Any]:
    """training.evaluation.lm_controls.unigram_loss, once per shards folder and objective (every model on a card
    is scored on the same held-out tokens)."""
    from training.evaluation.lm_controls import unigram_loss

    return unigram_loss(shards, shift)


def resource_inputs(model_dir: str, shards: str | None, texts: str | None, max_length: int, rows: int = 2000):
    """(ids, lengths) of real held-out inputs: `texts` (one per line, or JSONL with `text`) tokenized with the
    model's tokenizer, else the shards' valid rows (encoded with the same tokenizer the model was trained on)."""
    import numpy as np

    if texts:
        from transformers import AutoTokenizer

        check_tokenizer(model_dir)
        lines = [ln for ln in Path(texts).read_text(encoding="utf-8").splitlines() if ln.strip()][:rows]
        if lines and lines[0].lstrip().startswith("{"):
            lines = [json.loads(ln)["text"] for ln in lines]
        if not lines:
            raise ValueError(f"{texts}: no text lines to measure with")
        tok = AutoTokenizer.from_pretrained(model_dir)
        enc = tok(lines, truncation=True, max_length=max_length, padding="max_length")
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        return ids, np.asarray(enc["attention_mask"]).sum(1).astype(np.int64)
    if not shards:
        raise ValueError("cost needs real inputs: --shards (their valid rows) or --texts FILE")
    import pyarrow.compute as pc

    from training.pretraining.data import ShardSet

    table = ShardSet.open(shards).read("valid")
    ids = pc.list_flatten(table["input_ids"]).to_numpy().astype(np.int64).reshape(table.num_rows, -1)[:rows]
    return ids, table["length"].to_numpy().astype(np.int64)[:rows]


class Measurer:
    """training/evaluation/resources.py's server (`--serve`): one process imports torch and transformers, and each
    model is measured in a child forked from it, alone; started at the first model, stopped at exit."""

    proc: subprocess.Popen | None = None

    @classmethod
    def ask(cls, request: dict) -> dict:
        if cls.proc is None or cls.proc.poll() is not None:
            if cls.proc is None:
                atexit.register(cls.stop)  # once: stop() stops whichever server is current
            cls.proc = subprocess.Popen([sys.executable, "-m", "training.evaluation.resources", "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        cls.proc.stdin.write(json.dumps(request) + "\n")
        cls.proc.stdin.flush()
        line = cls.proc.stdout.readline()
        if not line:
            cls.stop()
            raise RuntimeError(f"measuring {request['model']} failed: the measuring server ended (exit {cls.proc.returncode})")
        return json.loads(line)

    @classmethod
    def stop(cls) -> None:
        if cls.proc is not None and cls.proc.poll() is None:
            cls.proc.stdin.close()
            try:
                cls.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.proc.kill()


def resources(model_dir: str, ids, lengths, threads: int, inputs_count: int, repeats: int, latency_count: int) -> dict:
    """training/evaluation/resources.py in a process of its own (a fork of the Measurer's server), so peak memory and
    init time are this model's alone."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "inputs.npz", ids=ids, lengths=lengths)
        t0 = time.perf_counter()
        with cpu_watch() as seen:  # how much of the CPU other processes took while this model was measured
            r = Measurer.ask({"model": model_dir, "inputs": str(Path(tmp) / "inputs.npz"), "threads": threads,
                              "inputs_count": inputs_count, "repeats": repeats, "latency_count": latency_count})
        wall, cores = time.perf_counter() - t0, os.cpu_count() or 1
        machine = {"wall_seconds": round(wall, 2), "other_cpu_seconds": round(seen.get("foreign_share", 0.0) * wall * cores, 2),
                   "cores": cores, "load_1min": round(os.getloadavg()[0], 2)}
    if "error" in r:
        raise RuntimeError(f"measuring {model_dir} failed: {r['error']}")
    return {**r, "machine": machine}


def card_entry(model_dir: str, cfg, name: str = "") -> CardEntry:
    """One model's entry (schemas.card): the quality figures its kind has, and its cost."""

    h = ModelHandle.open(model_dir)  # once, for every quality figure (cost loads it again, alone, in a process of its own)
    model, kind = h.model, h.kind
    quality = lm_quality(model_dir, kind, cfg.shards or None, cfg.batch_size, cfg.max_batches, model)
    if cfg.task_config and KINDS[kind].scores_task:
        quality["task"] = task_quality(model_dir, cfg.task_config, model=model, kind=kind)
        quality["task"]["controls"] = finetune_controls(model_dir)
        ref = task_reference(model_dir)
        if ref:
            quality["task"]["reference"] = ref
    if cfg.task_config and KINDS[kind].prompted:  # a decoder or an encoder-decoder: prompted with the task
        quality["few_shot"] = few_shot_quality(model_dir, cfg.task_config, model, h.tokenizer)
    if cfg.probe_corpus:
        from training.evaluation.probing import probe_languages, probe_model

        vpm = 50
        if cfg.shards:
            from schemas.manifest import read_manifest

            vpm = int(read_manifest(cfg.shards)["config"].get("valid_per_mille", vpm))
        langs, skipped = probe_languages(cfg.probe_corpus, cfg.probe_languages)
        quality["probing"] = probe_model(model_dir, cfg.probe_corpus, langs, vpm, cfg.probe_wc_words,
                                         cfg.probe_min_per_class, model=model, tokenizer=h.tokenizer, skipped=skipped)
        if skipped:
            quality["probing_skipped"] = skipped
        if KINDS[kind].pseudo_perplexity and cfg.pppl_sentences:
            from training.evaluation.pppl import pseudo_perplexity
            from training.evaluation.probing import held_out_texts, sentences

            tok = h.tokenizer
            length = min(64, max_tokens(model.config) or 64)
            quality["pseudo_perplexity"] = {
                lang: pseudo_perplexity(model, tok, sentences(held_out_texts(cfg.probe_corpus, lang, vpm, 100000))
                                        [:cfg.pppl_sentences], length)
                for lang in quality["probing"]}
    ids, lengths = resource_inputs(model_dir, cfg.shards or None, cfg.texts or None, cfg.max_length)
    cost = resources(model_dir, ids, lengths, cfg.threads, cfg.cost_inputs, cfg.cost_repeats, cfg.latency_inputs)
    return CardEntry(model_dir, kind, quality, cost, name)


def few_shot_text(f: dict[str, Any] | None) -> str:
    """The per-model line's few-shot part (training/evaluation/few_shot.py), or why it does not apply."""
    if not f:
        return ""
    if not f["applies"]:
        return f"; few-shot: not scored ({f['why']})"
    lo, hi = f["interval"]
    mlo, mhi = f["majority_interval"]
    return (f"; few-shot ({f['shots']} demonstrations, {f['shots_per_class']} per class; label words "
            f"{', '.join(repr(w) for w in f['label_words'])}): accuracy {f['accuracy']:.4f} [{lo:.3f}, {hi:.3f}] on "
            f"{f['test_examples']:,} test items, the majority class ({f['majority_label']}) {f['majority']:.4f} "
            f"[{mlo:.3f}, {mhi:.3f}]")


def render(entries: list[CardEntry], opening: list[str] = (), base: str | Path | None = None, title: str = "") -> str:
    """report.md: the opening summary (card_summary.py) and what follows it in `opening` (the chart), the headline
    table (schemas.card.CARD_METRICS), each model's figures in words, probing, shares. Paths relative to `base`."""
    lines = [f"# lmforge evaluation card{': ' + title if title else ''}", "", *opening, "", *markdown_table(entries, base), ""]
    for e in entries:
        q = e.quality
        lines.append(f"- {e.label}: " + (f"{q['figure']}, {q['tokens']:,} tokens of {q['rows']:,} held-out rows"
                                            + (f", perplexity {q['perplexity']}" if "perplexity" in q else "")
                                            if q.get("applies") else f"no language-model figure: {q['why']}")
                     + "".join(f"; pseudo-perplexity ({lang}, {p['sentences']} held-out sentences): {p['original']['pppl']:.1f}"
                               f" (PLL-word-l2r {p['word_l2r']['pppl']:.1f}) over {p['original']['tokens']:,} tokens"
                               for lang, p in (q.get("pseudo_perplexity") or {}).items())
                     + (f"; task: {q['task']['test_examples']:,} test examples, "
                        + ", ".join(f"{k} {v:.4f}" for k, v in q["task"]["metrics"].items())
                        + ("; controls on the same split (" + q["task"]["primary"] + "): "
                           + ", ".join(f"{k} {v:.4f}" for k, v in q["task"]["controls"].items())
                           if q["task"].get("controls") else "") if q.get("task") else "")
                     + few_shot_text(q.get("few_shot"))
                     + ".")
    shown = next((e.quality["few_shot"] for e in entries if (e.quality.get("few_shot") or {}).get("applies")), None)
    if shown:
        lines += ["", "Few-shot prompt (training/evaluation/few_shot.py): each demonstration is "
                      f"`{shown['template']!r}` with a train item's text and label, then the test item as "
                      f"`'Text: {{text}}\\nLabel:{shown.get('closing', '')}'`; the prediction is the label word with the "
                      "highest summed log-probability after it" + (" as the decoder's target after the sentinel (an "
                      "encoder-decoder fills the span)" if shown.get("closing") else "") + ". Demonstrations (train ids): "
                      + ", ".join(f"`{u}`" for u in shown["demonstrations"]) + "."]
    for e in entries:
        for lang, tasks in (e.quality.get("probing") or {}).items():
            n = len(next(v for k, v in tasks.items() if k != "sentences")["layers"])
            lines += ["", f"Probing {e.label} ({lang}, {tasks['sentences']:,} held-out sentences; accuracy of a "
                          "logistic-regression probe on each layer's mean-pooled states, layer 0 = embeddings):", "",
                      "| task | classes | train / test | " + " | ".join(f"L{i}" for i in range(n))
                      + " | chance | majority | bag of embeddings |",
                      "|---|---:|---:|" + "---:|" * (n + 3)]
            for name, t in tasks.items():
                if name == "sentences":
                    continue
                lines.append(f"| {name} | {len(t['classes'])} | {t['train']} / {t['test']} | "
                             + " | ".join(f"{a:.3f}" for a in t["layers"])
                             + f" | {t['chance']:.3f} | {t['majority']:.3f} | {t['bag_of_embeddings']:.3f} |")
    skipped = next((e.quality["probing_skipped"] for e in entries if e.quality.get("probing_skipped")), {})
    if skipped:
        lines += ["", "Probing skipped: " + "; ".join(f"{lang}: {why}" for lang, why in skipped.items()) + "."]
    scores = {str(Path(e.path).resolve()): e.task_score for e in entries if e.task}
    labels = {str(Path(e.path).resolve()): e.label for e in entries}
    shares = []
    for e in entries:
        t = e.task or {}
        ref = str(Path(t["reference"]).resolve()) if t.get("reference") else None
        if ref in scores and scores[ref]:
            shares.append(f"{e.label} {100 * t['metrics'][t['primary']] / scores[ref]:.1f}% of {labels[ref]}")
    if shares:
        lines += ["", "Task score as a share of the model it was compressed or distilled from: " + "; ".join(shares) + "."]
    c = entries[0].cost if entries else {}
    if c:
        runs = "1 run" if c["repeats"] == 1 else f"{c['repeats']} repeats (median)"
        lines += ["", f"Cost: {c['inputs']:,} inputs of {c['seq_len']} tokens, {runs}, "
                      f"{c['threads']} torch threads; each model measured in a process of its own (MOROCCO's protocol), forked from one that imported torch, transformers and its modeling code."]
        note = machine_note(entries)
        if note:
            lines += ["", note]
    return "\n".join(lines) + "\n"


def task_data(model_dir: str, task_config: str):
    """(the finetune config, the labelled data) a `finetune --config` JSON names, split as the finetune stage split
    it; ValueError naming the file when it is unreadable or has no test split."""
    from training.finetuning.finetune import FinetuneConfig, load_data

    try:
        spec = json.loads(Path(task_config).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"--task-config {task_config}: not a readable finetune --config JSON ({e})") from None
    cfg = FinetuneConfig(**{**spec, "model": model_dir, "output": str(Path(tempfile.gettempdir(), "lmforge-card"))})
    data = load_data(cfg)
    if not data.test:
        raise ValueError(f"{task_config}: the labelled data has no test split to score")
    return cfg, data


def few_shot_quality(model_dir: str, task_config: str, model, tokenizer) -> dict[str, Any]:
    """A decoder's or an encoder-decoder's few-shot accuracy on the task's test split beside the majority class
    (training/evaluation/few_shot.py), prompted within its positions."""
    from training.evaluation.few_shot import few_shot

    _, data = task_data(model_dir, task_config)
    return few_shot(model, tokenizer, data, max_tokens(model.config) or 512)


def task_quality(model_dir: str, task_config: str, batch_size: int = 64, model=None, kind: str | None = None) -> dict[str, Any]:
    """A fine-tuned model's score on the test split of the labelled data a `finetune --config` JSON names
    (the same deterministic split the finetune stage scored), with the same metrics."""
    from training.finetuning.encode import encode
    from training.finetuning.finetune import load_tokenizer
    from training.finetuning.metrics import primary_metric, score
    from training.finetuning.trainer import predict

    cfg, data = task_data(model_dir, task_config)
    model, kind = (model, kind or model_kind(model_dir)) if model is not None else load_model(model_dir)
    want = task_head_kind(data.task)
    if kind != want:
        raise ValueError(f"{model_dir} is a {kind}; a {data.task} task is scored on a {want}")
    tok = load_tokenizer(model_dir, data.task)
    # no longer than the model's positions (a model pretrained on 64-token rows accepts 64 at most)
    # the length the fine-tune trained and scored at (its record beside the model), so the card's score is the fine-tune's
    max_length = min(int(finetune_record(model_dir).get("max_length") or cfg.max_length),
                     max_tokens(model.config) or cfg.max_length)
    pred = predict(model, encode(data, "test", tok, max_length), data, "test", tok.pad_token_id, batch_size)
    if data.task == "classification":  # the model's label ids -> the data's, by name
        names = model.config.id2label
        unknown = sorted({names[p] for p in pred} - set(data.label2id))
        if unknown:
            raise ValueError(f"{model_dir} predicts labels the data does not have: {unknown}")
        pred = [data.label2id[names[p]] for p in pred]
    primary = cfg.select_metric or primary_metric(data.task, data.is_bio)  # the fine-tune's own headline metric
    return {"metrics": score(data, "test", pred), "primary": primary, "test_examples": len(data.test)}


def finetune_record(model_dir: str | Path) -> dict[str, Any]:
    """The config the finetune stage ran with, for a model it saved (hf/ beside metrics.json) or compressed from one;
    {} for any other model."""
    d = Path(compressed_from(model_dir) or model_dir)
    try:
        return json.loads((d.parent / "metrics.json").read_text()).get("config") or {}
    except (OSError, ValueError):
        return {}


def compressed_from(model_dir: str | Path) -> str | None:
    """The model a compressed model was made from (its quantization.json / pruning.json), else None."""
    for spec in ("quantization.json", "pruning.json"):
        if (Path(model_dir) / spec).exists():
            return json.loads((Path(model_dir) / spec).read_text()).get("source")
    return None


def task_reference(model_dir: str) -> str | None:
    """The model a compressed model was made from, or the teacher a student was fine-tuned against (its finetune
    run's --teacher): what its task score is a share of."""
    source = compressed_from(model_dir)
    if source:
        return source
    metrics = Path(model_dir).parent / "metrics.json"
    if metrics.exists():
        try:
            return (json.loads(metrics.read_text()).get("config") or {}).get("teacher") or None
        except ValueError:
            return None
    return None


def finetune_controls(model_dir: str) -> dict[str, float]:
    """The controls the finetune stage scored on the same test split (random-init twin, majority, TF-IDF + LR),
    for a fine-tuned model in a finetune stage's hf/, or compressed from one: a task score stands next to them."""
    from schemas.finetune import FinetuneMetrics

    d = Path(compressed_from(model_dir) or model_dir)
    metrics = d.parent / "metrics.json"
    if not metrics.exists():
        return {}
    try:
        m = FinetuneMetrics.read(metrics)
    except (ValueError, KeyError):
        return {}
    out = {row: round(m.mean(row), 4) for row in m.rows if row != "pretrained" and m.mean(row) is not None}
    teacher = (m.config or {}).get("teacher")
    if not out and teacher and Path(teacher).resolve() != d.resolve():
        # a student fine-tuned with task-level distillation: its teacher's run scored the controls on the same split
        return finetune_controls(teacher)
    return out
