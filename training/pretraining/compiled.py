"""torch.compile where it pays: the transformer's repeated blocks and the loss head, one region each.

    regions = compile_regions(module, mode="default")    # names of the compiled regions
    watch = CompileWatch()                               # dynamo's counters, read at log steps
    watch.check(step)                                    # raises if the graphs keep recompiling
    watch.summary()                                      # for metrics.json: graph breaks, recompiles, compile time

Why regions and not the whole model: the 12 blocks of bert_base are one code object with the same shapes, so
dynamo compiles one block and reuses it for the other 11 (PyTorch's "regional compilation" recipe): 25 s on this
2-core machine for a block instead of minutes for the unrolled graph, and nothing between the blocks is left to
fuse. The embeddings stay eager: their backward adds each token's gradient into the table, and inductor's
generated scatter does it with atomic adds in whatever order the threads get there, so two compiled runs of the
same data differed from step 5 on (by 1e-3 in the loss, CPU, tiny preset) and a resumed run could not repeat an
uninterrupted one; eager's embedding backward is deterministic. (The head's gather is scattered back too, but to
distinct positions, and its padding adds zeros, so its order cannot change a sum.) Inside each region inductor fuses the elementwise work around the matrix products
(bias + GELU, dropout, residual + LayerNorm, the head's transform), which is what the eager model launches
as hundreds of small kernels a step (docs/BENCHMARKS.md "gpu": ~4,000 a bert_base step).

Shapes are static: the rows of a batch are fixed and SparseMLM's masked positions are padded to a fixed count
(training.models.model.sparse_targets), so each region compiles once. A run that keeps recompiling (shapes or guards
that change every step) is an error, not a slow run (`CompileWatch.check`).
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it runs: the config reads this module's names and imports no torch
    import torch

log = logging.getLogger("lmforge.compile")

COMPILE_MODES = ("auto", "default", "reduce-overhead", "max-autotune-no-cudagraphs")
"""torch.compile modes offered: reduce-overhead adds CUDA graphs (replays a region's kernels with one launch);
auto picks between it and default (`compile_mode_choice`)."""


KERNEL_TUNING = ("auto", "heuristic", "coordinate-descent")
"""How inductor picks each generated kernel's launch configuration (block sizes, warps): heuristic (its rules) or
coordinate-descent (each kernel timed at neighbouring configurations as it compiles; inductor's
`coordinate_descent_tuning`); auto is coordinate-descent on CUDA (`kernel_tuning_choice`)."""


def kernel_tuning_choice(asked: str, accelerator: str) -> tuple[bool, str]:
    """(tune by coordinate descent?, why) for `--kernel-tuning`, and sets inductor's flag for this process (before
    anything compiles: inductor reads it as it generates each kernel).

    auto tunes on CUDA, where it was measured (bench/train/gpu_block.py on one H100, docs/BENCHMARKS.md "gpu"): bert_base's
    block forward + backward at 1,024 x 128 rows took 15.3 ms against 19.4 with the heuristic configurations, as the
    two fused dropout + residual + LayerNorm backward kernels (a row reduction fused with the LayerNorm weight
    gradients' column sums) went from ~2.5 ms each to under 0.5. It costs compile time (each kernel is timed) and
    nothing on the CPU, whose C++ kernels it does not tune."""
    import torch._inductor.config as inductor

    if asked == "auto":
        on, why = accelerator == "cuda", ("auto: on CUDA, where it was measured (the fused LayerNorm backward 5x "
                                          "faster at bert_base's fitted batch)" if accelerator == "cuda"
                                          else "auto: it tunes only GPU (Triton) kernels")
    else:
        on, why = asked == "coordinate-descent", "asked for (--kernel-tuning)"
    inductor.coordinate_descent_tuning = on
    return on, why


def eval_stance(mode: str):
    """The context for forward passes without autograd (validation) over regions compiled in `mode`.

    With CUDA graphs (reduce-overhead) each call outside autograd starts a new generation of graph replays, so the
    replay of block N+1 overwrites the output of block N that it still reads (its residual input): on an H100 the
    held-out loss after training failed with "accessing tensor output of CUDAGraphs that has been overwritten by a
    subsequent run". There the compiled regions run eagerly (torch.compiler.set_stance("force_eager"), which also
    spares compiling an eval-mode graph); in the other modes nothing changes."""
    if mode == "reduce-overhead":
        import torch

        return torch.compiler.set_stance("force_eager")
    return contextlib.nullcontext()


def repeated_blocks(module: torch.nn.Module) -> list[torch.nn.Module]:
    """The entries of every ModuleList whose entries are all of one class (BERT's encoder.layer, GPT-2's h, T5's
    block): the transformer blocks."""
    import torch

    blocks = []
    for sub in module.modules():
        if isinstance(sub, torch.nn.ModuleList) and len(sub) > 1 and len({type(m) for m in sub}) == 1:
            blocks.extend(sub)
    return blocks


def compile_mode_choice(asked: str, accelerator: str, world: int, zero_stage: int, grad_accum: int) -> tuple[str, str]:
    """(torch.compile mode, why) for `--compile-mode` (auto: the default).

    auto is reduce-overhead (CUDA graphs) where it was measured: one GPU, ZeRO-0, no accumulation. There, on one
    H100 (docs/BENCHMARKS.md "gpu"), bert_base's step at micro batch 64 took 21.3 ms against 49.4 without graphs
    (the host launching ~1,000 kernels a step was the limit) and at the fitted 1,024 rows 248.2 against 256.8,
    with the same loss curve (within 6e-5, as two runs without graphs differ). With accumulation the gradients
    of one micro batch must outlive the next replay of the graphs that made them, and with several processes
    DeepSpeed's reductions work on them between replays: neither has run on a GPU yet, so auto is default there."""
    if asked != "auto":
        return asked, "asked for (--compile-mode)"
    if accelerator == "cuda" and world == 1 and zero_stage == 0 and grad_accum == 1:
        return "reduce-overhead", ("auto: CUDA graphs, one GPU at ZeRO-0 without accumulation (measured: 2.3x a "
                                   "step at micro batch 64, the same loss curve)")
    return "default", ("auto: CUDA graphs only on one GPU at ZeRO-0 without accumulation, where they were measured" if
                       accelerator == "cuda" else "auto: no CUDA graphs off a GPU")


def compile_regions(module: torch.nn.Module, mode: str = "default") -> list[str]:
    """Compile, in place, each transformer block and, for a module with one, the loss head (`compile_head`, e.g.
    SparseMLM's); returns what was compiled, by name.
    State-dict keys and parameters stay the module's own (nn.Module.compile), so checkpoints and the export
    are unchanged."""
    if mode not in COMPILE_MODES or mode == "auto":
        raise ValueError(f"compile mode must be one of {', '.join(COMPILE_MODES[1:])}, got {mode!r}")
    names = {id(m): n for n, m in module.named_modules()}
    done: list[str] = []
    for block in repeated_blocks(module):
        block.compile(mode=mode)
        done.append(names[id(block)])
    head = getattr(module, "compile_head", None)
    if head is not None:
        head(mode)
        done.append("loss head")
    return done


def dynamo_counters() -> dict[str, int]:
    """Frames dynamo compiled, graph breaks and recompilations so far in this process (torch._dynamo's own
    counters; the names are the same in torch 2.11 and 2.13)."""
    from torch._dynamo.utils import counters

    return {"frames_compiled": int(counters["frames"]["ok"]), "graph_breaks": int(sum(counters["graph_break"].values())),
            "recompiles": int(sum(counters["recompiles"].values())) if "recompiles" in counters else 0,
            "unique_graphs": int(counters["stats"]["unique_graphs"])}


@dataclass
class CompileWatch:
    """Dynamo's counters around a run: the frames compiled during the first steps are the compile; any after
    `settle_steps` are recompilations."""

    settle_steps: int = 2
    """Optimizer steps in which compiling is expected (the first step, and a validation's first batch)."""
    start: dict[str, int] = field(default_factory=dynamo_counters)
    t0: float = field(default_factory=time.time)
    settled: dict[str, int] | None = None
    steps_after: int = 0
    late: list[int] = field(default_factory=list)
    """Steps after settling in which new frames were compiled."""
    _last: int = 0

    def after_step(self, step: int) -> None:
        """Call after every optimizer step (a host read of Python counters, no device sync)."""
        now = dynamo_counters()["frames_compiled"]
        if self.settled is None:
            if step >= self.settle_steps:
                self.settled = dynamo_counters()
                self._last = now
            return
        self.steps_after += 1
        if now > self._last:
            self.late.append(step)
        self._last = now

    def check(self, step: int) -> None:
        """Raise if the graphs recompile in most steps since settling (checked at log steps)."""
        if self.steps_after >= 4 and len(self.late) * 2 > self.steps_after:
            raise RuntimeError(f"torch.compile recompiled in {len(self.late)} of the {self.steps_after} steps before "
                               f"step {step} (steps {self.late[:5]}...): something the graphs guard on changes every "
                               "step (a shape or a Python value); run with --no-compile, and TORCH_LOGS=recompiles "
                               "names the guard")

    def summary(self) -> dict[str, Any]:
        now = dynamo_counters()
        base = self.settled or now
        return {"graph_breaks": now["graph_breaks"] - self.start["graph_breaks"],
                "frames_compiled": now["frames_compiled"] - self.start["frames_compiled"],
                "frames_compiled_after_warmup": now["frames_compiled"] - base["frames_compiled"],
                "recompiles": now["recompiles"] - self.start["recompiles"],
                "steps_with_recompiles": len(self.late)}


def compile_choice(requested: bool | None, accelerator: str, zero_stage: int) -> tuple[bool, str]:
    """(compile?, why): asked for (--compile / --no-compile), or by default on CUDA below ZeRO-3 (ZeRO-3 gathers
    parameters in module hooks that regions would have to trace around) and off on the CPU, where inductor's C++
    build takes tens of seconds per region on a small machine and its kernels gain little over eager."""
    if requested is not None:
        if requested and zero_stage == 3:
            log.warning("--compile with ZeRO-3: the blocks compile around DeepSpeed's parameter-gathering hooks; "
                        "expect graph breaks")
        return requested, "asked for (--compile)" if requested else "asked for (--no-compile)"
    if accelerator == "cuda" and zero_stage < 3:
        return True, "default on CUDA: fused kernels instead of hundreds of small launches a step"
    if accelerator == "cuda":
        return False, "default off under ZeRO-3 (parameter-gathering hooks in every module)"
    return False, "default off on the CPU (compile time over gain; --compile turns it on)"
