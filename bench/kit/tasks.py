"""The labelled tasks the transfer bench fine-tunes on, and how (shared by its training and compression steps, its
GPU run, `bench learn --transfer` and `bench ablate`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.config import options_to_argv


@dataclass
class TaskPlan:
    """How one task is fine-tuned in the bench (caps keep the whole bench near 2 hours on 2 cores)."""

    name: str
    max_train: int = 0
    max_length: int = 128
    epochs: int = 3


TASKS = {
    # 19k train sentences capped at 3,000: MiniLM takes ~0.7 s per step of 32 x 64 tokens here (bf16)
    "vader": TaskPlan("vader", max_train=3000, max_length=64),
    "reuters": TaskPlan("reuters", max_length=128),
    # 811 train sentences: 3 epochs are 78 steps, too few for 44 tags
    "wsj_pos": TaskPlan("wsj_pos", max_length=96, epochs=8),
    # document pairs: two ~80-word articles per example; not in the default run (about 30 more minutes)
    "lee_pairs": TaskPlan("lee_pairs", max_length=256, epochs=5),
}
DEFAULT_TASKS = ("vader", "reuters", "wsj_pos")


def flags(**opts: Any) -> list[str]:
    return options_to_argv(opts)
