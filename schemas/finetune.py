"""The fine-tune stage's contract: task kinds, split names and `metrics.json` (`lmforge.finetune_metrics/v1`).

`metrics.json` holds one entry per *row*: every model init that was fine-tuned (`pretrained`,
`scratch`: the same architecture from a random start) and every control (`majority`,
`tfidf_lr`). A row has, per split it was scored on (`validation`, `test`), each metric's
value per seed and its mean and sample standard deviation over seeds; a control without
randomness has one "seed" (`null`) and sd 0. Readers (the evaluate stage, `bench transfer`)
go through `FinetuneMetrics`, not through keys.

Prepared task directory (`lmforge labeled prepare NAME --output DIR`, `pipelines.labeled`):
`data.jsonl` (one example per line with `id`, `split` = train | validation | test, and either
`text` (+ a pair column) and `label`, or `tokens` and `tags` lists), `finetune.json` (the
`lmforge finetune --config` options naming the task, the data file and its columns),
`LICENCE.txt` (the source's licence), `README.md`, and last `manifest.json`.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FINETUNE_METRICS_VERSION = "lmforge.finetune_metrics/v1"

TASKS = ("classification", "regression", "tokens")
"""classification: one text or a pair -> a class; regression: -> a float; tokens: a tag per word."""
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class LabeledColumn:
    """One column of a labelled file, declared here once: `lmforge finetune`'s option, `lmforge labeled file`'s and
    `lmforge run`'s flags and the flows' form field are all `<key>_column` and take their default and texts from it."""

    key: str
    """What the column holds: text, text_pair, label, split, id, tokens or tags (`Columns`' attribute in
    training/finetuning/dataset.py)."""
    default: str
    """The column's name in a file when none is given; empty: none (a single text, not a pair)."""
    help: str
    """`lmforge finetune --help`'s text."""
    form: str
    """The flows' form text: there the field is empty by default, meaning this default or the source's own."""

    @property
    def option(self) -> str:
        """The option's name: `text_column`, the flag `--text-column`."""
        return f"{self.key}_column"


LABELED_COLUMNS = (
    LabeledColumn("text", "text", "column with the text", "text column of a labelled data file (empty: text)"),
    LabeledColumn("text_pair", "", "column with the second text of a pair (empty: single texts)",
                  "second text column for sentence-pair tasks (empty: none)"),
    LabeledColumn("label", "label", "column with the label (a class name or integer, or a float for regression)",
                  "label column of a labelled data file (empty: label)"),
    LabeledColumn("split", "split", "column naming each row's split (train / validation / test)",
                  "split column of a labelled data file (train/validation/test; empty: split, and a file without one "
                  "is split for you: seeded, stratified by label)"),
    LabeledColumn("id", "id", "column with a stable row id for the hash split (else the text is hashed)",
                  "id column of a labelled data file (empty: id, else the text's digest)"),
    LabeledColumn("tokens", "tokens", "tokens: JSONL column with the list of words",
                  "token-tagging files: the column with each sentence's words (empty: tokens)"),
    LabeledColumn("tags", "tags", "tokens: JSONL column with the list of tags",
                  "token-tagging files: the column with each word's tag (empty: tags)"),
)
"""A labelled file's columns, in the order every command and form lists them."""
COLUMN = {c.key: c for c in LABELED_COLUMNS}
LABELED_FILE_OPTIONS = ("task", *(c.option for c in LABELED_COLUMNS))
"""What a run says about a labelled file: its task kind and its columns (options of `lmforge labeled file` and of
`lmforge finetune`, fields of the flows' form)."""
INITS = ("pretrained", "scratch")
"""pretrained: the model's weights; scratch: its config with freshly initialised weights (the BERT papers' control)."""
CONTROLS = ("majority", "tfidf_lr")
"""majority: the train split's most frequent class (regression: its mean; tokens: most frequent tag per word);
tfidf_lr: TF-IDF word 1-2 + char 2-5 grams with logistic regression (regression: ridge; tokens: word, affix
and context features with logistic regression), regularisation chosen on validation."""

METRICS = {
    "classification": ("accuracy", "macro_f1", "mcc"),
    "regression": ("pearson", "spearman", "mse"),
    "tokens": ("entity_f1", "entity_precision", "entity_recall", "token_accuracy"),
}
"""As GLUE reports them: accuracy, macro-F1 and Matthews correlation; Pearson and Spearman (and the
mean squared error); seqeval's entity-level F1 for BIO/BIOES tags, token accuracy for any tags.
Token tasks whose tags are not BIO/BIOES report token_accuracy only."""


@dataclass
class Score:
    """One metric of one row on one split."""

    per_seed: dict[str, float | None]
    """Seed (as a string, JSON keys are strings; "null" for deterministic controls) -> value."""
    mean: float | None = None
    sd: float | None = None
    """Sample standard deviation over seeds (n-1 in the denominator); 0 for a single seed."""

    @classmethod
    def of(cls, per_seed: dict[str, float | None]) -> Score:
        vals = [v for v in per_seed.values() if v is not None and not math.isnan(v)]
        if not vals:
            return cls(per_seed, None, None)
        mean = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
        return cls(per_seed, mean, sd)


@dataclass
class Row:
    """A fine-tuned init or a control: its scores per split and metric, and what it cost."""

    kind: str
    """"init" or "control"."""
    scores: dict[str, dict[str, Score]]
    """split -> metric -> Score."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Seed -> wall seconds of fitting (and scoring) that seed."""
    details: dict[str, Any] = field(default_factory=dict)
    """Per seed: steps, best epoch, stopped early, chosen regularisation, ...; for an init also `lr` (the rate
    its scores come from), `lr_search` (rate -> mean validation score) and `lr_search_seconds` (what each rate cost)."""


@dataclass
class FinetuneMetrics:
    task: str
    primary_metric: str
    """The metric used for model selection on validation and for choosing the saved seed."""
    labels: list[str] | None
    """Class names (classification) or tag names (tokens) in id order; None for regression."""
    counts: dict[str, Any]
    """Examples per split, rows left out per reason, truncation counts."""
    left_out: list[dict[str, Any]]
    """The first left-out rows: file, line, reason, detail (all are counted in counts)."""
    splits_from: dict[str, str]
    """Where each split came from: a file, the split column, a hash of the id, or held out from train."""
    rows: dict[str, Row]
    saved: dict[str, Any]
    """Which row and seed hf/ holds, and its validation score."""
    config: dict[str, Any]
    schema: str = FINETUNE_METRICS_VERSION

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FinetuneMetrics:
        if d.get("schema") != FINETUNE_METRICS_VERSION:
            raise ValueError(f"finetune metrics schema {d.get('schema')!r}, expected {FINETUNE_METRICS_VERSION!r}")
        rows = {name: Row(r["kind"], {sp: {m: Score(**s) for m, s in ms.items()} for sp, ms in r["scores"].items()},
                          r.get("seconds", {}), r.get("details", {})) for name, r in d["rows"].items()}
        return cls(**{**d, "rows": rows})

    @classmethod
    def read(cls, path: str | Path) -> FinetuneMetrics:
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: not an lmforge fine-tune metrics file ({e})") from e

    def mean(self, row: str, split: str = "test", metric: str | None = None) -> float | None:
        return self.rows[row].scores[split][metric or self.primary_metric].mean
