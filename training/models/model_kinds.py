"""Which kind of model a Hugging Face directory holds: the model-kind registry.

The kind decides how a model loads (its transformers Auto class) and which quality figures apply: a
masked LM has a masked-token loss, a causal LM a perplexity, an encoder-decoder a span-corruption
loss; a classifier or a bare encoder has none of them (its quality is a task score). A directory that
is not a loadable model fails here with what is missing, not with a traceback from inside transformers.

One record per kind in KINDS; everything else asks `model_kind(dir)` or `KINDS[name]`. The int8 and
head-pruned formats, which hold a model of one of these kinds, are in training/models/model_formats.py.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from schemas.objectives import objective, objectives_of_kind


@dataclass(frozen=True)
class ModelKind:
    name: str
    """The kind's name in cards and logs."""
    architectures: tuple[str, ...]
    """Endings of the config's `architectures[0]` that mean this kind (empty: the fallback, a bare encoder)."""
    auto_class: str
    """The transformers Auto class that loads it."""
    scores_task: bool = False
    """It carries a task head: its quality is a task score (accuracy, F1), measured on the labelled set."""
    task_head_for: tuple[str, ...] = ()
    """The labelled-set tasks (schemas.finetune) whose head it is."""
    lm_figure: str = ""
    """What its language-model loss is, as the card names it (empty: it has none)."""
    loss_name: str = ""
    """The same loss in two words, as the evaluation report's columns and lines name it (held-out <loss_name>)."""
    scored_tokens: str = ""
    """Which tokens that loss is over, as the report counts them."""
    shift_labels: bool = False
    """Position t predicts token t + 1 (a causal LM): the loss shifts logits and labels by one."""
    encoder_decoder: bool = False
    """An encoder-decoder: its forward pass needs decoder inputs (built from the labels when scoring, a start token
    when timing), and `get_encoder()` is its encoder."""
    perplexity: bool = False
    """The card also reports exp(loss), the perplexity."""
    prompted: bool = False
    """A language model the card scores few-shot on a classification task (training/evaluation/few_shot.py): a
    decoder continues the prompt, an encoder-decoder fills its sentinel."""
    pseudo_perplexity: bool = False
    """Its pseudo-perplexity applies (each token masked in turn: a masked LM)."""
    prunes_heads: bool = False
    """A classifier fine-tuned from it can lose attention heads (training.compression.prune: BERT-style blocks)."""

    @property
    def lm_objectives(self) -> tuple[str, ...]:
        """Shard objectives whose valid split gives its language-model loss on the card (schemas.objectives
        records of this kind; none: it has no such loss)."""
        return objectives_of_kind(self.name)


KINDS: dict[str, ModelKind] = {k.name: k for k in (
    ModelKind("masked_lm", ("ForMaskedLM",), "AutoModelForMaskedLM",
              lm_figure="held-out masked-token cross-entropy (nats)", loss_name="masked-token loss",
              scored_tokens="masked tokens",
              pseudo_perplexity=True, prunes_heads=True),
    ModelKind("causal_lm", ("ForCausalLM", "LMHeadModel"), "AutoModelForCausalLM",
              lm_figure="held-out next-token cross-entropy (nats)", loss_name="next-token loss", scored_tokens="next tokens",
              shift_labels=True,
              perplexity=True, prompted=True),
    ModelKind("seq2seq", ("ForConditionalGeneration",), "AutoModelForSeq2SeqLM",
              lm_figure="held-out span-corruption target cross-entropy (nats)", loss_name="span-corruption loss",
              scored_tokens="span-target tokens",
              encoder_decoder=True, prompted=True),
    ModelKind("classifier", ("ForSequenceClassification",), "AutoModelForSequenceClassification", True,
              ("classification", "regression")),
    ModelKind("token_classifier", ("ForTokenClassification",), "AutoModelForTokenClassification", True, ("tokens",)),
    ModelKind("encoder", (), "AutoModel"),
)}
FALLBACK = "encoder"


def predicts_next(objective_name: str) -> bool:
    """Shards of this objective train a decoder: each position's target is the next token (its kind shifts labels);
    an ablation of decoders adds perplexity and few-shot accuracy."""
    return KINDS[objective(objective_name).model_kind].shift_labels


WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json",
           "int8.pt", "pruned.pt")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "spiece.model", "vocab.json")


def model_kind(model_dir: str | Path) -> str:
    """The kind of the HF model in `model_dir`, from its config's architecture; FileNotFoundError naming what is
    missing when it is not a model directory."""
    d = Path(model_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such model directory")
    cfg_path = d / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{d}: no config.json, so not a Hugging Face model directory (an lmforge stage's "
                                "model is in its hf/ folder)")
    if not any((d / w).exists() for w in WEIGHTS):
        raise FileNotFoundError(f"{d}: no weights ({' or '.join(WEIGHTS[:2])})")
    archs = json.loads(cfg_path.read_text()).get("architectures") or []
    arch = archs[0] if archs else ""
    return next((k.name for k in KINDS.values() if k.architectures and arch.endswith(k.architectures)), FALLBACK)


def task_head_kind(task: str) -> str:
    """The kind whose head a labelled set's task trains (classification -> classifier, tokens -> token_classifier)."""
    for k in KINDS.values():
        if task in k.task_head_for:
            return k.name
    raise ValueError(f"no model kind has a head for task {task!r}")


def check_tokenizer(model_dir: str | Path) -> None:
    d = Path(model_dir)
    if not any((d / f).exists() for f in TOKENIZER_FILES):
        raise FileNotFoundError(f"{d}: no tokenizer ({', '.join(TOKENIZER_FILES)}); save it with the model "
                                "(lmforge stages do) or adopt one with `lmforge tokenizer --from`")


def auto_class(kind: str):
    """The transformers Auto class of `kind`."""
    import transformers as tf

    return getattr(tf, KINDS[kind].auto_class)


def max_tokens(config) -> int | None:
    """How many tokens a model accepts: its position embeddings, less RoBERTa's offset (positions start
    after the padding id, so a 514-position RoBERTa takes 512)."""
    n = getattr(config, "max_position_embeddings", None)
    if n and "roberta" in (getattr(config, "model_type", "") or ""):
        pad = getattr(config, "pad_token_id", None)
        n -= (1 if pad is None else pad) + 1
    return n
