"""Which kind of model a Hugging Face directory holds, and loading it with the matching Auto class.

The kind decides which quality figures apply: a masked LM has a masked-token loss, a causal LM a
perplexity, an encoder-decoder a span-corruption loss; a classifier or a bare encoder has none of
them (its quality is a task score). A directory that is not a loadable model fails here with what
is missing, not with a traceback from inside transformers.
"""
from __future__ import annotations

import json
from pathlib import Path

KINDS = ("masked_lm", "causal_lm", "seq2seq", "classifier", "token_classifier", "encoder")
WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json",
           "int8.pt", "pruned.pt")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "spiece.model", "vocab.json")


def model_kind(model_dir: str | Path) -> str:
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
    if arch.endswith("ForMaskedLM"):
        return "masked_lm"
    if arch.endswith(("ForCausalLM", "LMHeadModel")):
        return "causal_lm"
    if arch.endswith("ForConditionalGeneration"):
        return "seq2seq"
    if arch.endswith("ForSequenceClassification"):
        return "classifier"
    if arch.endswith("ForTokenClassification"):
        return "token_classifier"
    return "encoder"


def check_tokenizer(model_dir: str | Path) -> None:
    d = Path(model_dir)
    if not any((d / f).exists() for f in TOKENIZER_FILES):
        raise FileNotFoundError(f"{d}: no tokenizer ({', '.join(TOKENIZER_FILES)}); save it with the model "
                                "(lmforge stages do) or adopt one with `lmforge tokenizer --from`")


def auto_class(kind: str):
    import transformers as tf

    return {"masked_lm": tf.AutoModelForMaskedLM, "causal_lm": tf.AutoModelForCausalLM,
            "seq2seq": tf.AutoModelForSeq2SeqLM, "classifier": tf.AutoModelForSequenceClassification,
            "token_classifier": tf.AutoModelForTokenClassification, "encoder": tf.AutoModel}[kind]


def load_model(model_dir: str | Path):
    """(model, kind), loaded with the Auto class of its kind (int8 and head-pruned models as
    training/compress.py and training/prune.py saved them)."""
    from training.compress import is_quantized, load_int8
    from training.prune import PRUNE_FILE, load_pruned

    if is_quantized(model_dir):
        return load_int8(model_dir)
    if (Path(model_dir) / PRUNE_FILE).exists():
        return load_pruned(model_dir)
    kind = model_kind(model_dir)
    return auto_class(kind).from_pretrained(str(model_dir)), kind


def max_tokens(config) -> int | None:
    """How many tokens a model accepts: its position embeddings, less RoBERTa's offset (positions start
    after the padding id, so a 514-position RoBERTa takes 512)."""
    n = getattr(config, "max_position_embeddings", None)
    if n and "roberta" in (getattr(config, "model_type", "") or ""):
        pad = getattr(config, "pad_token_id", None)
        n -= (1 if pad is None else pad) + 1
    return n
