"""`lmforge distill`'s options and the input checks a user can get wrong, without torch or transformers: a wrong
teacher or shards path is said in the time Python starts (training.compression.distill, the stage itself, imports
both and re-exports these)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.config import opt, require
from schemas.hf import HF_DIR
from schemas.manifest import MANIFEST_NAME
from training.models.model_formats import refuse_quantized
from training.pretraining.shard_set import ShardSet


@dataclass
class DistillConfig:
    teacher: str = opt(help="The teacher: a pretrain stage's hf/ directory (or the stage directory holding it).", path=True)
    shards: str = opt(help="Shards stage directory to train on (the teacher's tokenizer must match it).", path=True)
    output: str = opt(help="Stage directory to write: hf/, metrics.json, manifest.json.", path=True)
    steps: int = opt(0, help="Optimizer steps; 0 means run `epochs` full epochs.")
    epochs: int = opt(1, help="Full passes over the train split when steps is 0.")
    batch_size: int = opt(16, help="Sequences per optimizer step, over all processes (with --nproc N each takes "
                                   "batch_size / N), so the recipe is the same whatever the process count.")
    lr: float = opt(5e-4, help="Peak AdamW learning rate (DistilBERT used 5e-4).")
    warmup_ratio: float = opt(0.05, help="Fraction of steps of linear warmup, then linear decay to 0 (DistilBERT: 5%).")
    weight_decay: float = opt(0.01, help="AdamW weight decay on matrices.")
    clip: float = opt(1.0, help="Max gradient norm (BERT's and DistilBERT's 1.0; fine-tuning's Recipe.clip).")
    student_layers: int = opt(0, help="Student depth: this many teacher layers, spread over its depth with the first "
                                      "and last (0: half the teacher's, rounded up).")
    temperature: float = opt(2.0, help="Softmax temperature T for the KL term.")
    alpha_ce: float = opt(5.0, help="Weight of KL(student/T || teacher/T) * T^2.")
    alpha_mlm: float = opt(2.0, help="Weight of the student's own MLM cross-entropy (a decoder's: next-token).")
    alpha_cos: float = opt(1.0, help="Weight of the cosine loss between last hidden states.")
    restrict_ce_to_mask: bool = opt(False, help="KL only at masked positions, not every attended one (DistilBERT's default: off).")
    seed: int = opt(1234, help="Seeds the shuffles and dropout.")
    log_every: int = opt(10, help="Steps between progress lines.")
    eval_batches: int = opt(10, help="Validation batches for student and teacher MLM loss at the end; 0 skips.")

    def __post_init__(self) -> None:
        require(self.steps >= 0, f"steps must be >= 0, got {self.steps}")
        require(self.steps > 0 or self.epochs >= 1, f"epochs must be >= 1 when steps is 0, got {self.epochs}")
        require(self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(self.clip > 0, f"clip must be > 0, got {self.clip}")
        require(0 <= self.warmup_ratio < 1, f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        require(self.temperature > 0, f"temperature must be > 0, got {self.temperature}")
        require(min(self.alpha_ce, self.alpha_mlm, self.alpha_cos) >= 0, "loss weights must be >= 0")
        require(self.alpha_ce + self.alpha_mlm + self.alpha_cos > 0, "at least one loss weight must be > 0")
        require(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")
        require(self.eval_batches >= 0, f"eval_batches must be >= 0, got {self.eval_batches}")


def resolve_teacher(path: str | Path) -> tuple[Path, Path]:
    """(hf directory, directory whose manifest pins the teacher) for a stage dir or its hf/."""
    p = Path(path)
    hf = p / HF_DIR if (p / HF_DIR / "config.json").exists() else p
    if not (hf / "config.json").exists():
        raise ValueError(f"{path}: no config.json here or in {HF_DIR}/; expected a pretrain output")
    refuse_quantized(hf, "distillation (the teacher's logits and gradients-free forward in fp32)")
    stage = hf.parent if (hf.parent / MANIFEST_NAME).exists() else hf
    return hf, stage


def check_inputs(cfg: DistillConfig) -> tuple[Path, Path, ShardSet]:
    """The teacher (resolve_teacher) and the shards (of any objective: its model kind decides the recipe), read before
    anything is written."""
    teacher_hf, teacher_stage = resolve_teacher(cfg.teacher)
    return teacher_hf, teacher_stage, ShardSet.open(cfg.shards)

