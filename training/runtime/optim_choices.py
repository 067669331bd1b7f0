"""The recipe's named choices and the check between them, without torch (training.runtime.recipe builds them): the
stages' configs read these, and `lmforge pretrain`, which only launches its workers, imports no torch for them."""
from __future__ import annotations

SCHEDULES = ("linear", "cosine", "inverse_sqrt")
OPTIMIZERS = ("adamw", "lamb")


def check_optimizer(name: str, zero_stage: int, fp16: bool) -> None:
    """LAMB scales each tensor's update by ||w|| / ||update|| of that tensor. ZeRO 1-3 and DeepSpeed's fp16
    optimizer give the client optimizer flat partitions of many tensors, so the ratio would be per partition,
    and the result would change with the world size: refused, with the way out. (bf16 at stage 0 is torch
    autocast, training.runtime.ds_config: the optimizer sees the model's own tensors.)"""
    if name == "lamb" and (zero_stage > 0 or fp16):
        raise ValueError(f"--optimizer lamb needs per-tensor norms, but ZeRO-{zero_stage}"
                         f"{' and fp16' if fp16 else ''} hand the optimizer flat partitions, so its "
                         "trust ratio would be per partition and change with the number of processes; use "
                         "--optimizer adamw, or --zero-stage 0 (fp32 or bf16) for LAMB")
