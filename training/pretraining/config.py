"""pretrain's options (`python -m training.pretraining.pretrain --help` lists them) and its step count; training.pretraining.pretrain runs them."""
from __future__ import annotations

from dataclasses import dataclass

from common.config import AUTO, opt, require
from schemas.objectives import OBJECTIVES
from training.models.attention import ATTENTION
from training.models.presets import MODEL_PRESETS, POSITION_INITS, preset
from training.pretraining.compiled import COMPILE_MODES, KERNEL_TUNING
from training.pretraining.step_profile import parse_window
from training.runtime.ds_config import apply_deepspeed_file
from training.runtime.optim_choices import OPTIMIZERS, SCHEDULES, check_optimizer

TRAINABLE = OBJECTIVES
"""Every registered objective: MLM shards train a BERT, causal a Llama-style decoder (or a GPT-2 preset), t5_span a T5 (training.models.model.build_for_objective
builds the model of the objective's kind; tests/unit/test_registries.py checks each kind has a builder)."""


EMBEDDINGS = ("preset", "tied", "untied")
"""--embeddings: the preset's layout, or the output projection tied to / apart from the token embeddings."""


@dataclass
class PretrainConfig:
    shards: str = opt(help="Shards stage directory (manifest.json, train/ and valid/ Arrow streams).", path=True)
    tokenizer: str = opt(help="Tokenizer stage directory (tokenizer.json and its HF config).", path=True)
    output: str = opt(help="Stage directory to write: checkpoints/, hf/, metrics.json, manifest.json.", path=True)
    model: str = opt("demo", help="Model preset, one of " + ", ".join(MODEL_PRESETS) + " (training.models.model; "
                                  "Turc et al.'s miniatures bert_tiny 2x128, bert_mini 4x256, bert_small 4x512, "
                                  "bert_medium 8x512).")
    prenorm: bool = opt(False, help="Pre-LN transformer (LayerNorm before each sublayer; transformers' "
                                    "RobertaPreLayerNormForMaskedLM) instead of BERT's post-LN, for MLM shards.")
    embeddings: str = opt("preset", help="A fresh model's output projection: `tied` to the token embeddings "
                                         "(BERT's layout), `untied` (a matrix of its own), or the `preset`'s: untied "
                                         "for tiny, demo and the bert_* miniatures, whose tied rows collapse on a "
                                         "CPU-sized run (training.models.presets.ModelConfig.tie_embeddings).")
    position_init: str = opt("preset", help="How a fresh model's learned position table starts: `random` (N(0, "
                                            "0.02), BERT's), `sinusoidal` (Vaswani et al.'s table at the same "
                                            "scale, still learned) or the `preset`'s (random). BERT, RoBERTa and "
                                            "GPT-2 only: Llama's rotary and T5's relative positions have no table.")
    dropout: float = opt(-1.0, help="Dropout of the fresh model (-1: the preset's). Short pretraining runs see each "
                                    "row about once and do better without (Cramming).")
    init_from: str = opt("", help="Continue pretraining this Hugging Face model directory (domain-adaptive pretraining) "
                                  "instead of a fresh --model preset; its tokenizer must be the shards' (lmforge "
                                  "tokenizer --from the same directory), a mismatch is an error.", path=True)
    freeze_encoder: bool = opt(False, help="Train only the MLM head's transform and output bias, the encoder and the "
                                           "(tied) embeddings frozen: fits a head to an encoder that has none, e.g. a "
                                           "sentence-embedding model, to measure its masked-token loss as it is.")
    steps: int = opt(0, help="Optimizer steps to run; 0 means run `epochs` full epochs.")
    time_budget_minutes: float = opt(0.0, help="Train for this many minutes of the training loop instead of --steps/"
                                               "--epochs; warm-up and decay then follow elapsed time, as in Cramming "
                                               "(Geiping & Goldstein 2022). Not bit-reproducible: steps depend on speed.")
    epochs: int = opt(1, help="Full passes over the train split when steps is 0.")
    micro_batch_size: int | str = opt("auto", help="Sequences per process per forward pass, or auto: on a GPU the "
                                                  "largest that fits (probed at start-up, cached per model, row "
                                                  "length and GPU; training.pretraining.micro_batch), on the CPU 16.")
    global_batch_size: int = opt(0, help="Sequences per optimizer step over all processes (0: micro batch x "
                                         "--grad-accum x processes); the accumulation steps follow from it and the "
                                         "micro batch, so the same run on another GPU keeps its batch.")
    grad_accum: int = opt(1, help="Micro-batches accumulated per optimizer step (derived from --global-batch-size "
                                  "when that is given).")
    lr: float = opt(1e-3, help="Peak learning rate (small BERTs tolerate 1e-3; BERT-base used 1e-4).")
    warmup_ratio: float = opt(0.06, help="Fraction of steps spent warming the LR up linearly (RoBERTa's 6%), then "
                                         "the --schedule's decay.")
    schedule: str = opt("linear", help="LR decay after the warm-up: linear (to 0, BERT/RoBERTa), cosine (to 0, GPT-3) "
                                       "or inverse_sqrt (sqrt(warmup/step), open-ended; Transformer, T5).")
    optimizer: str = opt("adamw", help="adamw (torch's fused AdamW, on CPU and CUDA) or lamb (You et al. 2019 "
                                       "for large batches; pytorch-optimizer's Lamb, DeepSpeed's FusedLamb on CUDA).")
    weight_decay: float = opt(0.01, help="Weight decay on matrices; biases and LayerNorm get none.")
    max_position: int = opt(0, help="Learned positions of a fresh model (0: the preset's, 512 for BERTs, 1024 for "
                                    "GPT-2, 2048 for smollm_135m); at least the shards' row length, so the model accepts longer inputs "
                                    "than it was trained on.")
    seed: int = opt(1234, help="Seeds the model init, the per-epoch shuffles and dropout (offset by rank).")
    zero_stage: int | str = opt("auto", help="DeepSpeed ZeRO stage: 0 (plain data parallel), 1 (optimizer state "
                                             "sharded), 2 (+ gradients), 3 (+ parameters; the HF export gathers "
                                             "them), or auto: 0 on one process or where the model's weights, "
                                             "gradients and AdamW state fit in half of each device's memory, else "
                                             "the lowest stage that fits (training.pretraining.memory_plan; --dry-run says why).")
    compile: bool | None = opt(None, help="torch.compile the transformer blocks and the loss head "
                                          "(training.pretraining.compiled); unset: on with CUDA below ZeRO-3, off on the CPU.")
    compile_mode: str = opt("auto", help="torch.compile mode: auto (reduce-overhead on one GPU at ZeRO-0 without "
                                         "accumulation, where it was measured; default elsewhere), default, "
                                         "reduce-overhead (CUDA graphs) or max-autotune-no-cudagraphs.")
    kernel_tuning: str = opt("auto", help="How inductor configures its generated GPU kernels: auto (coordinate-descent "
                                          "on CUDA, where it was measured), heuristic, or coordinate-descent (each "
                                          "kernel timed at neighbouring block sizes as it compiles: longer compiles, "
                                          "faster fused LayerNorm backward).")
    attention: str = opt("row", help="row: a token attends to its whole packed row; document: only to its own "
                                     "document's tokens, positions restarting at each document start "
                                     "(training.models.attention; FlexAttention on CUDA, a block-diagonal SDPA mask on "
                                     "the CPU). MLM and causal shards. row is the default by measurement (docs/"
                                     "BENCHMARKS.md \"attention\": at 128-token rows, 1.3 documents a row, document "
                                     "attention's gain was inside the spread over seeds, at 7% more time a step).")
    deepspeed_config: str = opt("", help="A DeepSpeed JSON config merged over lmforge's defaults (infra/deepspeed/*.json); "
                                         "its micro batch, accumulation, ZeRO stage and bf16 replace the options'. "
                                         "The optimizer and scheduler stay lmforge's (--optimizer, --schedule).", path=True)
    bf16: bool = opt(False, help="Train in bfloat16 (fp32 weights kept by the optimizer and exported). On CUDA the "
                                 "launcher turns it on unless --fp16 or --fp32 is given; on CPU fp32 is the default.")
    fp32: bool = opt(False, help="Train in fp32 even on a GPU that has bf16 (TF32 matmuls stay on).")
    fp32_residual: bool = opt(False, help="With bf16 as autocast (ZeRO-0) on CUDA, keep LayerNorm outputs, the "
                                          "residual stream, in fp32 as autocast does; by default they are bf16 there, "
                                          "half the memory traffic of the kernels around the matrix products "
                                          "(training.models.residual). The CPU keeps fp32.")
    fp16: bool = opt(False, help="Train in float16 with DeepSpeed's dynamic loss scaling: for CUDA GPUs before compute "
                                 "capability 8.0, which have no bf16; refused on CPU.")
    dist_timeout_minutes: float = opt(30.0, help="How long a collective waits for the slowest process before the "
                                                 "run fails (DeepSpeed's default is 10): rank 0's checkpoint "
                                                 "conversion on --resume and the HF export happen inside it.")
    log_every: int = opt(10, help="Optimizer steps between progress lines and metrics.jsonl records; the step "
                                  "counters are summed over processes and read only then.")
    eval_every: int = opt(0, help="Also validate every N optimizer steps (0: only after training).")
    eval_batches: int = opt(10, help="Validation batches per process at each validation; 0 skips validation.")
    profile_steps: str = opt("", help="Profile optimizer steps FIRST-LAST (e.g. 20-24) with torch.profiler: ops and, on "
                                      "CUDA, kernels per step and the GPU's busy share, in output/profile/summary.json "
                                      "and metrics.json, a Chrome trace beside them (training.pretraining.step_profile).")
    tensorboard: bool = opt(True, help="Also write a TensorBoard event log to output/tensorboard (if installed).")
    save_every: int = opt(0, help="Also save a checkpoint every N optimizer steps (0: only at the end), so a run "
                                  "that dies can continue with --resume.")
    resume: bool = opt(False, help="Continue from the newest checkpoint in output/checkpoints whose sha256 digests "
                                   "match (an older good one if the newest is damaged): weights, optimizer, LR "
                                   "schedule, loader position and each rank's RNG. On the same world size the "
                                   "finished run matches one that never stopped; on another, the checkpoint is "
                                   "converted to DeepSpeed's universal format and the data continue at the same "
                                   "sample. The training options must be the same (micro batch and accumulation "
                                   "may change if the global batch stays).")

    def __post_init__(self) -> None:
        require(self.position_init in ("preset", *POSITION_INITS),
                f"position_init must be one of preset, {', '.join(POSITION_INITS)}, got {self.position_init!r}")
        require(self.position_init == "preset" or not self.init_from, "--position-init chooses a fresh model's "
                "start; an --init-from model keeps its own positions")
        require(self.embeddings in EMBEDDINGS, f"embeddings must be one of {', '.join(EMBEDDINGS)}, got {self.embeddings!r}")
        require(self.embeddings == "preset" or not self.init_from, "--embeddings chooses a fresh model's layout; "
                "--init-from keeps the loaded model's")
        preset(self.model)  # raises on an unknown name
        require(self.steps >= 0, f"steps must be >= 0, got {self.steps}")
        require(self.steps > 0 or self.epochs >= 1, f"epochs must be >= 1 when steps is 0, got {self.epochs}")
        require(self.dropout == -1.0 or 0 <= self.dropout < 1, f"dropout must be in [0, 1) or -1, got {self.dropout}")
        require(self.time_budget_minutes >= 0, f"time_budget_minutes must be >= 0, got {self.time_budget_minutes}")
        require(not (self.time_budget_minutes and self.steps), "give --steps or --time-budget-minutes, not both")
        require(self.micro_batch_size == AUTO or (isinstance(self.micro_batch_size, int) and self.micro_batch_size >= 1),
                f"micro_batch_size must be >= 1 or auto, got {self.micro_batch_size!r}")
        require(self.grad_accum >= 1, f"grad_accum must be >= 1, got {self.grad_accum}")
        require(self.global_batch_size >= 0, f"global_batch_size must be >= 0, got {self.global_batch_size}")
        require(self.compile_mode in COMPILE_MODES, f"compile_mode must be one of {', '.join(COMPILE_MODES)}, "
                                                    f"got {self.compile_mode!r}")
        require(self.kernel_tuning in KERNEL_TUNING, f"kernel_tuning must be one of {', '.join(KERNEL_TUNING)}, "
                                                     f"got {self.kernel_tuning!r}")
        parse_window(self.profile_steps)  # raises on a malformed window
        require(self.attention in ATTENTION, f"attention must be one of {', '.join(ATTENTION)}, got {self.attention!r}")
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(0 <= self.warmup_ratio < 1, f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        require(self.schedule in SCHEDULES, f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        require(self.optimizer in OPTIMIZERS, f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        require(self.max_position >= 0, f"max_position must be >= 0, got {self.max_position}")
        if self.deepspeed_config:
            apply_deepspeed_file(self)
        require(self.zero_stage in (0, 1, 2, 3, AUTO), f"zero_stage must be 0, 1, 2, 3 or auto, got {self.zero_stage!r}")
        require(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")
        require(self.eval_every >= 0, f"eval_every must be >= 0, got {self.eval_every}")
        require(self.bf16 + self.fp16 + self.fp32 <= 1, "give one of --bf16, --fp16 and --fp32")
        require(self.eval_batches >= 0, f"eval_batches must be >= 0, got {self.eval_batches}")
        require(self.save_every >= 0, f"save_every must be >= 0, got {self.save_every}")
        require(self.dist_timeout_minutes > 0, f"dist_timeout_minutes must be > 0, got {self.dist_timeout_minutes}")
        if self.zero_stage != AUTO:  # else checked once the stage is planned (training.pretraining.run_plan)
            check_optimizer(self.optimizer, self.zero_stage, self.fp16)


def plan_steps(cfg: PretrainConfig, batches_per_epoch: int) -> int:
    """Optimizer steps to run. E.g. 2,000 rows, 2 ranks, micro batch 16: 1,000 // 16 = 62 batches
    per epoch per rank; with grad_accum 2, one epoch is 62 // 2 = 31 steps. Under a time budget
    there is no step count: the loop ends when the budget is spent (`BudgetClock`)."""
    per_epoch = batches_per_epoch // cfg.grad_accum
    if cfg.time_budget_minutes:
        return 1 << 62
    if cfg.steps:
        return cfg.steps
    require(per_epoch >= 1, f"{batches_per_epoch} batches per epoch < grad_accum {cfg.grad_accum}: no full step")
    return cfg.epochs * per_epoch
