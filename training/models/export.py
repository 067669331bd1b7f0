"""What the training stages share after the loop: the tokenizer check, the HF export, loss summaries.

No DeepSpeed here; `pretrain` (rank 0) and `distill` both call these.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, PreTrainedModel

from schemas.hf import HF_DIR, portable_tokenizer_config  # noqa: F401 (HF_DIR re-exported)

METRICS_NAME = "metrics.json"

SPECIAL = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}


def load_tokenizer(tokenizer_dir: str | Path, max_length: int | None = None):
    """The tokenizer stage's output as a HF fast tokenizer, with BERT's special tokens declared.

    A bare `tokenizer.json` loads without knowing which token is [MASK]; naming them here makes
    the exported model work with `pipeline("fill-mask")` and the finetune stage's padding.
    """
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    vocab = tok.get_vocab()
    missing = {k: v for k, v in SPECIAL.items() if getattr(tok, k, None) is None and v in vocab}
    if missing:
        tok.add_special_tokens(missing)
    if max_length is not None:
        tok.model_max_length = max_length
    return tok


def check_tokenizer(tok, vocab_size: int, pad_id: int, mask_id: int, where: str) -> None:
    """The shards were made with this tokenizer: its ids fit the vocabulary and the special ids agree.

    `vocab_size` may exceed len(tok) (a shards stage may round it up for faster matmuls).
    """
    problems = []
    if len(tok) > vocab_size:
        problems.append(f"tokenizer has {len(tok)} tokens, more than vocab_size {vocab_size}")
    if tok.pad_token_id != pad_id:
        problems.append(f"[PAD] id {tok.pad_token_id} != {pad_id}")
    if tok.mask_token_id != mask_id:
        problems.append(f"[MASK] id {tok.mask_token_id} != {mask_id}")
    if problems:
        raise ValueError(f"tokenizer does not match {where}: " + "; ".join(problems))


def input_names(model) -> list[str] | None:
    """["input_ids", "attention_mask"] for a model whose forward takes no token_type_ids (T5, Llama), else None (the
    tokenizer's own: BERT's three)."""
    import inspect

    return None if "token_type_ids" in inspect.signature(model.forward).parameters else ["input_ids", "attention_mask"]


def save_hf(model: PreTrainedModel, tokenizer, out_dir: str | Path) -> list[Path]:
    """Save model (safetensors) and tokenizer to `out_dir`, atomically: a temporary sibling
    directory is filled, then renamed over the old one. Returns the files written."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        # loadable by transformers 4.x too, returning only what the model's forward takes
        portable_tokenizer_config(tmp, input_names(model))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(p for p in out_dir.rglob("*") if p.is_file())


def loss_summary(curve: list[dict[str, Any]], window: int | None = None) -> dict[str, Any]:
    """First and last loss, each the mean over `window` steps (a tenth of the run, 1..50 steps),
    so one noisy batch does not decide whether training worked."""
    losses = [float(p["loss"]) for p in curve]
    if not losses:
        return {"first_loss": None, "last_loss": None, "loss_window": 0}
    w = window or max(1, min(50, len(losses) // 10))
    return {
        "first_loss": sum(losses[:w]) / len(losses[:w]),
        "last_loss": sum(losses[-w:]) / len(losses[-w:]),
        "loss_window": w,
    }
