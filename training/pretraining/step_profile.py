"""Where a training step's time goes: torch.profiler over a window of optimizer steps, summarised per step.

    prof = StepProfiler("20-24", out_dir, device)   # pretrain --profile-steps 20-24
    prof.before(step + 1); ...one optimizer step...; prof.after(step)
    summarize(events, steps=5, wall_s=0.4)          # the same figures for any loop (bench's peers)

Per step, from the profiler's events:
- `ops_per_step`: operations the host dispatched: aten ops called from outside any other aten op (a
  `linear`, not the `t` and `addmm` inside it; each autograd node's ops in backward; a `_foreach_*` or
  `_fused_*` op once however many tensors it covers), plus the kernels a compiled region runs (inductor's
  C++ kernels, recorded with `cpp.enable_kernel_profile`; a GPU's Triton kernels are CUDA events). On a GPU
  each is one or more kernel launches, so on the CPU this counts the host work a GPU step would have;
- `compute_ops_per_step`: the same without the ops that only make tensor metadata (views, reshapes,
  allocations), which launch nothing on a GPU;
- on CUDA: `kernels_per_step` (CUDA kernel events), `gpu_busy_ms_per_step` (the union of their intervals)
  and `gpu_busy_share` (busy over the window's wall time): how much of the step the GPU waited on the host;
  `kernel_kinds` (GPU ms a step by kind of kernel: matrix products, attention, inductor's fused kernels, the
  optimizer, eager elementwise...) and `top_kernels` (the kernels that took the most GPU time): where the
  GPU's own time goes once the host keeps up; `host_syncs_per_step` and `host_sync_sites` (the Python lines
  whose ops made the host wait for the GPU, from torch.cuda.set_sync_debug_mode): a sync inside a step keeps
  the host from queueing the next one while the GPU works.
The window is synchronised with the device at its two ends (two host syncs, only while profiling).
"""
from __future__ import annotations

import json
import logging
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it runs: the config reads parse_window and imports no torch
    import torch

log = logging.getLogger("lmforge.profile")

METADATA_OPS = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::as_strided", "aten::t",
    "aten::transpose", "aten::permute", "aten::expand", "aten::expand_as", "aten::unsqueeze", "aten::squeeze",
    "aten::slice", "aten::select", "aten::narrow", "aten::split", "aten::chunk", "aten::unbind", "aten::detach",
    "aten::detach_", "aten::alias", "aten::resolve_conj", "aten::resolve_neg", "aten::empty", "aten::empty_strided",
    "aten::empty_like", "aten::lift_fresh", "aten::set_", "aten::numpy_T", "aten::contiguous", "aten::flatten",
    "aten::unflatten", "aten::view_as", "aten::is_nonzero", "aten::result_type", "aten::_has_compatible_shallow_copy_type",
})
"""Ops that make or reshape tensor metadata and launch no kernel on a GPU (`contiguous` of a contiguous tensor
is free; of another, it calls `copy_`, which is counted)."""


def _is_kernel(name: str) -> bool:
    """A compiled region's kernel on the CPU (inductor C++ with kernel profiling: graph_N_cpp_fused_...)."""
    return "cpp_fused" in name


def summarize(events, steps: int, wall_s: float) -> dict[str, Any]:
    """Per-step figures (module docstring) from a profile's `events()` over `steps` optimizer steps."""
    ops: Counter[str] = Counter()
    kernels, intervals = 0, []
    by_name: Counter[str] = Counter()
    for e in events:
        device = str(getattr(e, "device_type", "")).rsplit(".", 1)[-1]
        if device == "CUDA":  # a kernel, or a memcpy/memset (busy too, but no launch of ours to count)
            activity = str(getattr(e, "activity_type", "") or "").lower()
            kernels += "memcpy" not in activity and "memset" not in activity
            intervals.append((e.time_range.start, e.time_range.end))
            by_name[e.name] += e.time_range.end - e.time_range.start
            continue
        if _is_kernel(e.name):
            ops[e.name.split("_cpp_fused")[0] + "_cpp_fused"] += 1
            continue
        if not e.name.startswith("aten::"):
            continue
        parent, inside = e.cpu_parent, False
        while parent is not None:
            if parent.name.startswith("aten::"):
                inside = True
                break
            parent = parent.cpu_parent
        if not inside:
            ops[e.name] += 1
    total = sum(ops.values())
    compute = sum(n for name, n in ops.items() if name not in METADATA_OPS)
    out: dict[str, Any] = {"steps": steps, "wall_ms_per_step": 1e3 * wall_s / steps, "ops_per_step": total / steps,
                           "compute_ops_per_step": compute / steps,
                           "top_ops": [[name, n / steps] for name, n in ops.most_common(12)]}
    if kernels:
        busy = _union_us(intervals) / 1e3
        out.update(kernels_per_step=kernels / steps, gpu_busy_ms_per_step=busy / steps,
                   gpu_busy_share=min(1.0, busy / 1e3 / wall_s) if wall_s > 0 else None)
        kinds: Counter[str] = Counter()
        for name, us in by_name.items():
            kinds[kernel_kind(name)] += us
        out["kernel_kinds"] = [[k, us / 1e3 / steps] for k, us in kinds.most_common()]
        out["top_kernels"] = [[name[:90], us / 1e3 / steps] for name, us in by_name.most_common(8)]
    return out


KERNEL_KINDS = (  # first match wins; names as CUDA, cuBLAS, cuDNN and inductor's Triton give them
    ("attention", ("flash", "fmha", "cudnn", "attention", "attn", "sdpa")),
    ("matrix products", ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90_", "sm80_", "ampere_", "wgmma")),
    ("optimizer", ("adam", "multi_tensor", "foreach", "lamb")),
    ("compiled (inductor)", ("triton_",)),
    ("embedding", ("embedding", "indexing_backward", "index_put", "scatter", "gather", "index")),
    ("copies", ("memcpy", "memset", "copy", "cast", "fill")),
    ("reductions", ("reduce", "sum", "norm")),
    ("eager elementwise", ("elementwise", "vectorized", "unrolled")),
)


def kernel_kind(name: str) -> str:
    """A GPU kernel's kind, from its name (KERNEL_KINDS; "other" where none matches)."""
    low = name.lower()
    for kind, keys in KERNEL_KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (microseconds): kernels on several streams overlap."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def parse_window(spec: str) -> tuple[int, int] | None:
    """"20-24" -> (20, 24): optimizer steps to profile, inclusive; "" -> None."""
    if not spec:
        return None
    try:
        first, last = (int(x) for x in spec.split("-", 1)) if "-" in spec else (int(spec), int(spec))
    except ValueError:
        raise ValueError(f"profile_steps must be FIRST-LAST (e.g. 20-24), got {spec!r}") from None
    if not 1 <= first <= last:
        raise ValueError(f"profile_steps must be FIRST-LAST with 1 <= FIRST <= LAST, got {spec!r}")
    return first, last


def enable_kernel_events() -> None:
    """Have inductor's C++ kernels record profiler events (set before anything compiles)."""
    import torch._inductor.config as inductor

    inductor.cpp.enable_kernel_profile = True


class StepProfiler:
    """Profiles optimizer steps FIRST..LAST of a run and writes `summary.json` (and a Chrome trace) to `out_dir`."""

    def __init__(self, spec: str, out_dir: Path, device: torch.device, write: bool = True):
        self.window = parse_window(spec)
        self.out_dir, self.device, self.write = out_dir, device, write
        self.prof = None
        self.t0 = 0.0
        self.summary: dict[str, Any] | None = None
        self._syncs: SyncWatch | None = None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def before(self, step: int) -> None:
        """Call before optimizer step `step`'s first micro-batch."""
        if self.window and step == self.window[0] and self.prof is None:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
            self._sync()
            self.prof = profile(activities=acts)
            self.prof.__enter__()
            self._syncs = SyncWatch().start() if self.device.type == "cuda" else None
            self.t0 = time.perf_counter()

    def after(self, step: int) -> None:
        """Call after optimizer step `step`."""
        if self.prof is None or step != self.window[1]:
            return
        syncs = self._syncs.stop() if self._syncs else None
        self._sync()
        wall = time.perf_counter() - self.t0
        self.prof.__exit__(None, None, None)
        steps = self.window[1] - self.window[0] + 1
        self.summary = {"window": list(self.window), **summarize(self.prof.events(), steps, wall)}
        if syncs is not None:
            self.summary["host_syncs_per_step"] = sum(syncs.values()) / steps
            self.summary["host_sync_sites"] = [{"where": w, "per_step": n / steps} for w, n in syncs.most_common(8)]
        if self.write:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / "summary.json").write_text(json.dumps(self.summary, indent=1) + "\n")
            self.prof.export_chrome_trace(str(self.out_dir / "trace.json"))
        log.info("profile of steps %d-%d: %.0f ops a step (%.0f computing)%s; %s", *self.window,
                 self.summary["ops_per_step"], self.summary["compute_ops_per_step"],
                 f", {self.summary['kernels_per_step']:.0f} kernels, GPU busy {self.summary['gpu_busy_share']:.0%}"
                 if "kernels_per_step" in self.summary else "", self.out_dir / "summary.json")
        self.prof = None


class SyncWatch:
    """The host syncs between start() and stop(), counted by the Python line that caused each: CUDA's sync debug
    mode warns at every synchronising op (a `.item()`, a `bool()` of a GPU tensor, a copy to the host), and the
    warnings are caught here instead of printed."""

    def start(self) -> SyncWatch:
        self._caught = warnings.catch_warnings(record=True)
        self._log = self._caught.__enter__()
        warnings.simplefilter("always")
        import torch

        torch.cuda.set_sync_debug_mode("warn")
        return self

    def stop(self) -> Counter:
        import torch

        torch.cuda.set_sync_debug_mode("default")
        self._caught.__exit__(None, None, None)
        return Counter(f"{'/'.join(Path(w.filename).parts[-2:])}:{w.lineno}" for w in self._log
                       if "synchroniz" in str(w.message))
