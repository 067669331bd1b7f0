"""The module a pretraining run trains, built for the shards: a fresh preset's model or a Hugging Face model to
continue (--init-from), wrapped for its objective (training.models.model), with the run's architecture choices.

    module = build_module(cfg, shards, tokenizer, ds_config)     # cfg: a training.pretraining.pretrain.PretrainConfig
    module.hf                                                   # the HF model that is exported
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

import torch

from schemas.objectives import objective as objective_record
from training.models.attention import ATTENTION, kernel_for
from training.models.model_kinds import KINDS
from training.models.presets import preset
from training.pretraining.data import ShardSet
from training.pretraining.run_plan import estimate_parameters

log = logging.getLogger("lmforge.pretrain")


def model_config(cfg: Any):
    """The preset's sizes with this run's architecture and dropout choices."""
    m = preset(cfg.model)
    tie = {"tied": True, "untied": False}.get(cfg.embeddings, m.tie_embeddings)
    m = dataclasses.replace(m, prenorm=cfg.prenorm, tie_embeddings=tie)
    if getattr(cfg, "position_init", "preset") not in ("preset", ""):
        m = dataclasses.replace(m, position_init=cfg.position_init)
    if cfg.max_position:
        m = dataclasses.replace(m, max_position=cfg.max_position)
    return m if cfg.dropout == -1.0 else dataclasses.replace(m, dropout=cfg.dropout)


def freeze_all_but_head(model) -> int:
    """requires_grad=False on every parameter but the MLM head's own (BERT's cls.predictions.transform
    and bias; the decoder matrix is the tied word embedding and stays frozen). Returns the count frozen."""
    head = [n for n, _ in model.named_parameters() if n.startswith("cls.predictions.")]
    if not head:
        raise ValueError(f"--freeze-encoder: {type(model).__name__} has no BERT MLM head (cls.predictions.*)")
    frozen = 0
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith("cls.predictions.")
        frozen += 0 if p.requires_grad else p.numel()
    return frozen


def check_same_tokenizer(tokenizer, model_dir: str) -> None:
    """--init-from: the model's own tokenizer (when its directory has one) must be the shards' one."""
    from transformers import AutoTokenizer

    try:
        theirs = AutoTokenizer.from_pretrained(model_dir).get_vocab()
    except (OSError, ValueError):  # no tokenizer files: only the vocabulary size is checked
        log.warning("--init-from %s has no tokenizer; only its vocabulary size is checked", model_dir)
        return
    ours = tokenizer.get_vocab()
    if theirs != ours:
        diff = sorted(set(theirs.items()) ^ set(ours.items()), key=lambda kv: kv[1])[:3]
        raise ValueError(f"--init-from {model_dir}: its tokenizer differs from the shards' ({len(theirs)} vs "
                         f"{len(ours)} entries; first differences {diff}); adopt it with `lmforge tokenizer --from "
                         f"{model_dir}` and rebuild the shards")


def build_module(cfg: Any, shards: ShardSet, tokenizer, ds_config: dict[str, Any]) -> torch.nn.Module:
    """The training module; under ZeRO-3 its parameters are partitioned as they are created: transformers'
    HfDeepSpeedConfig, made before the model and kept alive on the module, makes `from_pretrained` (--init-from)
    and `_from_config` (a fresh model, training.models.model.instantiate) build it inside deepspeed.zero.Init."""
    from training.models.model import build_for_objective, load_for_objective  # transformers: in the workers only

    hf_ds = None
    if cfg.zero_stage == 3:
        from transformers.integrations import HfDeepSpeedConfig

        hf_ds = HfDeepSpeedConfig(ds_config)  # must exist before the model is built
    if cfg.init_from:
        check_same_tokenizer(tokenizer, cfg.init_from)
        module = load_for_objective(shards.objective, cfg.init_from, shards.vocab_size, shards.pad_id,
                                    shards.seq_len)
        log.info("init from %s: %s", cfg.init_from, module.loading_info or "every weight loaded")
    else:
        module = build_for_objective(shards.objective, model_config(cfg), shards.vocab_size, shards.pad_id,
                                     shards.eos_id, shards.seq_len)
    module._hf_deepspeed_config = hf_ds
    return module


def estimated_parameters(cfg: Any, shards: ShardSet) -> int:
    """The model's parameter count before it is built (the ZeRO plan needs it first): from the preset's sizes, or
    from --init-from's config.json; an encoder-decoder's blocks count twice."""
    if cfg.init_from:
        from transformers import AutoConfig

        c = AutoConfig.from_pretrained(cfg.init_from)
        hidden = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None) or c.d_model
        layers = getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer", None) or 2 * c.num_layers
        inner = getattr(c, "intermediate_size", None) or getattr(c, "n_inner", None) or getattr(c, "d_ff", 4 * hidden)
        positions = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", 0) or 0
        return estimate_parameters(hidden, layers, inner or 4 * hidden, c.vocab_size, positions,
                                   getattr(c, "tie_word_embeddings", True))
    m = model_config(cfg)
    layers = m.num_layers * (2 if KINDS[objective_record(shards.objective).model_kind].encoder_decoder else 1)
    return estimate_parameters(m.hidden_size, layers, m.intermediate_size, shards.vocab_size, m.max_position,
                               m.tie_embeddings)


def set_attention(module: torch.nn.Module, attention: str, device: torch.device) -> str:
    """`document` attention's kernel on the module (training.models.attention): FlexAttention on CUDA, SDPA with a dense
    mask elsewhere; `row` leaves the model as it is. Returns what the log and metrics say."""
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, got {attention!r}")
    hf = module.hf
    if attention == "row":
        return f"row ({getattr(hf.config, '_attn_implementation', '?')})"
    kernel = kernel_for(device)
    module.attention_kernel = kernel
    if kernel == "flex":
        hf.set_attn_implementation("flex_attention")
    return f"document ({'FlexAttention, BlockMask' if kernel == 'flex' else 'SDPA, block-diagonal mask'})"
