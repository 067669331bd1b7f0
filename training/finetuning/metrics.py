"""Task metrics as GLUE and CoNLL report them, from scikit-learn, SciPy and seqeval.

- classification: accuracy, macro-F1 (the unweighted mean of per-class F1 over the classes of
  the label set, so a class the model never predicts counts as F1 0), Matthews correlation
  (multi-class: Gorodkin's R_K, as sklearn computes it);
- regression: Pearson and Spearman correlation, mean squared error. A constant prediction has
  no correlation; it is reported as 0.0 (SciPy returns NaN and warns);
- tokens: entity-level precision, recall and F1 as seqeval (conlleval) defines them, micro-averaged
  over entity types, for BIO/BIOES tags; token accuracy over every word for any tag set.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence


def classification_metrics(gold: Sequence[int], pred: Sequence[int], num_labels: int) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    labels = list(range(num_labels))
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "macro_f1": float(f1_score(gold, pred, labels=labels, average="macro", zero_division=0)),
        "mcc": float(matthews_corrcoef(gold, pred)),
    }


def regression_metrics(gold: Sequence[float], pred: Sequence[float]) -> dict[str, float]:
    from scipy.stats import pearsonr, spearmanr

    n = len(gold)
    mse = sum((g - p) ** 2 for g, p in zip(gold, pred)) / max(1, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConstantInputWarning: handled below
        r = float(pearsonr(gold, pred)[0]) if n > 1 else math.nan
        rho = float(spearmanr(gold, pred)[0]) if n > 1 else math.nan
    return {"pearson": 0.0 if math.isnan(r) else r, "spearman": 0.0 if math.isnan(rho) else rho, "mse": mse}


def token_metrics(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], bio: bool) -> dict[str, float]:
    """`gold` and `pred`: per sentence, one tag per word."""
    if any(len(g) != len(p) for g, p in zip(gold, pred)) or len(gold) != len(pred):
        raise ValueError("token_metrics: every sentence needs one predicted tag per gold tag")
    words = sum(len(g) for g in gold)
    out = {"token_accuracy": sum(a == b for g, p in zip(gold, pred) for a, b in zip(g, p)) / max(1, words)}
    if bio:
        from seqeval.metrics import f1_score, precision_score, recall_score

        g, p = [list(s) for s in gold], [list(s) for s in pred]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # UndefinedMetricWarning when nothing is predicted
            out.update(entity_f1=float(f1_score(g, p, zero_division=0)),
                       entity_precision=float(precision_score(g, p, zero_division=0)),
                       entity_recall=float(recall_score(g, p, zero_division=0)))
    return out


def primary_metric(task: str, bio: bool) -> str:
    """The metric that selects the checkpoint on validation and the seed that is saved."""
    return {"classification": "accuracy", "regression": "pearson"}.get(task) or ("entity_f1" if bio else "token_accuracy")


def lower_is_better(metric: str) -> bool:
    return metric == "mse"


PROPORTIONS = frozenset({"accuracy", "token_accuracy"})
"""Metrics that are a share of independent test items (a sentence, a token): Wilson's interval over the items applies
(training/evaluation/card_summary.py)."""


def score(data, split: str, pred) -> dict[str, float]:
    """Metrics of `pred` on `data.<split>` (a `training.finetuning.dataset.TaskData`).

    `pred`: class ids (classification), floats (regression) or per-sentence tag-name lists (tokens).
    """
    examples = data.split(split)
    if len(pred) != len(examples):
        raise ValueError(f"{len(pred)} predictions for {len(examples)} {split} examples")
    if data.task == "classification":
        ids = data.label2id
        return classification_metrics([ids[e.label] for e in examples], list(pred), len(ids))
    if data.task == "regression":
        return regression_metrics([e.label for e in examples], [float(p) for p in pred])
    return token_metrics([e.tags for e in examples], pred, data.is_bio)
