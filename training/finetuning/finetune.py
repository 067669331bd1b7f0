"""Fine-tune a model on labelled data, next to the controls a user could get without it.

    lmforge finetune --model runs/demo/pretrain/hf --data reviews.jsonl --output runs/demo/finetune
    lmforge finetune --model DIR --task classification --train a.csv --validation b.csv --test c.csv \\
        --text-column premise --text-pair-column hypothesis --label-column gold --seeds 1 2 3 --init pretrained scratch
    lmforge finetune --model DIR --task regression --data vader.jsonl --label-column score
    lmforge finetune --model DIR --task tokens --train train.conll --test test.conll

Data: JSONL, CSV/TSV (header row), Parquet, a `datasets` save_to_disk directory, and for
`--task tokens` CoNLL files (`token<TAB>tag`, blank line between sentences) or JSONL with
`tokens` and `tags` lists. Splits come from `--train/--validation/--test` files, else from the
`--split-column` (train/validation/test), else from a hash of the id (10% test, 10% of the rest
validation); without a validation split 10% of train is held out for model selection. The test
split is scored once, at the end. Rows that cannot be used are left out and counted by reason
in metrics.json; a missing column, an unseen label in validation/test or a single class stops
with an error naming the file and line.

For each `--init` (pretrained: the model's weights; scratch: the same architecture from a
random start) and each of `--seeds`, the model is trained with BERT's recipe (AdamW, 10% warm-up
then linear decay, clipping at 1.0, batch 32, 3 epochs; every value an option) and the
checkpoint with the best validation score kept. The controls (majority class; TF-IDF word 1-2 +
char 2-5 grams with logistic regression, regularisation chosen on validation) run on the same
splits. Writes `hf/` (the best seed of the first --init, with the tokenizer and the label
names: `AutoModelForSequenceClassification` / `AutoModelForTokenClassification` and
`pipeline(...)` load it), `metrics.json` (`schemas.finetune.FinetuneMetrics`: every metric per
seed with mean and sd, on validation and test, for every row) and, last, `manifest.json`.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import config_to_dict, opt, parse_config, require
from schemas.finetune import COLUMN, CONTROLS, INITS, METRICS, TASKS, FinetuneMetrics, Row, Score
from schemas.manifest import Manifest, atomic_write_json, describe_outputs, input_ref, stage_lock, write_manifest
from training.finetuning.dataset import Columns, TaskData, cap, load_task
from training.finetuning.trainer import Recipe
from training.models.model_formats import load_model, refuse_quantized
from training.models.model_kinds import max_tokens, task_head_kind

SCORED = ("validation", "test")


def column_opt(key: str) -> Any:
    """A labelled file's column as an option: its default and help from its record (schemas/finetune.py)."""
    return opt(COLUMN[key].default, COLUMN[key].help)


@dataclass(kw_only=True)
class FinetuneConfig:
    model: str = opt(help="HF model directory to start from (runs/<run>/pretrain/hf, or any BERT-style model)", path=True)
    output: str = opt(help="stage directory to write hf/, metrics.json and manifest.json to", path=True)
    task: str = opt("classification", "classification (one text or a pair) | regression (float label) | "
                    "tokens (a tag per word)")
    data: list[str] = opt([], "labelled file(s) or datasets directory, split by --split-column or by a hash", path=True)
    train: list[str] = opt([], "train file(s) (instead of --data)", path=True)
    validation: list[str] = opt([], "validation file(s); without them 10% of train is held out", path=True)
    test: list[str] = opt([], "test file(s); without them 10% of the rows are held out by a hash of the id", path=True)
    # the labelled file's columns: default and help from schemas/finetune.py LABELED_COLUMNS (named here so the
    # config reads whole; test_user_task checks these are its records, in its order)
    text_column: str = column_opt("text")
    text_pair_column: str = column_opt("text_pair")
    label_column: str = column_opt("label")
    split_column: str = column_opt("split")
    id_column: str = column_opt("id")
    tokens_column: str = column_opt("tokens")
    tags_column: str = column_opt("tags")
    test_per_mille: int = opt(100, "rows per 1,000 held out as test when no test split is given")
    validation_per_mille: int = opt(100, "train rows per 1,000 held out as validation when none is given")
    max_bad_fraction: float = opt(0.1, "stop if more than this share of rows cannot be used")
    max_train: int = opt(0, "train on at most this many examples, chosen by a hash of the id (0 = all)")
    max_validation: int = opt(0, "score at most this many validation examples (0 = all)")
    max_test: int = opt(0, "score at most this many test examples (0 = all)")
    init: list[str] = opt(["pretrained"], "pretrained (the model's weights) and/or scratch (same architecture, "
                          "random start: the control for what pretraining bought)")
    seeds: list[int] = opt([1], "one fine-tune per seed (head init, shuffling, dropout); mean and sd are reported")
    epochs: int = opt(3, "passes over train")
    min_steps: int = opt(0, "more epochs where --epochs make fewer optimizer steps than this (small datasets train "
                            "longer: Mosbach et al. 2021); --patience stops early only after them")
    batch_size: int = opt(32, "examples per step")
    lr: float = opt(5e-5, "peak AdamW learning rate (BERT: 2e-5..5e-5; small models from scratch like more)")
    lr_grid: list[float] = opt([], "also try these peak learning rates: each init keeps the one whose mean validation "
                               "score over the seeds is best (BERT's protocol; test is still scored once per run)")
    warmup_ratio: float = opt(0.1, "share of steps with a linear warm-up, then linear decay to 0")
    weight_decay: float = opt(0.01, "AdamW weight decay on matrices")
    clip: float = opt(1.0, "gradient-norm clipping")
    patience: int = opt(2, "stop after this many validation scores without a gain (0: never)")
    eval_every: int = opt(0, "steps between validation scores (0: every epoch)")
    dropout: float = opt(-1.0, "hidden and attention dropout while fine-tuning (-1: the model's own)")
    max_length: int = opt(128, "tokens per example after truncation (truncations are counted)")
    teacher: str = opt("", "task-level distillation: a fine-tuned model of this task (same labels) whose soft "
                           "labels the model also learns from: alpha * KL(teacher/T || model/T) * T^2 + (1 - alpha) "
                           "* the gold-label loss (Hinton et al. 2015; DistilBERT's task-specific variant); for regression "
                           "the squared error to the teacher's prediction in place of the KL term", path=True)
    distill_alpha: float = opt(0.5, "with --teacher: the soft labels' weight")
    distill_temperature: float = opt(2.0, "with --teacher: the softmax temperature T")
    bf16: bool = opt(False, "train and predict under bfloat16 autocast (fp32 weights): 1.4x faster on CPUs with "
                     "AVX512-BF16, and on GPUs")
    select_metric: str = opt("", "metric for model selection (default: accuracy, pearson, entity_f1 or token_accuracy)")
    controls: bool = opt(True, "also score the majority and TF-IDF + logistic regression controls")
    threads: int = opt(2, "torch CPU threads")

    def __post_init__(self) -> None:
        require(self.task in TASKS, f"task must be one of {', '.join(TASKS)}, got {self.task!r}")
        require(0.0 <= self.distill_alpha <= 1.0 and self.distill_temperature > 0,
                "distill_alpha must be in [0, 1] and distill_temperature > 0")
        require(bool(self.init) and set(self.init) <= set(INITS), f"init must be among {INITS}, got {self.init}")
        require(len(set(self.init)) == len(self.init), f"init lists {self.init} twice")
        require(bool(self.seeds) and len(set(self.seeds)) == len(self.seeds), f"seeds must be distinct, got {self.seeds}")
        require(0 < self.test_per_mille < 1000 and 0 < self.validation_per_mille < 1000, "per-mille values must be in (0, 1000)")
        require(0 <= self.max_bad_fraction <= 1, "max_bad_fraction must be in [0, 1]")
        require(min(self.max_train, self.max_validation, self.max_test) >= 0, "max_* must be >= 0")
        require(self.epochs >= 1 and self.batch_size >= 1 and self.max_length >= 8, "epochs, batch_size or max_length too small")
        require(self.lr > 0 and 0 <= self.warmup_ratio < 1 and self.clip > 0, "lr > 0, 0 <= warmup_ratio < 1, clip > 0")
        require(all(x > 0 for x in self.lr_grid) and self.lr not in self.lr_grid
                and len(set(self.lr_grid)) == len(self.lr_grid), f"lr_grid must hold distinct positive rates other "
                f"than lr ({self.lr}), got {self.lr_grid}")
        require(min(self.patience, self.eval_every, self.min_steps) >= 0, "patience, eval_every and min_steps must be >= 0")
        require(self.dropout == -1.0 or 0 <= self.dropout < 1, "dropout must be in [0, 1) or -1")
        if self.select_metric:
            require(self.select_metric in METRICS[self.task], f"select_metric for {self.task} is one of {METRICS[self.task]}")

    @property
    def columns(self) -> Columns:
        return Columns.of(vars(self))

    @property
    def recipe(self) -> Recipe:
        return self.recipe_at(self.lr)

    def recipe_at(self, lr: float) -> Recipe:
        return Recipe(lr, self.epochs, self.batch_size, self.warmup_ratio, self.weight_decay, self.clip,
                      self.patience, self.min_steps, self.eval_every, None if self.dropout == -1.0 else self.dropout, self.bf16)


def load_data(cfg: FinetuneConfig) -> TaskData:
    data = load_task(cfg.task, cfg.columns, train=cfg.train, validation=cfg.validation, test=cfg.test, data=cfg.data,
                     test_per_mille=cfg.test_per_mille, validation_per_mille=cfg.validation_per_mille,
                     max_bad_fraction=cfg.max_bad_fraction)
    for split, n in (("train", cfg.max_train), ("validation", cfg.max_validation), ("test", cfg.max_test)):
        before = len(data.split(split))
        setattr(data, split, cap(data.split(split), n))
        if len(data.split(split)) < before:
            data.counts[f"{split}_capped_from"] = before
            data.counts[f"{split}_examples"] = len(data.split(split))
    return data


def fitting_length(model_dir: str, max_length: int) -> int:
    """`max_length`, or the model's position count if that is smaller (said once): a model pretrained on
    64-token rows has 64 position embeddings, and a longer input would fail inside transformers."""
    from transformers import AutoConfig

    positions = max_tokens(AutoConfig.from_pretrained(model_dir))
    if positions and positions < max_length:
        print(f"finetune: --max-length {max_length} is more than {model_dir}'s {positions} positions; using {positions}",
              flush=True)
        return positions
    return max_length


def load_tokenizer(model_dir: str, task: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{model_dir}: the tokenizer is not a fast (tokenizers) one; word alignment needs it")
    if tok.pad_token_id is None:
        raise ValueError(f"{model_dir}: the tokenizer has no pad token; batches cannot be padded")
    return tok


def control_rows(data: TaskData, primary: str) -> dict[str, Row]:
    from training.finetuning.baselines import majority, tfidf_lr
    from training.finetuning.metrics import score

    rows = {}
    for name, fn in (("majority", lambda: majority(data)), ("tfidf_lr", lambda: tfidf_lr(data, primary))):
        t0 = time.time()
        preds, details = fn()
        scores = {s: score(data, s, preds[s]) for s in SCORED}
        rows[name] = Row("control", {s: {m: Score.of({"null": v}) for m, v in ms.items()} for s, ms in scores.items()},
                         {"null": round(time.time() - t0, 1)}, {"null": details})
    return rows


def run(cfg: FinetuneConfig) -> Path:
    """The stage in one process, or data-parallel under torchrun (`lmforge finetune --nproc N`, training.launch.torchrun):
    every process runs the same seeds and learning rates on its slice of each batch (gradients summed), scores
    validation and test itself (the same weights give the same scores, so early stopping agrees), and rank 0
    alone holds the stage lock and writes."""
    from schemas.hf import require_model_dir
    from training.runtime.recipe import init_data_parallel

    rank, _ = init_data_parallel()
    require_model_dir(cfg.model, "--model")  # before the output folder exists
    if rank != 0:
        return _run(cfg)
    with stage_lock(cfg.output):
        return _run(cfg)


def _run(cfg: FinetuneConfig) -> Path:
    import torch

    from training.finetuning.encode import encode
    from training.finetuning.metrics import lower_is_better, primary_metric
    from training.runtime.recipe import data_parallel

    t0 = time.time()
    rank, world = data_parallel()
    if world == 1:
        torch.set_num_threads(cfg.threads)  # under the launcher its plan shares out the cores
    out = Path(cfg.output)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").unlink(missing_ok=True)

    data = load_data(cfg)
    primary = cfg.select_metric or primary_metric(cfg.task, data.is_bio)
    refuse_quantized(cfg.model, "fine-tuning")
    tok = load_tokenizer(cfg.model, cfg.task)
    max_length = fitting_length(cfg.model, cfg.max_length)
    enc = {s: encode(data, s, tok, max_length) for s in ("train", *SCORED)}
    counts: dict[str, Any] = dict(data.counts)
    for e in enc.values():
        counts.update(e.counts)
    say(f"finetune: {cfg.task}, {len(data.train):,} train / {len(data.validation):,} validation / "
          f"{len(data.test):,} test examples" + (f", {len(data.labels)} labels" if data.labels else "")
          + f"; selecting on validation {primary}" + (f"; data parallel over {world} processes" if world > 1 else ""))

    rows: dict[str, Row] = control_rows(data, primary) if cfg.controls and rank == 0 else {}
    saved: dict[str, Any] = {}
    worse = lower_is_better(primary)
    better = (lambda a, b: a < b) if worse else (lambda a, b: a > b)
    for init in cfg.init:
        tried: list[dict[str, Any]] = []
        for k, lr in enumerate([cfg.lr, *cfg.lr_grid]):
            keep = out / f".hf-lr{k}" if init == cfg.init[0] and rank == 0 else None
            tried.append({"lr": lr, **fit_seeds(cfg, init, lr, data, enc, tok, primary, better, keep)})
        best = tried[0]
        for t in tried[1:]:
            if t["validation_mean"] is not None and (best["validation_mean"] is None
                                                     or better(t["validation_mean"], best["validation_mean"])):
                best = t
        if len(tried) > 1:
            say(f"finetune: {init}: lr {best['lr']:g} chosen on mean validation {primary} ("
                  + ", ".join(f"{t['lr']:g}: {t['validation_mean']:.4f}" for t in tried
                              if t["validation_mean"] is not None) + ")")
        details = {**best["details"], "lr": best["lr"],
                   "lr_search": {f"{t['lr']:g}": t["validation_mean"] for t in tried},
                   "lr_search_seconds": {f"{t['lr']:g}": round(sum(t["seconds"].values()), 1) for t in tried}}
        rows[init] = Row("init", {s: {m: Score.of(v) for m, v in ms.items()} for s, ms in best["per_split"].items()},
                         best["seconds"], details)
        if init == cfg.init[0] and rank == 0:
            k = tried.index(best)
            shutil.rmtree(out / "hf", ignore_errors=True)
            (out / f".hf-lr{k}").rename(out / "hf")
            saved = {**best["saved"], "lr": best["lr"]}
            for j in range(len(tried)):
                shutil.rmtree(out / f".hf-lr{j}", ignore_errors=True)

    if rank != 0:
        return out
    metrics = FinetuneMetrics(task=cfg.task, primary_metric=primary, labels=data.labels, counts=counts,
                              left_out=data.left_out, splits_from=data.splits_from, rows=rows, saved=saved,
                              config=config_to_dict(cfg))
    atomic_write_json(out / "metrics.json", metrics.to_dict())
    files = [p for p in (out / "hf").iterdir() if p.is_file()] + [out / "metrics.json"]
    write_manifest(out, Manifest(
        stage="finetune", config=config_to_dict(cfg),
        inputs=[input_ref(cfg.model), *(input_ref(p) for p in (*cfg.data, *cfg.train, *cfg.validation, *cfg.test))],
        counts=counts, outputs=describe_outputs(out, files),
        extra={"task": cfg.task, "primary_metric": primary, "saved": saved,
               "test": {name: metrics.mean(name, "test") for name in rows}},
        wall_seconds=round(time.time() - t0, 1)))
    print(summary_table(metrics), flush=True)
    return out



def say(text: str) -> None:
    """Progress on rank 0 only (every process of a data-parallel fine-tune computes the same numbers)."""
    from training.runtime.recipe import data_parallel

    if data_parallel()[0] == 0:
        print(text, flush=True)


def tokenizer_identity(model_dir: str) -> str | None:
    """A hash of the tokenizer's vocabulary and pipeline; its truncation and padding settings (which a stage may
    have saved, e.g. an adopted tokenizer's row length) do not change the ids of a text."""
    import hashlib

    p = Path(model_dir) / "tokenizer.json"
    if not p.exists():
        return None
    spec = {k: v for k, v in json.loads(p.read_text(encoding="utf-8")).items() if k not in ("truncation", "padding")}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def load_teacher(teacher_dir: str, data: TaskData, model_dir: str):
    """The fine-tuned teacher of task-level distillation, checked to predict this task's labels in this order."""
    refuse_quantized(teacher_dir, "a distillation teacher (its logits are needed in fp32)")
    model, kind = load_model(teacher_dir)
    want = task_head_kind(data.task)
    if kind != want:
        raise ValueError(f"--teacher {teacher_dir} is a {kind}; a {data.task} task needs a fine-tuned {want}")
    if tokenizer_identity(teacher_dir) != tokenizer_identity(model_dir):
        raise ValueError(f"--teacher {teacher_dir} tokenizes differently from {model_dir}: the soft labels must be "
                         "for the same input ids")
    if data.task == "regression":
        if model.config.num_labels != 1:
            raise ValueError(f"--teacher {teacher_dir} has {model.config.num_labels} outputs; a regression needs one")
    elif (names := [model.config.id2label[i] for i in range(model.config.num_labels)]) != list(data.labels):
        raise ValueError(f"--teacher {teacher_dir} predicts labels {names}, this data has {list(data.labels)} "
                         "(in this order); distil from a model fine-tuned on the same labelled data")
    from training.finetuning.trainer import device

    return model.to(device()).eval()


def fit_seeds(cfg: FinetuneConfig, init: str, lr: float, data: TaskData, enc: dict[str, Any], tok: Any, primary: str,
              better: Any, keep: Path | None) -> dict[str, Any]:
    """Every seed of one init at one learning rate: scores per split, costs, and (with `keep`) the best seed's
    model saved there."""
    from training.finetuning.metrics import score
    from training.finetuning.trainer import build_model, fit, predict
    from training.models.export import save_hf

    per_split: dict[str, dict[str, dict[str, float]]] = {s: {} for s in SCORED}
    seconds, details, saved = {}, {}, {}
    recipe = cfg.recipe_at(lr)
    tag = f" lr {lr:g}" if cfg.lr_grid else ""
    teacher = load_teacher(cfg.teacher, data, cfg.model) if cfg.teacher else None
    for seed in cfg.seeds:
        ts = time.time()
        model = build_model(cfg.model, data, init, seed, recipe.dropout)
        history = fit(model, enc["train"], enc["validation"], data, recipe, seed, primary, tok.pad_token_id,
                      desc=f"finetune {init}{tag} seed {seed}", teacher=teacher, alpha=cfg.distill_alpha,
                      temperature=cfg.distill_temperature)
        for s in SCORED:  # test is scored here, once per run, with the weights chosen on validation
            for m, v in score(data, s, predict(model, enc[s], data, s, tok.pad_token_id, bf16=cfg.bf16)).items():
                per_split[s].setdefault(m, {})[str(seed)] = v
        seconds[str(seed)] = round(time.time() - ts, 1)
        details[str(seed)] = {k: v for k, v in history.items() if k != "evaluations"} | {
            "validation_curve": [(e["step"], round(e[primary], 4)) for e in history["evaluations"]]}
        val = per_split["validation"][primary][str(seed)]
        say(f"finetune: {init}{tag} seed {seed}: validation {primary} {val:.4f}, test {primary} "
              f"{per_split['test'][primary][str(seed)]:.4f} ({history['steps']} steps, {seconds[str(seed)]:.0f} s)")
        if keep is not None and (not saved or better(val, saved["validation"])):
            save_hf(model, tok, keep)
            saved = {"row": init, "seed": seed, "validation": val, "metric": primary}
    return {"per_split": per_split, "seconds": seconds, "details": details, "saved": saved,
            "validation_mean": Score.of(per_split["validation"][primary]).mean}

def summary_table(m: FinetuneMetrics) -> str:
    """A markdown table: each row's test metrics as mean ± sd over seeds."""
    names = METRICS[m.task] if m.task != "tokens" else (
        METRICS["tokens"] if "entity_f1" in next(iter(m.rows.values())).scores["test"] else ("token_accuracy",))
    lines = ["| row | seeds | " + " | ".join(f"test {n}" for n in names) + " |", "|---|---:|" + "---:|" * len(names)]
    order = [r for r in (*INITS, *CONTROLS) if r in m.rows]
    for r in order:
        sc = m.rows[r].scores["test"]
        cells = [fmt_score(sc.get(n)) for n in names]
        n_seeds = len(next(iter(sc.values())).per_seed) if m.rows[r].kind == "init" else "-"
        lines.append(f"| {r} | {n_seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt_score(s: Score | None) -> str:
    if s is None or s.mean is None:
        return "n/a"
    return f"{s.mean:.3f}" + (f" ± {s.sd:.3f}" if s.sd and len(s.per_seed) > 1 else "")


def main(argv: list[str] | None = None) -> None:
    run(parse_config(FinetuneConfig, "lmforge finetune", __doc__, argv))


if __name__ == "__main__":
    main()
