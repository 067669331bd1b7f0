"""Training checkpoints you can trust, and resume on any world size.

A checkpoint is a DeepSpeed tag directory `checkpoints/global_step<N>/` holding DeepSpeed's files
(model states, each rank's ZeRO optimizer partition), each rank's RNG (`rng_rank<r>.pt`) and
lmforge's own state as JSON (`lmforge-state.json`: step, loader position in samples, loss curve,
options, world size). Saving goes:

1. every rank writes its RNG, then DeepSpeed writes its files (`save_latest=False`);
2. after a barrier, rank 0 hashes every file of the tag into `lmforge-sha256.json` (written last,
   atomically), and only then points `latest` at the tag.

Resuming reads the newest tag whose digests match (`choose_tag`): a truncated or bit-flipped file,
a tag whose save was cut short (no digest file) or a missing file makes it fall back to the
previous good tag, with a message naming the file. The digests are checked before anything is
unpickled, and lmforge's options and world-size check reads the JSON state before DeepSpeed is
asked to load anything. What the digests protect against: a checkpoint damaged on disk or in a
copy (disk full, a crash mid-save, storage corruption, a partial rsync) being loaded and training
going on from garbage. They are not a signature: whoever can write the checkpoint directory can
rewrite the digest file too. What keeps a planted file from running code is the load itself: DeepSpeed
unpickles its files with `weights_only=False`, and lmforge makes every such load weights-only
(training/pretraining/safe_load.py), for the resume and for the universal conversion alike.

Another world size: a tag saved on N processes is converted once with DeepSpeed's universal
checkpoint (`ds_to_universal`, into `global_step<N>_universal/`, itself digested) and loaded with
`load_universal`, so each of M processes takes its own partition of the merged optimizer state.
The loader's position is in samples (`training.pretraining.data.RankLoader`), so the data continue where they
stopped.
"""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from schemas.manifest import atomic_write_json, sha256_file

log = logging.getLogger("lmforge.checkpoint")

DIGESTS = "lmforge-sha256.json"
STATE = "lmforge-state.json"
LATEST = "latest"
UNIVERSAL_SUFFIX = "_universal"
TAG_RE = re.compile(r"global_step(\d+)")


class NoGoodCheckpoint(RuntimeError):
    """No tag in the checkpoint directory passes its digests."""


def tag_for(step: int) -> str:
    return f"global_step{step}"


def write_digests(tag_dir: Path) -> dict[str, str]:
    """sha256 of every file under the tag (relative paths), written last and atomically."""
    files = sorted(p for p in tag_dir.rglob("*") if p.is_file() and p.name != DIGESTS)
    digests = {str(p.relative_to(tag_dir)): sha256_file(p) for p in files}
    atomic_write_json(tag_dir / DIGESTS, {"algorithm": "sha256", "files": digests})
    return digests


def verify_tag(tag_dir: Path) -> str | None:
    """None when every file listed matches its digest, else what is wrong (the first problem)."""
    listing = tag_dir / DIGESTS
    if not tag_dir.is_dir():
        return f"{tag_dir} does not exist"
    if not listing.exists():
        return f"{listing} is missing (the save did not finish, or an older lmforge wrote it)"
    try:
        files = json.loads(listing.read_text())["files"]
    except (ValueError, KeyError) as e:
        return f"{listing} is unreadable ({e})"
    for rel, digest in sorted(files.items()):
        path = tag_dir / rel
        if not path.is_file():
            return f"{path} is missing"
        if sha256_file(path) != digest:
            return f"{path} does not match its sha256 in {DIGESTS} (truncated or changed since it was saved)"
    return None


def candidate_tags(ckpt_dir: Path) -> list[str]:
    """Training tags (not universal conversions), newest step first; `latest`'s tag first if it names one."""
    tags = sorted((p.name for p in ckpt_dir.glob("global_step*") if TAG_RE.fullmatch(p.name) and p.is_dir()),
                  key=lambda t: -int(TAG_RE.fullmatch(t).group(1)))
    latest = ckpt_dir / LATEST
    if latest.exists():
        named = latest.read_text().strip()
        if named in tags:
            tags.remove(named)
            tags.insert(0, named)
    return tags


def choose_tag(ckpt_dir: Path) -> tuple[str, list[str]]:
    """The newest tag whose files match their digests, and a note for each newer one passed over."""
    notes: list[str] = []
    for tag in candidate_tags(ckpt_dir):
        problem = verify_tag(ckpt_dir / tag)
        if problem is None:
            return tag, notes
        notes.append(f"skipping checkpoint {tag}: {problem}")
    raise NoGoodCheckpoint(f"no checkpoint in {ckpt_dir} passes its sha256 check"
                           + ("".join(f"\n  {n}" for n in notes) if notes else " (there is none)")
                           + "\nrun without --resume to start from scratch")


def read_state(tag_dir: Path) -> dict[str, Any]:
    return json.loads((tag_dir / STATE).read_text())


def save(engine, ckpt_dir: Path, step: int, state: dict[str, Any], rank: int) -> str:
    """Save a tag (all ranks call this); returns the tag. `state` is lmforge's JSON state (rank 0's is written)."""
    import torch.distributed as dist
    from deepspeed.checkpoint.constants import (
        UNIVERSAL_CHECKPOINT_INFO,
        UNIVERSAL_CHECKPOINT_VERSION_KEY,
        UNIVERSAL_CHECKPOINT_VERSION_VALUE,
    )

    tag = tag_for(step)
    tag_dir = ckpt_dir / tag
    if rank == 0:
        tag_dir.mkdir(parents=True, exist_ok=True)
        (tag_dir / DIGESTS).unlink(missing_ok=True)  # a tag being rewritten is not good until its digests are
    dist.barrier()
    torch.save(rng_state(), tag_dir / f"rng_rank{rank}.pt")
    # The universal-checkpoint marker lets ds_to_universal convert this tag for another world size.
    client = {"lmforge": state, UNIVERSAL_CHECKPOINT_INFO: {UNIVERSAL_CHECKPOINT_VERSION_KEY:
                                                            UNIVERSAL_CHECKPOINT_VERSION_VALUE}}
    engine.save_checkpoint(str(ckpt_dir), tag=tag, client_state=client, save_latest=False)
    if rank == 0:
        atomic_write_json(tag_dir / STATE, state)
    dist.barrier()  # every rank's files are on disk
    if rank == 0:
        write_digests(tag_dir)
        tmp = ckpt_dir / f".{LATEST}.tmp"
        tmp.write_text(tag)
        os.replace(tmp, ckpt_dir / LATEST)
    dist.barrier()
    return tag


def conversion_workers() -> int:
    """Processes for ds_to_universal's extract and merge steps: the cores this process may use, at most 8
    (each worker holds a slice of the optimizer state in memory)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores))


def to_universal(ckpt_dir: Path, tag: str, workers: int = 0) -> str:
    """Convert `tag` with DeepSpeed's ds_to_universal (once; the result is digested and reused), with `workers`
    extract and merge processes (0: `conversion_workers()`). Rank 0 does this while the others wait inside a
    collective, so it must finish within the run's --dist-timeout-minutes."""
    workers = workers or conversion_workers()
    out = ckpt_dir / f"{tag}{UNIVERSAL_SUFFIX}"
    if verify_tag(out) is None:
        return out.name
    if out.exists():
        import shutil

        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "training.pretraining.safe_load", "ds_to_universal",  # weights-only loads
           "--input_folder", str(ckpt_dir / tag), "--output_folder", str(out), "--num_extract_workers", str(workers), "--num_merge_workers", str(workers)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ds_to_universal failed on {ckpt_dir / tag} (exit {done.returncode}):\n"
                           + done.stdout[-2000:] + done.stderr[-3000:])
    atomic_write_json(out / STATE, read_state(ckpt_dir / tag))
    for rng in (ckpt_dir / tag).glob("rng_rank*.pt"):
        (out / rng.name).write_bytes(rng.read_bytes())
    write_digests(out)
    return out.name


def rng_state() -> dict[str, torch.Tensor]:
    """This process's RNG: torch's CPU generator and, on a GPU, the CUDA generator of its device (dropout draws
    from that one there)."""
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state(torch.cuda.current_device())
    return state


def restore_rng(tag_dir: Path, rank: int, fallback_seed: int) -> bool:
    """This rank's RNG as saved (CPU, and the CUDA generator of its device where both sides have one); False
    (and a fresh seed) when the tag has none for this rank."""
    rng = tag_dir / f"rng_rank{rank}.pt"
    if not rng.exists():
        torch.manual_seed(fallback_seed)
        return False
    state = torch.load(rng, weights_only=True)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"], torch.cuda.current_device())
    elif torch.cuda.is_available() and torch.cuda.is_initialized():
        # saved on the CPU (or by an older lmforge): the GPU's dropout stream restarts from a seed of the step
        torch.cuda.manual_seed(fallback_seed)
    return True
