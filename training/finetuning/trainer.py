"""One fine-tune of one seed: build the model (pretrained or from scratch), train it, keep the best
checkpoint on validation, predict. Plain torch in one process: these tasks are thousands of
sentences, and a data-parallel engine would only add start-up time on a CPU.

The recipe is BERT's (Devlin et al. 2019, appendix A.3): AdamW, linear warm-up over the first
10% of steps then linear decay to 0, gradient clipping at 1.0, batch 32, 3 epochs, and the
checkpoint chosen on the validation split. Each evaluation on validation (every epoch, or
every `eval_every` steps) that beats the best so far keeps a copy of the weights; after
`patience` evaluations without a gain, training stops early.
"""
from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from training.finetuning.encode import Encoded, collate, tags_from_logits
from training.finetuning.metrics import lower_is_better, score


@dataclass(frozen=True)
class Recipe:
    lr: float = 5e-5
    epochs: int = 3
    batch_size: int = 32
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    clip: float = 1.0
    patience: int = 2
    min_steps: int = 0
    """More epochs, if needed, for at least this many optimizer steps, and no early stop before them: a few
    hundred sentences make a few dozen steps an epoch, and BERT's 3 epochs leave the head unconverged and scores
    swinging with the seed (Mosbach et al. 2021, "On the stability of fine-tuning BERT": train small datasets for
    more iterations). A classifier that predicts the majority class for its first epochs has not failed yet."""
    eval_every: int = 0
    """Steps between validation scores; 0: at the end of every epoch."""
    dropout: float | None = None
    """Override the model's hidden and attention dropout (None keeps its config's)."""
    bf16: bool = False
    """Forward and backward under bfloat16 autocast (weights and optimizer stay fp32). On a CPU with
    AVX512-BF16 it made a MiniLM step (32 x 64 tokens) 1.4x faster here (0.70 s vs 1.00 s)."""


def model_class(task: str):
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    return AutoModelForTokenClassification if task == "tokens" else AutoModelForSequenceClassification


def head_config(data) -> dict[str, Any]:
    """num_labels, id2label/label2id (so `pipeline(...)` prints the names) and the problem type."""
    if data.task == "regression":
        return {"num_labels": 1, "problem_type": "regression", "id2label": {0: "score"}, "label2id": {"score": 0}}
    names = data.labels
    kw = {"num_labels": len(names), "id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}}
    if data.task == "classification":
        kw["problem_type"] = "single_label_classification"
    return kw


def build_model(model_dir: str, data, init: str, seed: int, dropout: float | None = None):
    """The model for the task: `pretrained` loads model_dir's weights (a new head on top);
    `scratch` builds the same config with every weight drawn afresh from `seed`."""
    import torch
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the "newly initialised head" report is expected here
    hf_logging.disable_progress_bar()
    kw = head_config(data)
    if dropout is not None:
        kw.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    cls = model_class(data.task)
    torch.manual_seed(seed)
    if init == "pretrained":
        model = cls.from_pretrained(model_dir, **kw)
    else:
        model = cls.from_config(AutoConfig.from_pretrained(model_dir, **kw))
    return model.to(device())


def device() -> str:
    """A GPU where there is one, else the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _batches(n: int, size: int, seed: int | None) -> list[list[int]]:
    order = list(range(n))
    if seed is not None:
        random.Random(seed).shuffle(order)
    return [order[i:i + size] for i in range(0, n, size)]


def autocast(enabled: bool):
    """bfloat16 autocast on the model's device type (CPU here, CUDA where there is one)."""
    import torch

    return torch.autocast(device(), dtype=torch.bfloat16, enabled=enabled)


def predict(model, enc: Encoded, data, split: str, pad_id: int, batch_size: int = 64, bf16: bool = False) -> list[Any]:
    """Predictions for `data.<split>`: class ids, floats, or per-sentence tag names."""
    import torch

    model.eval()
    n = len(enc.input_ids)
    order = sorted(range(n), key=lambda i: len(enc.input_ids[i]))  # similar lengths pad less
    out: list[Any] = [None] * n
    examples = data.split(split)
    default = Counter(t for e in data.train for t in e.tags).most_common(1)[0][0] if data.task == "tokens" else None
    with torch.no_grad():
        for i in range(0, n, batch_size):
            rows = order[i:i + batch_size]
            batch = {k: v.to(device()) for k, v in collate(enc, rows, pad_id, data.task).items() if k != "labels"}
            with autocast(bf16):
                logits = model(**batch).logits.float()
            for j, r in enumerate(rows):
                if data.task == "classification":
                    out[r] = int(logits[j].argmax())
                elif data.task == "regression":
                    out[r] = float(logits[j, 0])
                else:
                    out[r] = tags_from_logits(enc, r, logits[j], data.labels, len(examples[r].tokens), default)
    return out


def soft_label_loss(student_logits, teacher_logits, labels, temperature: float):
    """The soft-label term over the positions that have a label (every example in classification, the first
    sub-words in tagging): training.runtime.recipe.soft_label_kl, Hinton et al.'s KL with DistilBERT's T^2.
    For regression (one output) the teacher's prediction is the soft target: the squared error to it, as
    TinyBERT distils STS-B (a temperature has nothing to soften there)."""
    import torch.nn.functional as F

    from training.runtime.recipe import soft_label_kl

    s, t = student_logits.float(), teacher_logits.float()
    if s.dim() == 2 and s.shape[-1] == 1:
        return F.mse_loss(s, t)
    if s.dim() == 3:  # tokens: (batch, length, labels) -> the labelled positions
        keep = labels != -100
        s, t = s[keep], t[keep]
    return soft_label_kl(s, t, temperature)


def _backward(model, train: Encoded, rows: list[int], data, pad_id: int, bf16: bool, teacher, alpha: float,
              temperature: float):
    """This process's slice of one batch, forward and backward (its loss scaled by its share of the batch, then the
    gradients summed over processes: sum_gradients' rule); the batch's mean loss, on the device."""
    import torch

    from training.runtime.recipe import data_parallel, sum_gradients

    rank, world = data_parallel()
    part = rows[len(rows) * rank // world: len(rows) * (rank + 1) // world]
    loss = torch.zeros((), device=device())
    share = len(part) / len(rows)
    if part:  # the last batch of an epoch may leave a process without rows
        batch = {k: v.to(device()) for k, v in collate(train, part, pad_id, data.task).items()}
        with autocast(bf16):
            out = model(**batch)
            loss = out.loss
            if teacher is not None:
                with torch.no_grad():
                    t_logits = teacher(**{k: v for k, v in batch.items() if k != "labels"}).logits
                loss = alpha * soft_label_loss(out.logits, t_logits, batch["labels"], temperature) + (1 - alpha) * loss
        (loss * share).backward()
    return sum_gradients(model, [loss.detach() * share])[0] if world > 1 else loss


def epochs_for(recipe: Recipe, examples: int) -> int:
    """The recipe's epochs, or more where that many make fewer than its `min_steps` steps."""
    per_epoch = -(-examples // recipe.batch_size)
    return max(recipe.epochs, -(-recipe.min_steps // per_epoch))


def stop_early(recipe: Recipe, stale: int, step: int) -> bool:
    """After `patience` validation scores without a gain, once the recipe's `min_steps` are done."""
    return bool(recipe.patience) and stale >= recipe.patience and step >= recipe.min_steps


def fit(model, train: Encoded, validation: Encoded, data, recipe: Recipe, seed: int, primary: str, pad_id: int,
        desc: str = "finetune", teacher=None, alpha: float = 0.5, temperature: float = 2.0) -> dict[str, Any]:
    """Train in place; at the end the model holds its best weights on validation. Returns the history.

    With a `teacher` (a fine-tuned model of the same task and labels), task-level distillation: the loss
    is alpha * soft_label_loss + (1 - alpha) * the gold-label loss."""
    import torch
    from tqdm import tqdm

    from training.pretraining.step_stats import StepRows, log_window_steps
    from training.runtime.recipe import build_optimizer, data_parallel, param_groups, rank_seed, schedule_fn

    rank, world = data_parallel()  # under `lmforge finetune --nproc N` each process takes a slice of every batch
    torch.manual_seed(rank_seed(seed, rank))  # one process: the seed as always; others their own dropout
    per_epoch = -(-len(train.input_ids) // recipe.batch_size)
    epochs = epochs_for(recipe, len(train.input_ids))
    total = per_epoch * epochs
    # BERT's fine-tuning AdamW (betas 0.9/0.999, eps 1e-8), linear warm-up and decay: the shared recipe
    opt = build_optimizer("adamw", param_groups(model, recipe.weight_decay), recipe.lr, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_fn("linear", int(recipe.warmup_ratio * total), total))
    every = recipe.eval_every or per_epoch
    worse = lower_is_better(primary)
    best: dict[str, Any] = {"value": None, "step": 0, "state": None}
    evals: list[dict[str, Any]] = []
    losses = StepRows(("loss",))  # on the device; read at evaluations only
    step, stale, t0 = 0, 0, time.time()
    bar = tqdm(total=total, desc=desc, unit="step", mininterval=5, leave=False, disable=rank != 0)
    stopped_early = False
    for epoch in range(epochs):
        model.train()
        for rows in _batches(len(train.input_ids), recipe.batch_size, seed * 1000 + epoch):
            loss = _backward(model, train, rows, data, pad_id, recipe.bf16, teacher, alpha, temperature)
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
            lr = sched.get_last_lr()[0]  # the rate this step uses
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            losses.add(step, lr, {"loss": loss})
            bar.update(1)
            if not log_window_steps(step, every, total):
                continue
            window = [r["loss"] for r in losses.flush()[-every:]]
            value = score(data, "validation", predict(model, validation, data, "validation", pad_id,
                                                      bf16=recipe.bf16))[primary]
            evals.append({"step": step, "epoch": epoch + 1, primary: value,
                          "train_loss": sum(window) / len(window)})
            bar.set_postfix({primary: f"{value:.3f}"}, refresh=False)
            if best["value"] is None or (value < best["value"] if worse else value > best["value"]):
                best = {"value": value, "step": step,
                        "state": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}}
                stale = 0
            else:
                stale += 1
            model.train()
            if stop_early(recipe, stale, step):
                stopped_early = True
                break
        if stopped_early:
            break
    bar.close()
    model.load_state_dict(best["state"])
    curve = [r["loss"] for r in losses.flush()]
    return {"steps": step, "planned_steps": total, "best_step": best["step"], f"best_validation_{primary}": best["value"],
            "stopped_early": stopped_early, "evaluations": evals, "seconds": round(time.time() - t0, 1),
            "first_loss": round(sum(curve[:10]) / max(1, len(curve[:10])), 4),
            "last_loss": round(sum(curve[-10:]) / max(1, len(curve[-10:])), 4)}
