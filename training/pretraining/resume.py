"""`pretrain --resume`: which checkpoint, whether the options still match, and a conversion when the world size
changed (`cfg` is a training.pretraining.pretrain.PretrainConfig)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import config_to_dict
from training.pretraining import checkpoint

log = logging.getLogger("lmforge.pretrain")

# Options that may change between a run and its --resume (a moved output directory included): they do not touch
# the weights (compiling changes the rounding of fused arithmetic, not what is computed).
RESUME_FREE = frozenset({"output", "resume", "save_every", "log_every", "eval_batches", "eval_every", "tensorboard",
                         "dist_timeout_minutes", "compile", "compile_mode", "profile_steps"})
# May change together with the world size, as long as micro_batch_size * grad_accum * world stays.
BATCH_SHAPE = ("micro_batch_size", "grad_accum")


def resume_mismatch(saved: dict[str, Any], now: dict[str, Any], saved_world: int | None = None,
                    world: int | None = None) -> dict[str, tuple[Any, Any]]:
    """Options whose change would make a resumed run differ from an uninterrupted one: (saved, now).
    With the world sizes given, a new micro batch / accumulation that keeps the global batch is allowed."""
    diff = {k: (saved.get(k), v) for k, v in now.items() if k not in RESUME_FREE and saved.get(k) != v}
    if saved_world and world and any(k in diff for k in BATCH_SHAPE):
        g_saved = saved.get("micro_batch_size", 0) * saved.get("grad_accum", 0) * saved_world
        g_now = now["micro_batch_size"] * now["grad_accum"] * world
        if g_saved == g_now:
            for k in BATCH_SHAPE:
                diff.pop(k, None)
        else:
            diff["global_batch"] = (g_saved, g_now)
    return diff


@dataclass(frozen=True)
class ResumePlan:
    """The checkpoint a `--resume` run continues from, the same on every rank."""

    tag: str
    """the checkpoint chosen (the newest whose digests match)"""
    load_tag: str
    """what DeepSpeed loads: `tag`, or its universal conversion when the world size changed"""
    state: dict[str, Any]
    """lmforge's JSON state saved with it: step, loader position, curve and counts, options, world size"""
    universal: bool
    """converted to DeepSpeed's universal format (saved on another number of processes)"""

    @property
    def world_size(self) -> int:
        return int(self.state["world_size"])


def plan_resume(cfg: Any, ckpt_dir: Path, rank: int, world: int) -> ResumePlan:
    """Rank 0 picks the newest checkpoint whose digests match, checks lmforge's options against its JSON state
    and, on another world size, converts it to DeepSpeed's universal format, all before DeepSpeed loads
    anything; every rank gets the same answer (or the same error)."""
    import torch.distributed as dist

    answer: list[Any] = [None]
    if rank == 0:
        try:
            tag, notes = checkpoint.choose_tag(ckpt_dir)
            for note in notes:
                log.warning("pretrain --resume: %s", note)
            state = checkpoint.read_state(ckpt_dir / tag)
            saved_world = int(state["world_size"])
            diff = resume_mismatch(state["config"], config_to_dict(cfg), saved_world, world)
            if diff:
                raise SystemExit(f"pretrain --resume: {ckpt_dir / tag} was saved with other options, so the resumed "
                                 "run would not match an uninterrupted one (saved, now): "
                                 + ", ".join(f"{k}={a!r} vs {b!r}" for k, (a, b) in sorted(diff.items())))
            load_tag = tag
            if saved_world != world:
                log.info("pretrain --resume: %s was saved on %d processes, this run has %d: converting it to DeepSpeed's "
                         "universal checkpoint", tag, saved_world, world)
                load_tag = checkpoint.to_universal(ckpt_dir, tag)
            answer[0] = ResumePlan(tag, load_tag, state, universal=saved_world != world)
        except (SystemExit, checkpoint.NoGoodCheckpoint, RuntimeError, OSError, ValueError, KeyError) as e:
            answer[0] = str(e) if not isinstance(e, KeyError) else f"checkpoint state lacks {e}"
    dist.broadcast_object_list(answer, src=0)
    if isinstance(answer[0], str):  # rank 0's error, raised on every rank
        raise SystemExit(answer[0] if answer[0].startswith("pretrain --resume") else f"pretrain --resume: {answer[0]}")
    return answer[0]
