"""The Hugging Face files lmforge writes must load in transformers 4.x and 5.x.

transformers 5 saves a fast tokenizer's config with `"tokenizer_class": "TokenizersBackend"`, a class
4.x does not have (AutoTokenizer then fails), and its special-token list as `extra_special_tokens`,
which 4.x reads as a dict of named tokens. `portable_tokenizer_config` rewrites a saved
tokenizer_config.json to what both read: `PreTrainedTokenizerFast` (5.x maps it to the same backend
class; 4.x loads tokenizer.json with it as is) and `additional_special_tokens` (5.x converts it).
Keys only 5.x writes about how it loaded the files (`backend`, `is_local`, `local_files_only`) go.
tests/integration/test_transformers4.py loads the result with a transformers 4.x release.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

HF_DIR = "hf"
"""A stage's transformers model folder under its output (pretrain, distill, compress)."""
TOKENIZER_CONFIG = "tokenizer_config.json"
LOAD_TIME_KEYS = ("backend", "is_local", "local_files_only")


def portable_tokenizer_config(model_dir: str | os.PathLike, input_names: list[str] | None = None) -> Path | None:
    """Rewrite `<model_dir>/tokenizer_config.json` in place (atomically); None if there is none. `input_names`: what the
    tokenizer returns (`model_input_names`), for a model whose forward takes no token_type_ids (T5, a decoder):
    transformers 4.x's fast tokenizer returns them by default, and `model(**tok(text))` fails on T5."""
    path = Path(model_dir) / TOKENIZER_CONFIG
    if not path.exists():
        return None
    cfg = json.loads(path.read_text())
    if input_names:
        cfg["model_input_names"] = list(input_names)
    if cfg.get("tokenizer_class") in ("TokenizersBackend", None):
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = cfg.pop("extra_special_tokens", None)
    if isinstance(extra, list) and extra:
        cfg["additional_special_tokens"] = extra
    elif isinstance(extra, dict) and extra:
        cfg["extra_special_tokens"] = extra  # named tokens: what both versions mean by the key
    for key in LOAD_TIME_KEYS:
        cfg.pop(key, None)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def require_model_dir(path: str | os.PathLike, flag: str) -> None:
    """A model folder on this machine, before anything is written: FileNotFoundError naming `flag` when
    it is not there or holds no config.json. A Hugging Face hub id (`bert-base-uncased`, `org/name`) is
    left to transformers; a path (absolute, relative with a folder, or one that exists) is checked here,
    where transformers would try it as a hub id and print three chained tracebacks."""
    text, p = str(path), Path(path)
    if not (p.is_absolute() or text.startswith((".", "~")) or p.exists() or text.count("/") > 1):
        return
    if not p.is_dir():
        raise FileNotFoundError(f"{flag} {text}: no such model directory")
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"{flag} {text}: no config.json, so not a Hugging Face model folder (a finished "
                                "pretraining's is its hf/)")
