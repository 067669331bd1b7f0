"""Which accelerator a training job runs on, and what follows from it (one code path for CPU and GPU).

    plan = launch_plan("auto", nproc=0)      # CUDA GPUs if torch sees any, else the CPU
    plan.env()                               # DS_ACCELERATOR, OMP_NUM_THREADS, LMFORGE_DIST_BACKEND (+ malloc on CPU)

- `cuda`: one process per GPU (`nproc` 0 means every visible GPU; more processes than GPUs is an
  error), NCCL between them, bf16 where the GPU supports it (compute capability 8.0+) and fp16
  otherwise, torch's fused AdamW (DeepSpeed's FusedLamb for LAMB where its op loads); a few CPU threads per
  process for the data loader. Workers bind their GPU and join the process group through
  training.runtime.distributed (NCCL beside gloo).
- `cpu`: gloo between processes, and the cores shared out: each process gets cores // nproc torch
  threads (one process uses every core; two on two cores get one each, since more would contend), and
  glibc's allocator set to keep freed memory (CPU_MALLOC: a step's activations are not faulted in anew).
- `auto`: `cuda` when torch sees a CUDA device, else `cpu`.
The selection is a pure function of what the machine reports (`Machine`), so it is tested here without a
GPU; `lmforge pretrain --dry-run` prints the plan that a given machine would get.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import asdict, dataclass, field

ACCELERATORS = ("auto", "cpu", "cuda")
DEFAULT_CPU_PROCESSES = 2
"""Data-parallel processes on CPU when none are asked for: ZeRO's partitioning is exercised, and on 2 cores
each process gets one."""


GPU_DEVICE_NODES = ("/dev/nvidia[0-9]*", "/dev/nvidiactl", "/dev/dxg", "/dev/kfd")
"""What a Linux machine shows where a GPU driver is: NVIDIA's device nodes, WSL's GPU paravirtualisation, ROCm's."""


def cuda_possible() -> bool:
    """False only where torch cannot see a CUDA (or ROCm) device: Linux with none of GPU_DEVICE_NODES. A launcher that
    starts workers answers "which accelerator" without importing torch there (~2.5 s of CPU each launch); anywhere
    else torch is asked (`torch.cuda.is_available()`)."""
    if not sys.platform.startswith("linux"):
        return True
    return any(glob.glob(pattern) for pattern in GPU_DEVICE_NODES)


@dataclass(frozen=True)
class Machine:
    """What the launch depends on: cores, and the CUDA devices torch sees with their compute capability."""

    cpu_count: int
    gpus: tuple[tuple[int, int], ...] = ()
    """(major, minor) compute capability of each visible CUDA device."""
    gpu_memory: tuple[int, ...] = ()
    """Total bytes of each visible CUDA device (empty: unknown)."""
    host_memory: int = 0
    """Bytes of RAM (0: unknown)."""

    @classmethod
    def here(cls) -> Machine:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        gpus: tuple[tuple[int, int], ...] = ()
        memory: tuple[int, ...] = ()
        try:
            if not cuda_possible():
                raise LookupError("no GPU device nodes")
            import torch

            if torch.cuda.is_available():
                n = torch.cuda.device_count()
                gpus = tuple(torch.cuda.get_device_capability(i) for i in range(n))
                memory = tuple(int(torch.cuda.get_device_properties(i).total_memory) for i in range(n))
        except Exception:  # a broken CUDA install must not stop a CPU run  # noqa: BLE001
            gpus, memory = (), ()
        return cls(cpu_count=max(1, cores), gpus=gpus, gpu_memory=memory, host_memory=host_memory())


def host_memory() -> int:
    """Bytes of RAM this machine reports (0 where it does not)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


CPU_MALLOC = {"glibc.malloc.mmap_threshold": 32 << 20, "glibc.malloc.trim_threshold": 1 << 30,
              "glibc.malloc.top_pad": 64 << 20}
"""glibc's allocator for CPU training workers. By default glibc serves a block over 128 KiB-32 MiB (its
threshold moves) with its own mmap and returns freed memory to the kernel, so the step's activations
(16 x 128 x 256 floats = 2 MiB each) are faulted in page by page again every step: 8,000-9,000 page
faults and 25 ms of kernel time a step on the tiny preset (getrusage over 40 steps), against 650 and 3 ms
with these settings: blocks under 32 MiB (the most glibc allows) come from the heap, which keeps up to
1 GiB free instead of trimming it and grows 64 MiB at a time. The cost is memory held after a peak,
not returned. Intel's CPU launcher preloads jemalloc or tcmalloc for the same reason; these need no
extra library."""


def cpu_malloc(current: str = "") -> str:
    """GLIBC_TUNABLES for a CPU worker: CPU_MALLOC, with any tunable already set in `current` kept as it is."""
    mine = [t for t in current.split(":") if t]
    set_already = {t.split("=", 1)[0] for t in mine}
    return ":".join(mine + [f"{k}={v}" for k, v in CPU_MALLOC.items() if k not in set_already])


@dataclass(frozen=True)
class LaunchPlan:
    accelerator: str
    """cpu or cuda: what the job runs on."""
    nproc_per_node: int
    backend: str
    """torch.distributed backend: gloo (CPU) or nccl (CUDA)."""
    threads_per_process: int
    ds_accelerator: str
    """DeepSpeed's accelerator name (DS_ACCELERATOR)."""
    precisions: tuple[str, ...]
    """Mixed precisions the devices support, best first (fp32 always)."""
    fused_adam: bool
    """DeepSpeed's fused ops may be used (CUDA: FusedLamb for --optimizer lamb, where its op loads; AdamW is
    torch's fused one everywhere, training.runtime.recipe.optimizer_choice)."""
    notes: list[str] = field(default_factory=list)
    device_memory: int = 0
    """Bytes each process may fill: its GPU's (the smallest of the node's), or RAM shared out over the
    processes on the CPU (0: unknown). training.pretraining.memory_plan chooses the ZeRO stage from it."""

    def env(self) -> dict[str, str]:
        """The environment of every worker process; on the CPU also glibc's allocator settings (`cpu_malloc`)."""
        env = {"DS_ACCELERATOR": self.ds_accelerator, "OMP_NUM_THREADS": str(self.threads_per_process),
               "LMFORGE_DIST_BACKEND": self.backend}
        if self.accelerator == "cpu":
            env["GLIBC_TUNABLES"] = cpu_malloc(os.environ.get("GLIBC_TUNABLES", ""))
        return env

    def as_dict(self) -> dict:
        return asdict(self)


def launch_plan(accelerator: str = "auto", nproc: int = 0, machine: Machine | None = None) -> LaunchPlan:
    """The plan for `nproc` processes per node (0: one per GPU, or DEFAULT_CPU_PROCESSES on CPU)."""
    if accelerator not in ACCELERATORS:
        raise ValueError(f"accelerator must be one of {', '.join(ACCELERATORS)}, got {accelerator!r}")
    if nproc < 0:
        raise ValueError(f"nproc must be >= 0, got {nproc}")
    m = machine or Machine.here()
    kind = ("cuda" if m.gpus else "cpu") if accelerator == "auto" else accelerator
    notes: list[str] = []
    if kind == "cuda":
        if not m.gpus:
            raise ValueError("--accelerator cuda: torch sees no CUDA device here (torch.cuda.is_available() is "
                             "False); use --accelerator auto or cpu")
        n = nproc or len(m.gpus)
        if n > len(m.gpus):
            raise ValueError(f"{n} processes on a node with {len(m.gpus)} GPU(s): CUDA runs one process per GPU")
        bf16 = all(cap >= (8, 0) for cap in m.gpus[:n])
        precisions = ("bf16", "fp16", "fp32") if bf16 else ("fp16", "fp32")
        if not bf16:
            notes.append("a GPU older than compute capability 8.0: no bf16, fp16 with loss scaling instead")
        threads = max(1, m.cpu_count // n)
        memory = min(m.gpu_memory[:n]) if len(m.gpu_memory) >= n else 0
        return LaunchPlan("cuda", n, "nccl", threads, "cuda", precisions, True, notes, memory)
    n = nproc or DEFAULT_CPU_PROCESSES
    if n > m.cpu_count:
        notes.append(f"{n} processes on {m.cpu_count} core(s): they will contend; one thread each")
    threads = max(1, m.cpu_count // n)
    return LaunchPlan("cpu", n, "gloo", threads, "cpu", ("bf16", "fp32"), False, notes, m.host_memory // n)


def dist_backend() -> str:
    """The backend a worker initialises: what its launcher planned, else gloo (a bare `torchrun` on CPU)."""
    return os.environ.get("LMFORGE_DIST_BACKEND", "gloo")
