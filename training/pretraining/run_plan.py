"""What a pretraining run does on the machine it lands on, decided once and said with the reason: the ZeRO stage,
compilation and its mode, the micro batch and accumulation, the precision path, and whether attention stays within
documents (`lmforge pretrain --dry-run` prints it; the workers decide the same way and log it; metrics.json keeps
it).

    cfg, plan = resolve(given, world=1, accelerator="cuda", device_bytes=80e9, params=110_000_000)
    plan.zero_stage, plan.zero_reason        # 0, "one process: ..."
    plan.micro_batch                         # "auto": the worker probes its GPU (training.pretraining.micro_batch)
    cfg, plan = resolve(given, ..., probed=(64, 1))   # the plan again, with the micro batch the GPU holds

`given` is a training.pretraining.pretrain.PretrainConfig as the user gave it; the returned config has the plan's
choices filled in (ZeRO stage, micro batch, accumulation, compile and its mode), and nothing rewrites it after:
the worker reads its choices from the config and the plan it got here. The one fact a plan can wait for, the micro
batch a GPU holds under `--micro-batch-size auto`, makes the plan again from `given` (`probed`), never a patch of
one field. Pure given its arguments: tested without a GPU.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from common.config import AUTO
from training.pretraining.compiled import compile_choice, compile_mode_choice
from training.pretraining.memory_plan import plan_zero_stage, split_global_batch

CPU_MICRO_BATCH = 16
"""`--micro-batch-size auto` on the CPU: the demo's 16 rows (no probe: a CPU step's memory is not the limit)."""


@dataclass(frozen=True)
class RunPlan:
    zero_stage: int
    zero_reason: str
    compile: bool
    compile_reason: str
    micro_batch: int | str
    """The micro batch, or `auto` until the worker has probed its GPU."""
    micro_batch_reason: str
    grad_accum: int
    precision: str
    """How the matrix products run: fp32, bf16 under torch autocast (stage 0), DeepSpeed's bf16 or fp16."""
    clip: str
    """Who clips the gradients, and how."""
    compile_mode: str
    """torch.compile's mode where compiling (training.pretraining.compiled.compile_mode_choice)."""
    compile_mode_reason: str
    documents: bool
    """Attention within each document of a packed row (`--attention document`), not across the row."""

    def lines(self) -> list[str]:
        return [f"ZeRO-{self.zero_stage}: {self.zero_reason}", f"compile {'on' if self.compile else 'off'}: "
                f"{self.compile_reason}", f"micro batch {self.micro_batch}: {self.micro_batch_reason}",
                f"precision: {self.precision}", f"clipping: {self.clip}"]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def estimate_parameters(hidden: int, layers: int, intermediate: int, vocab: int, positions: int,
                        tied: bool = True) -> int:
    """Parameters of a BERT-shaped masked LM (embeddings, blocks, tied head), within a few percent of GPT-2's and
    RoBERTa's: bert_base with 30,522 pieces and 512 positions: 109,514,298, as transformers counts it. Untied,
    the decoder's own vocab x hidden matrix and bias more."""
    embed = vocab * hidden + positions * hidden + 2 * hidden + 2 * hidden
    block = 4 * (hidden * hidden + hidden) + 2 * hidden + 2 * hidden * intermediate + intermediate + hidden + 2 * hidden
    head = hidden * hidden + hidden + 2 * hidden + vocab + (0 if tied else vocab * (hidden + 1))
    return embed + layers * block + head


def resolve(cfg: Any, world: int, accelerator: str, device_bytes: int | None, params: int,
            probed: tuple[int, int] | None = None) -> tuple[Any, RunPlan]:
    """The run's choices for `world` processes on `accelerator` with `device_bytes` each (None: unknown) and a
    model of about `params` parameters: (the config with them filled in, the plan saying why). `probed`: the micro
    batch and accumulation the GPU probe found for `--micro-batch-size auto` (training.pretraining.setup)."""
    if cfg.global_batch_size and cfg.grad_accum != 1:
        raise ValueError("give --global-batch-size or --grad-accum, not both (the accumulation follows from the "
                         "global batch and the micro batch)")
    zero = plan_zero_stage(cfg.zero_stage, world, device_bytes, params)
    compiled, why_compile = compile_choice(cfg.compile, accelerator, zero.stage)
    micro, accum = cfg.micro_batch_size, cfg.grad_accum
    if micro == AUTO and accelerator != "cuda":
        micro, why_micro = CPU_MICRO_BATCH, "the CPU default (--micro-batch-size auto probes GPUs only)"
    elif micro == AUTO:
        why_micro = "the largest that fits, probed on the GPU at start-up (training.pretraining.micro_batch)"
    else:
        why_micro = "asked for (--micro-batch-size)"
    if probed:
        micro, accum = probed
        why_micro = "the largest that fits, probed on the GPU at start-up (training.pretraining.micro_batch)"
        if cfg.global_batch_size:
            why_micro += f"; {accum} accumulation step(s) make the global batch of {cfg.global_batch_size}"
    elif cfg.global_batch_size and micro != AUTO:
        micro, accum = split_global_batch(cfg.global_batch_size, world, int(micro))
        why_micro += f"; {accum} accumulation step(s) make the global batch of {cfg.global_batch_size}"
    mode, why_mode = compile_mode_choice(cfg.compile_mode, accelerator, world, zero.stage, accum)
    resolved = dataclasses.replace(cfg, zero_stage=zero.stage, micro_batch_size=micro, grad_accum=accum, compile=compiled,
                                   compile_mode=mode)
    if cfg.fp16:
        precision = "fp16 with DeepSpeed's dynamic loss scaling"
    elif cfg.bf16:
        precision = ("bf16 matrix products under torch autocast, fp32 weights and AdamW state" if zero.stage == 0
                     else "DeepSpeed's bf16 (bf16 weights, fp32 master copy in the optimizer)")
        if accelerator == "cpu" and cpu_bf16_instructions() is False:
            precision += ("; this CPU has no bf16 instructions (AVX512-BF16, AMX), so bf16 is emulated: several times "
                          "slower than fp32 here (--no-bf16)")
    else:
        precision = "fp32" + (" (TF32 matrix products)" if accelerator == "cuda" else "")
    clip = ("lmforge: one fused norm, the scale applied inside torch's fused AdamW" if zero.stage == 0 and not cfg.fp16
            else "DeepSpeed's optimizer, over its flat buffers")
    return resolved, RunPlan(zero.stage, zero.reason, compiled, why_compile, micro, why_micro, accum, precision, clip,
                             mode, why_mode, cfg.attention == "document")


def cpu_bf16_instructions(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU multiplies bf16 in hardware (the avx512_bf16 or amx_bf16 flag); None where /proc/cpuinfo
    does not say (not Linux, not x86)."""
    try:
        text = open(cpuinfo, encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), None)
    if flags is None:
        return None
    return "avx512_bf16" in flags or "amx_bf16" in flags
