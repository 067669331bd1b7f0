"""What a pretraining run does with its folders: the shards checked once over the ranks, the output folder held
and checked to be shared by every process, and at the end the HF export, metrics.json and the manifest.

Every function here is collective (each rank calls it at the same point) unless it says otherwise. `cfg` is a
training.pretraining.pretrain.PretrainConfig.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from common.config import config_to_dict
from schemas.manifest import MANIFEST_NAME, Manifest, atomic_write_json, describe_outputs, input_ref, write_manifest
from training.models.embedding_geometry import embedding_geometry, geometry_line
from training.models.export import HF_DIR, METRICS_NAME, save_hf
from training.pretraining.data import ShardSet

log = logging.getLogger("lmforge.pretrain")


def open_verified(shards_dir: str, rank: int, world: int) -> ShardSet:
    """The shards, their sha256 digests checked once across the ranks (each hashes its share of the files,
    training.pretraining.data.ShardSet.verify_share) instead of by every rank; any problem stops every rank with it."""
    import torch.distributed as dist

    shards = ShardSet.open(shards_dir, verify=False)
    problems: list[list[str]] = [[] for _ in range(world)]
    dist.all_gather_object(problems, shards.verify_share(rank, world))
    found = [p for share in problems for p in share]
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ValueError(found[0] + more)
    return shards


def hold_output(out: Path, rank: int) -> contextlib.ExitStack:
    """Rank 0 takes the output folder's stage lock (schemas.manifest.stage_lock, as every stage does) and
    keeps it until the run ends (the flock dies with the process); if another run holds it, every rank
    stops with the holder named, before anything is written."""
    import torch.distributed as dist

    from schemas.manifest import StageBusy, stage_lock

    held = contextlib.ExitStack()
    refusal = [None]
    if rank == 0:
        try:
            held.enter_context(stage_lock(out, what=f"lmforge pretrain -> {out}"))
        except StageBusy as e:
            refusal[0] = str(e)
    dist.broadcast_object_list(refusal, src=0)
    if refusal[0]:
        raise SystemExit(f"pretrain: {refusal[0]}")
    return held


def check_shared_output(out: Path, rank: int, device: torch.device | str = "cpu") -> None:
    """Every process must see the same output directory (checkpoints are written by all ranks and read back
    by rank 0): on several nodes it has to be a shared file system. Rank 0 writes a token, the others read it."""
    import torch.distributed as dist

    token = [f"{os.getpid()}-{time.time_ns()}" if rank == 0 else None]
    if rank == 0:
        (out / ".lmforge-shared-check").write_text(token[0])
    dist.broadcast_object_list(token, src=0)
    mine = out / ".lmforge-shared-check"
    ok = torch.tensor([1 if mine.exists() and mine.read_text() == token[0] else 0], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    dist.barrier()
    if rank == 0:
        mine.unlink(missing_ok=True)
    if not ok.item():
        raise SystemExit(f"pretrain: {out} is not the same directory on every process (rank 0's marker file is not "
                         "visible on all of them). On several nodes the --output, --shards and --tokenizer paths must "
                         "be on a file system all nodes share (NFS, Lustre, a mounted bucket).")


def write_outputs(cfg: Any, engine, tokenizer, metrics: dict, counts: dict, t0: float, step: int,
                  rank: int, ds_config: dict[str, Any]) -> None:
    """The HF export (under ZeRO-3 every rank joins the gather of the partitioned weights), then rank 0
    writes metrics.json and the manifest, last."""
    model = engine.module.hf
    # bf16/fp16: the export is the optimizer's fp32 master weights, not the module's rounded copy upcast
    masters = master_weights(model) if cfg.bf16 or cfg.fp16 else None
    gather = contextlib.nullcontext()
    if cfg.zero_stage == 3:
        import deepspeed

        gather = deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None)
    with gather:
        if rank == 0:
            export = model
            if masters is not None or cfg.zero_stage == 3:  # fp32 weights whatever the precision, off the engine
                import copy

                export = copy.deepcopy(model).float()
                if masters is not None:
                    with torch.no_grad():
                        for name, p in export.named_parameters():
                            p.copy_(masters[name])
            hf_files = save_hf(export, tokenizer, Path(cfg.output) / HF_DIR)
            metrics["token_embeddings"] = embedding_geometry(export.get_input_embeddings().weight)
    if rank != 0:
        return
    log.info(geometry_line(metrics["token_embeddings"]))
    out = Path(cfg.output)
    atomic_write_json(out / METRICS_NAME, metrics)
    summary = {k: metrics[k] for k in ("first_loss", "last_loss", "loss_window", "valid_loss", "seconds_per_step",
                                       "world_size", "global_batch", "num_parameters")}
    write_manifest(out, Manifest(
        stage="pretrain",
        config=config_to_dict(cfg),
        inputs=[input_ref(cfg.shards), input_ref(cfg.tokenizer)],
        counts=counts,
        outputs=describe_outputs(out, [*(f.relative_to(out) for f in hf_files), METRICS_NAME]),
        extra={**summary, "deepspeed": ds_config, "checkpoint": f"checkpoints/global_step{step}",
               "versions": _versions()},
        wall_seconds=time.time() - t0,
    ))
    log.info("wrote %s: first loss %.4f -> last loss %.4f", out / MANIFEST_NAME, metrics["first_loss"], metrics["last_loss"])


def master_weights(model) -> dict[str, torch.Tensor]:
    """Every parameter's full fp32 master copy from DeepSpeed's optimizer (ZeRO 1-3 and its bf16 optimizer keep
    one per parameter, partitioned over the ranks), on the CPU, by name. Collective: every rank calls it, in the
    same parameter order; a parameter DeepSpeed keeps no master for (fp32 training) is its own value."""
    from deepspeed.utils import safe_get_full_fp32_param

    out = {}
    for name, p in model.named_parameters():
        full = safe_get_full_fp32_param(p)
        out[name] = (full if full is not None else p.detach()).float().cpu()
    return out


def _versions() -> dict[str, str]:
    import deepspeed
    import transformers

    return {"torch": torch.__version__, "deepspeed": deepspeed.__version__, "transformers": transformers.__version__}
