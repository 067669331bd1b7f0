"""The one device policy of every training worker (pretrain, fine-tune, distill), CPU and GPU alike.

    device = init_worker(timeout_minutes=30)       # set_device(LOCAL_RANK), then the process group
    stats = torch.zeros(6, device=device)          # every tensor that enters a collective lives here

Three rules, because the GPU path runs where CI cannot:
1. `torch.cuda.set_device(LOCAL_RANK)` before anything distributed. NCCL object collectives
   (`broadcast_object_list`) put their tensors on the *current* device; without it every rank but 0
   would talk from cuda:0.
2. On a CUDA plan the process group is `cpu:gloo,cuda:nccl`: a CUDA tensor goes over NCCL, a CPU
   tensor (an object collective's pickle, a host-side flag) over gloo. NCCL alone refuses CPU
   tensors, and one stray `torch.tensor([...])` stopped the old loop at its first all-reduce.
3. Step counters are created on `device` and reduced at log steps only (training.pretraining.pretrain's
   StepStats), so a step makes no host sync of its own.
The collective timeout is explicit (`timeout_minutes`): rank-0-only work between collectives (the
universal-checkpoint conversion on resume, the HF export) must finish within it.
"""
from __future__ import annotations

import os
from datetime import timedelta

import torch

from training.runtime.accelerator import dist_backend


def process_group_backend(planned: str | None = None) -> str:
    """The backend string for init_process_group: nccl plans get gloo for CPU tensors beside NCCL."""
    planned = planned or dist_backend()
    return "cpu:gloo,cuda:nccl" if planned == "nccl" else planned


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def bind_device(planned: str | None = None) -> torch.device:
    """This worker's device: cuda:LOCAL_RANK (made current) on an NCCL plan, else the CPU."""
    if (planned or dist_backend()) != "nccl":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("the launch planned CUDA (NCCL) but this worker's torch sees no GPU "
                           f"(torch {torch.__version__}, CUDA build {torch.version.cuda}, CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}): check the driver, the torch wheel "
                           "and that the job asked for GPUs (--gpus-per-node)")
    rank = local_rank()
    if rank >= torch.cuda.device_count():
        raise RuntimeError(f"LOCAL_RANK {rank} but this node has {torch.cuda.device_count()} visible GPU(s)")
    torch.cuda.set_device(rank)
    # TF32 matmuls and convolutions: 8x the fp32 rate on Ampere and later, within bf16 training's noise
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return torch.device("cuda", rank)


def init_worker(timeout_minutes: float = 30.0, deepspeed: bool = False) -> torch.device:
    """Bind the device, then join the process group (DeepSpeed's comm layer for pretraining, torch's
    otherwise) with the policy's backend and an explicit timeout; returns the device."""
    device = bind_device()
    timeout = timedelta(minutes=timeout_minutes)
    if deepspeed:
        import contextlib
        import sys

        import deepspeed as ds

        with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed prints "... built successfully": chatter
            ds.init_distributed(dist_backend=process_group_backend(), timeout=timeout)
    else:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend=process_group_backend(), timeout=timeout)
    return device
