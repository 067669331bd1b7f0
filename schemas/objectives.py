"""The masking-objective registry: one record per objective, the facts every stage asks of it.

An objective decides what a shard row's mask variants hold (pipelines/shards/masking.py), which
tokenizer can serve it, and which kind of model trains on it (training/models/model_kinds.py `KINDS`: the
batch layout, the model class, the card's loss figure). Stages ask `objective(name)` instead of
comparing names. The functions that mask, batch and build a model live in the layers that may
import numpy, tokenizers and torch, keyed by the record: masking by `name`
(pipelines/shards/masking.py `MASKERS`), batches and models by `model_kind`
(training/pretraining/data.py `BATCHES`, training/models/model.py `WRAPPERS` and
`MODEL_FAMILIES`). tests/unit/test_registries.py
checks that every record has its entries there.

Adding an objective: a record here, its masking function in `MASKERS`; a new model kind only if
none of masked_lm / causal_lm / seq2seq fits its batches.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Objective:
    name: str
    """The shards stage's `--mask-objective` value, stored as `lmforge.objective` in every shard file."""
    summary: str
    """What it is, for --help."""
    model_kind: str
    """The model-kind registry's name (training.models.model_kinds.KINDS) of what trains on it: masked_lm, causal_lm
    or seq2seq. It decides the batch layout, the model class and the card's loss."""
    writes_mask: bool = False
    """Puts the tokenizer's mask token in the input (BERT's 80/10/10): the tokenizer needs one."""
    needs_word_starts: bool = False
    """Masks whole words or spans of words: the shards stage keeps each token's word start."""
    needs_sentinels: bool = False
    """Replaces spans with T5's <extra_id_N> sentinels: the tokenizer needs them (a unigram with extra_ids)."""
    stores_variants: bool = True
    """Stores K mask variants per row; False: the labels are the inputs (causal), nothing to precompute."""
    bounded_lengths: bool = False
    """Encoder inputs and targets have their own lengths (`lmforge.max_encoder_len` / `max_target_len`)."""
    absolute_positions: bool = True
    """Its model has learned absolute positions, so the preset's max_position must cover a row (T5's
    relative attention has none)."""
    eos_frame: bool = False
    """Each document is closed by eos (or sep) only, whatever the tokenizer's layout (a causal LM's stream)."""
    tokenizer: str = ""
    """The tokenizer family (pipelines.tokenizer_families) a run trains for it unless told otherwise (`lmforge run
    --objective`); empty: the run preset's (WordPiece, BERT's)."""


REGISTRY: dict[str, Objective] = {o.name: o for o in (
    Objective("mlm", "BERT", "masked_lm", writes_mask=True),
    Objective("whole_word", "BERT WWM", "masked_lm", writes_mask=True, needs_word_starts=True),
    Objective("span", "SpanBERT", "masked_lm", writes_mask=True, needs_word_starts=True),
    Objective("t5_span", "T5 span corruption", "seq2seq", needs_sentinels=True, bounded_lengths=True,
              absolute_positions=False, tokenizer="unigram"),
    Objective("causal", "no masks", "causal_lm", stores_variants=False, eos_frame=True, tokenizer="byte_bpe"),
)}

OBJECTIVES: tuple[str, ...] = tuple(REGISTRY)
MLM_OBJECTIVES: tuple[str, ...] = tuple(n for n, o in REGISTRY.items() if o.writes_mask)
"""Objectives whose batches are (input_ids, attention_mask, labels) for a masked LM such as BERT."""


def objective(name: str) -> Objective:
    """The record of `name`; ValueError naming the choices for anything else."""
    if name not in REGISTRY:
        raise ValueError(f"objective {name!r} is not one of {', '.join(OBJECTIVES)}")
    return REGISTRY[name]


def objectives_of_kind(model_kind: str) -> tuple[str, ...]:
    """The objectives a model kind trains on (its card's language-model loss comes from their valid splits)."""
    return tuple(n for n, o in REGISTRY.items() if o.model_kind == model_kind)



def help_text() -> str:
    """`mlm (BERT) | whole_word (BERT WWM) | ...` for the --mask-objective option."""
    return " | ".join(f"{o.name} ({o.summary})" for o in REGISTRY.values())


def tokenizer_problem(name: str, has_mask: bool, has_sentinels: bool, family: str = "") -> str | None:
    """Why a tokenizer (whether it has a mask token, sentinels; its layout `family`) cannot serve the objective,
    or None. The one check the shards stage runs before its first row."""
    o = objective(name)
    tokenizer = f"this {family} tokenizer" if family else "this tokenizer"
    if o.writes_mask and not has_mask:
        return (f"objective {name!r} needs a mask token, and {tokenizer} has none; train a wordpiece, "
                "bpe or byte_bpe tokenizer, or choose t5_span or causal")
    if o.needs_sentinels and not has_sentinels:
        return (f"objective {name!r} needs <extra_id_N> sentinels, and {tokenizer} has none; train a "
                "unigram tokenizer with extra_ids > 0")
    return None
