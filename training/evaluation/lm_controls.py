"""The control of a language model's held-out loss: what token frequencies alone score on the same tokens.

A held-out cross-entropy of 6.9 nats says nothing by itself. The unigram control is the cross-entropy of the train
split's token frequencies (add-one smoothed over the vocabulary) on exactly the tokens `card.lm_quality` scores: the
valid split's masked tokens of mask variant 0 for a masked LM, every next token for a causal LM, the span targets
(sentinels and the spans' tokens) for an encoder-decoder, whose frequencies are the train split's targets'. A model at the
unigram loss has learnt which tokens are common and nothing about their context. Its top layers then map every input
to nearly the same output, which a fine-tune can use less than random weights. Measured (docs/BENCHMARKS.md,
"learning per token", `bench learn --transfer`): the demo preset after 300 steps sat 0.22 nats under this control
and fine-tuned 11.9 points of VADER accuracy below its random-init twin; after 1,500 steps, 0.81 nats under, 1.7
points below (an interval that holds zero). `LITTLE_CONTEXT` is where a card says the model learnt little beyond
frequencies.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

LITTLE_CONTEXT = 0.5
"""Nats under the unigram control below which a pretrained model is said to have learnt little context (BERT-style
models that fine-tune well sit several nats under it; a model 0.5 nats under predicts its tokens only 1.6x better)."""


TARGET_ROWS = 50_000
"""Train rows whose span targets give an encoder-decoder's frequencies (its targets are built from the masks, not
read off the rows; 50,000 rows hold millions of target tokens, plenty for a unigram)."""


def train_frequencies(shards, targets: bool = False) -> Any:
    """Token counts over the train split's real positions (padding left out), add-one smoothed: int64[vocab]. With
    `targets` (t5_span shards) over the span targets an encoder-decoder is scored on (sentinels and the spans' tokens,
    mask variant 0) of the first TARGET_ROWS rows instead: the input rows hold no sentinel."""
    import numpy as np

    counts = np.ones(shards.vocab_size, np.int64)
    if targets:
        from training.pretraining.batches import build_batch

        table = shards.read("train")
        rows = min(table.num_rows, TARGET_ROWS)
        for start in range(0, rows, 1024):
            y = build_batch(table, np.arange(start, min(start + 1024, rows)), 0)["labels"].numpy()
            counts += np.bincount(y[y != -100], minlength=shards.vocab_size)[:shards.vocab_size]
        return counts
    for rb in shards.read("train").to_batches():
        if rb.num_rows == 0:
            continue
        ids = rb.column("input_ids")
        off = ids.offsets.to_numpy()
        flat = ids.values.to_numpy()[off[0]:off[-1]].reshape(rb.num_rows, -1)
        real = np.arange(flat.shape[1])[None, :] < rb.column("length").to_numpy()[:, None]
        counts += np.bincount(flat[real], minlength=shards.vocab_size)[:shards.vocab_size]
    return counts


def unigram_loss(shards_dir: str | Path, shift: bool, *, frequencies_from: str | Path | None = None,
                 split: str = "valid", max_rows: int = 0, batch_rows: int = 1024) -> dict[str, Any]:
    """The unigram control on the shards' `split` (valid, or all: train and valid, as the evaluate stage reads a
    reference set): {value (nats), tokens}. The frequencies are the train split's of `frequencies_from` (the
    pretraining's own shards, when the scored ones are another text: a corpus ablation's reference set), else of
    the scored shards. `shift`: score next tokens (a causal LM's labels, shifted as the model shifts them); else the
    labelled positions as they are (masked tokens). `max_rows`: only the first rows, as an evaluation capped at
    some batches reads them."""
    import numpy as np
    import pyarrow as pa

    from schemas.objectives import objective
    from training.models.model_kinds import KINDS
    from training.pretraining.batches import build_batch
    from training.pretraining.shard_set import ShardSet

    shards = ShardSet.open(shards_dir)
    source = ShardSet.open(frequencies_from) if frequencies_from else shards
    if source.vocab_size != shards.vocab_size:
        raise ValueError(f"{frequencies_from}: a vocabulary of {source.vocab_size} tokens, {shards_dir} has "
                         f"{shards.vocab_size}: token frequencies need the same tokenizer")
    counts = train_frequencies(source, targets=KINDS[objective(shards.objective).model_kind].encoder_decoder)
    log_p = np.log(counts / counts.sum())
    table = shards.read("valid") if split == "valid" else pa.concat_tables([shards.read("train"), shards.read("valid")])
    rows = min(table.num_rows, max_rows) if max_rows else table.num_rows
    total, n = 0.0, 0
    for start in range(0, rows, batch_rows):
        labels = build_batch(table, np.arange(start, min(start + batch_rows, rows)), 0)["labels"].numpy()
        if shift:
            labels = labels[:, 1:]
        y = labels[labels != -100]
        total += float(-log_p[y].sum())
        n += int(y.size)
    return {"value": round(total / n, 4) if n else None, "tokens": n}


def context_line(loss: float, control: float, figure: str = "held-out masked-token loss") -> tuple[str, str | None]:
    """('held-out ... 6.87 nats against 7.09 for token frequencies alone (0.22 nats of context)', a warning or None)."""
    gained = control - loss
    line = (f"{figure} {loss:.3f} nats against {control:.3f} for token frequencies alone (the unigram control): "
            + (f"{gained:.2f} nats learnt from context" if gained >= 0 else f"{-gained:.2f} nats worse than them"))
    warning = None
    if gained < 0:
        warning = (f"the pretrained model scores {-gained:.2f} nats worse than token frequencies alone: it has not yet "
                   "learnt even which tokens are common, so its task scores say nothing of pretraining's worth; "
                   "pretrain longer (more steps or time)")
    elif gained < LITTLE_CONTEXT:
        warning = (f"the pretrained model is only {gained:.2f} nats under token frequencies alone: it has learnt little "
                   "beyond which tokens are common, so a fine-tune from it can do worse than from random weights; "
                   "pretrain longer (more steps or time) before reading its task scores as pretraining's worth")
    return line, warning
