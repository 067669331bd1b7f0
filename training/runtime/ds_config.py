"""Pretraining's DeepSpeed config: lmforge's defaults, and a user's `--deepspeed-config FILE` merged over them.

`cfg` below is a training.pretraining.pretrain.PretrainConfig: its micro batch, accumulation, ZeRO stage and precision
are what DeepSpeed runs, and what a file sets becomes the config's (`apply_deepspeed_file`), so the loader,
the resume check and the manifest agree with the engine.
"""
from __future__ import annotations

from typing import Any

from common.config import read_json_object

DEEPSPEED_FILE_KEYS = {"train_micro_batch_size_per_gpu": "micro_batch_size", "gradient_accumulation_steps": "grad_accum"}


def read_deepspeed_file(path: str) -> dict[str, Any]:
    user = read_json_object(path, "--deepspeed-config")
    for key in ("optimizer", "scheduler"):
        if key in user:
            raise ValueError(f"--deepspeed-config {path}: remove {key!r}; lmforge builds the optimizer and LR schedule "
                             "itself (--optimizer, --schedule, --lr, --warmup-ratio) so that resume and the flows see them")
    if "train_batch_size" in user:
        raise ValueError(f"--deepspeed-config {path}: remove 'train_batch_size'; give train_micro_batch_size_per_gpu "
                         "and gradient_accumulation_steps (the global batch then follows the world size)")
    return user


def apply_deepspeed_file(cfg: Any) -> None:
    """The file's micro batch, accumulation, ZeRO stage and bf16 become the config's (so the loader, the resume
    check and the manifest see what DeepSpeed runs)."""
    user = read_deepspeed_file(cfg.deepspeed_config)
    for key, field in DEEPSPEED_FILE_KEYS.items():
        if key in user:
            setattr(cfg, field, int(user[key]))
    if "stage" in user.get("zero_optimization", {}):
        cfg.zero_stage = int(user["zero_optimization"]["stage"])
    if "enabled" in user.get("bf16", {}):
        cfg.bf16 = bool(user["bf16"]["enabled"])
    if "enabled" in user.get("fp16", {}):
        cfg.fp16 = bool(user["fp16"]["enabled"])


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, nested dicts merged key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


CLIP = 1.0
"""Gradient clipping's max norm (BERT's), unless a --deepspeed-config file sets gradient_clipping."""


def lmforge_clips(cfg: Any) -> bool:
    """Stage 0 without fp16: lmforge clips (training.pretraining.engine) and DeepSpeed is told not to. DeepSpeed's own clip at
    stage 0 takes a norm per parameter and an all-reduce (~600 ops a bert_base step); lmforge's is one fused
    norm, and the scale rides in torch's fused AdamW (`grad_scale`) instead of a pass over the gradients.
    ZeRO 1-3 and fp16 clip inside DeepSpeed's own optimizers, over flat buffers."""
    return cfg.zero_stage == 0 and not cfg.fp16


def clip_norm(cfg: Any) -> float:
    """The max gradient norm: CLIP, or the --deepspeed-config file's gradient_clipping."""
    if cfg.deepspeed_config:
        return float(read_deepspeed_file(cfg.deepspeed_config).get("gradient_clipping", CLIP))
    return CLIP


def deepspeed_config(cfg: Any, load_universal: bool = False) -> dict[str, Any]:
    """The engine's config: lmforge's defaults, then --deepspeed-config's file over them. The global batch is
    micro_batch_size * grad_accum * world size. At stage 0, bf16 is torch autocast (fp32 weights, gradients and
    AdamW state, bf16 matrix products: what a plain PyTorch loop does) rather than DeepSpeed's bf16 optimizer,
    which keeps a second copy of every weight and walks them one by one each step."""
    autocast = cfg.zero_stage == 0 and cfg.bf16
    base: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "gradient_clipping": 0.0 if lmforge_clips(cfg) else CLIP,
        "zero_optimization": {"stage": cfg.zero_stage},
        # torch AdamW / LAMB as the client optimizer: DeepSpeed's CPU Adam would JIT-compile C++ for ~2 min.
        "zero_allow_untested_optimizer": True,
        # bf16 has fp32's exponent range, so no loss scale and nothing to skip: DeepSpeed's per-gradient overflow
        # check (amax + amin + isfinite on each of ~200 gradients, 1,000+ kernel launches a step) cost 21 of
        # bert_base's 89 ms a step on an H200 (docs/BENCHMARKS.md, GPU). A non-finite loss or gradient norm stops
        # the run at the next log step instead (training.pretraining.pretrain.check_finite). fp16 keeps DeepSpeed's check.
        "bf16": {"enabled": cfg.bf16 and not autocast, **({"check_grad_overflow": False} if cfg.bf16 and not autocast else {})},
        "steps_per_print": 1 << 30,  # we log ourselves
    }
    if autocast:
        base["torch_autocast"] = {"enabled": True, "dtype": "bfloat16"}
    if cfg.fp16:  # dynamic loss scaling (loss_scale 0), DeepSpeed's defaults otherwise
        base["fp16"] = {"enabled": True, "loss_scale": 0}
    if cfg.zero_stage == 3:
        # the HF export gathers the partitioned weights itself (training.pretraining.outputs.write_outputs)
        base["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = False
    user = read_deepspeed_file(cfg.deepspeed_config) if cfg.deepspeed_config else {}
    # what lmforge does itself at stage 0 (clipping; bf16 as autocast) is not handed to DeepSpeed a second time
    taken = {"gradient_clipping"} if lmforge_clips(cfg) else set()
    taken |= {"bf16"} if autocast else set()
    merged = merge(base, {k: v for k, v in user.items() if k not in taken})
    if load_universal:
        merged = merge(merged, {"checkpoint": {"load_universal": True}})
    return merged
