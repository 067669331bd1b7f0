"""The peer of `bench train`: the Hugging Face Trainer on the model and rows lmforge trains on.

    python -m bench.train.hf_trainer --shards DIR --tokenizer DIR --model demo --steps 60 --warmup 10 --out r.json
    OMP_NUM_THREADS=1 python -m torch.distributed.run --nproc_per_node=2 -m bench.train.hf_trainer ...  # DDP, gloo

The `BertForMaskedLM` lmforge's pretraining builds for the preset (training.models.model.build_for_objective,
the model inside its SparseMLM wrapper, so config and initialisation are the same), the
shards' train rows as plain token ids (their precomputed masks unused), masked on the fly by
`DataCollatorForLanguageModeling(mlm_probability=0.15)`; on causal shards the decoder it builds (`LlamaForCausalLM`
for the `any` presets, `GPT2LMHeadModel` for a gpt2 preset), with
the causal collator (`mlm=False`: labels are the inputs, -100 at padding); the Trainer's defaults otherwise (its
fused torch AdamW, DDP over gloo under torchrun, find_unused_parameters off), with lmforge's learning rate, betas, epsilon,
weight decay, clipping and linear warm-up. No evaluation, saving, logging or reporting. A
callback stamps the end of every optimizer step; rank 0 writes the steady-state seconds (from
the end of step `--warmup` to the end of the last step, so loading and collating count) to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from common.config import opt, require


@dataclass
class TrainHFBenchConfig:
    shards: str = opt(help="a shards stage directory (MLM objective)")
    tokenizer: str = opt(help="its tokenizer stage directory (the collator's special tokens)")
    model: str = opt(help="training.models.model preset")
    steps: int = opt(help="optimizer steps timed after the warm-up")
    warmup: int = opt(help="optimizer steps run first and not timed")
    micro_batch_size: int = opt(16, "rows per process per step")
    dropout: float = opt(-1.0, "override the preset's dropout (-1: keep it)")
    lr: float = opt(1e-3, "peak learning rate (lmforge's)")
    seed: int = opt(0, "seeds the model's initialisation, the data order and the masks (TrainingArguments.seed)")
    save: str = opt("", "save the trained BertForMaskedLM here (bench learn scores it; empty: not saved)")

    def __post_init__(self) -> None:
        require(self.warmup >= 1 and self.steps >= 1,
                "--warmup and --steps must be >= 1 (the timing starts at the end of a warm-up step)")


def trainer_run(shards_dir: str, tokenizer_dir: str, model_name: str, micro_batch_size: int, steps: int, warmup: int,
                dropout: float = -1.0, lr: float = 1e-3, bf16: bool = False, compile: bool = False, profile: int = 0,
                use_cpu: bool = True, out_dir: Path | None = None, seed: int = 0, save: str = "") -> dict[str, Any]:
    """The Trainer's run of warmup + profile + steps optimizer steps; rank 0's timings, the rest's None. `profile`
    steps after the warm-up are profiled (training.pretraining.step_profile), then `steps` timed."""
    import dataclasses

    import torch
    from transformers import (
        AutoTokenizer,
        BertForMaskedLM,
        DataCollatorForLanguageModeling,
        GPT2LMHeadModel,
        LlamaForCausalLM,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )
    from transformers.utils import logging as hf_logging

    from schemas.objectives import objective
    from training.models.model import build_for_objective, num_parameters, preset
    from training.models.model_kinds import KINDS
    from training.pretraining.data import ShardSet
    from training.pretraining.step_profile import StepProfiler, enable_kernel_events

    hf_logging.set_verbosity_error()
    if profile:
        enable_kernel_events()
    shards = ShardSet.open(shards_dir)
    table = shards.read("train")
    ids, lengths = table.column("input_ids").to_pylist(), table.column("length").to_pylist()
    # the unmasked rows, cut at their length: the collator pads each batch to its longest row
    rows = [{"input_ids": r[:n]} for r, n in zip(ids, lengths)]
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    causal = KINDS[objective(shards.objective).model_kind].shift_labels  # GPT-2's kind
    # a causal LM's labels are its inputs (-100 at padding; GPT-2 shifts them), an MLM's drawn afresh each batch
    collator = DataCollatorForLanguageModeling(tok, mlm=not causal, mlm_probability=0.15)
    torch.manual_seed(seed)
    m = preset(model_name) if dropout < 0 else dataclasses.replace(preset(model_name), dropout=dropout)
    model = build_for_objective(shards.objective, m, shards.vocab_size, shards.pad_id, shards.eos_id,
                                shards.seq_len).hf
    if not isinstance(model, (LlamaForCausalLM, GPT2LMHeadModel) if causal else BertForMaskedLM):
        raise SystemExit(f"bench.train.hf_trainer: preset {model_name} on {shards.objective} shards builds a {type(model).__name__}; "
                         "the peer is the HF Trainer on BertForMaskedLM (MLM shards) or a decoder (causal: "
                         "LlamaForCausalLM, GPT2LMHeadModel)")
    if isinstance(model, BertForMaskedLM) and not model.config.tie_word_embeddings:
        # untied (the CPU presets'), transformers 5 unties the head's bias from `cls.predictions.bias` too, which then
        # feeds nothing: frozen, as a user would, so DDP (find_unused_parameters off, below) does not wait for it
        model.cls.predictions.bias.requires_grad_(False)
    total = warmup + profile + steps
    world = int(os.environ.get("WORLD_SIZE", "1"))
    out_dir = out_dir or Path(".")
    args = TrainingArguments(
        output_dir=str(out_dir / "hf-trainer-output"), max_steps=total,
        per_device_train_batch_size=micro_batch_size, learning_rate=lr, adam_beta1=0.9, adam_beta2=0.98,
        adam_epsilon=1e-6, weight_decay=0.01, max_grad_norm=1.0, lr_scheduler_type="linear",
        warmup_steps=int(0.06 * total), use_cpu=use_cpu, ddp_backend="gloo" if world > 1 and use_cpu else None,
        bf16=bf16, torch_compile=compile,
        # the Trainer's default (True) costs an extra pass over the autograd graph each step, and PyTorch
        # warns that this model has no unused parameter: a user would switch it off
        ddp_find_unused_parameters=False,
        eval_strategy="no", save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, dataloader_drop_last=True, seed=seed)
    device = torch.device("cpu") if use_cpu else torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))

    class StepClock(TrainerCallback):
        """Stamps the end of every optimizer step; profiles steps warmup+1 .. warmup+profile."""

        def __init__(self) -> None:
            self.ends: list[float] = []
            self.prof = StepProfiler(f"{warmup + 1}-{warmup + profile}" if profile else "", out_dir, device, write=False)

        def on_step_begin(self, args, state, control, **kwargs):
            self.prof.before(state.global_step + 1)

        def on_step_end(self, args, state, control, **kwargs):
            if device.type == "cuda" and len(self.ends) in (warmup + profile - 1, total - 1):
                torch.cuda.synchronize(device)  # the timed window's two ends only
            self.ends.append(time.perf_counter())
            self.prof.after(state.global_step)

    clock = StepClock()
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator, callbacks=[clock])
    trainer.train()
    if trainer.args.process_index != 0:
        return {}
    if save:
        model.save_pretrained(save)
    if len(clock.ends) != total:
        raise SystemExit(f"bench.train.hf_trainer: {len(clock.ends)} steps ran, expected {total}")
    first = warmup + profile  # the timed steps follow the warm-up and the profiled ones
    seconds = clock.ends[-1] - clock.ends[first - 1]
    each = [b - e for e, b in zip(clock.ends[first - 1:], clock.ends[first:])]
    per_step = statistics.median(each) if device.type == "cpu" else seconds / steps  # as bench.train.step_peers times
    return {"seconds": seconds, "seconds_per_step": per_step, "steps": steps, "warmup": warmup,
            "world_size": world, "threads": torch.get_num_threads(), "micro_batch_size": micro_batch_size,
            "rows_per_step": micro_batch_size, "seq_len": shards.seq_len, "head_share": 1.0,
            "num_parameters": num_parameters(model), "optimizer": str(getattr(args.optim, "value", args.optim)),
            "profile": clock.prof.summary, "device": str(device),
            "peak_memory_gb": torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None,
            "step_seconds": [b - e for e, b in zip(clock.ends, clock.ends[1:])]}


def parse(argv: list[str] | None) -> tuple[TrainHFBenchConfig, argparse.Namespace]:
    ap = bench_parser("python -m bench.train.hf_trainer", __doc__, TrainHFBenchConfig)
    ap.add_argument("--out", help="JSON file rank 0 writes (required)")
    return parse_bench(ap, TrainHFBenchConfig, argv, required=("--out",))


def main(argv: list[str] | None = None) -> int:
    a, ns = parse(argv)
    result = trainer_run(a.shards, a.tokenizer, a.model, a.micro_batch_size, a.steps, a.warmup, a.dropout, a.lr,
                         out_dir=Path(ns.out).parent, seed=a.seed, save=a.save)
    if result:
        Path(ns.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
