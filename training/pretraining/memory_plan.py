"""What has to fit on each device, and the choices that follow: the ZeRO stage and the micro batch.

    plan_zero_stage("auto", world=1, device_bytes=80e9, params=110e6)   # ZeroChoice(0, "one process: ...")
    fit_micro_batch(probe, budget_bytes=0.9 * 80e9, largest=512)       # the largest micro batch whose step fits

Both are pure functions of numbers a machine reports, so they are tested on the CPU with a simulated memory
limit; `training.pretraining.micro_batch` runs the probe on a real device.

Model states per parameter (the ZeRO paper's accounting, Rajbhandari et al. 2020): fp32 training keeps 4 bytes
of weights, 4 of gradients and 8 of AdamW moments; DeepSpeed's bf16/fp16 keeps 2 + 2 and 12 of optimizer state
(fp32 master, two moments). Both are 16 bytes a parameter; bert_base's 110M parameters hold 1.8 GB. ZeRO-1
splits the optimizer share over the processes, ZeRO-2 the gradients too, ZeRO-3 the weights as well. Above
stage 0 DeepSpeed reduces gradients through per-parameter hooks (16 ms of host time a bert_base step on an
H200, docs/BENCHMARKS.md "gpu"), so a stage is worth it only where its memory is needed.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from common.config import AUTO

STATE_SHARE = 0.5
"""Model states may take at most this share of a device's memory; the rest is for activations (a bert_base
step at 128 tokens holds ~0.1 GB of them per row in bf16, so 256 rows need ~25 GB of an 80 GB GPU)."""

BYTES = {"weights": 4, "gradients": 4, "optimizer": 8}
"""Model-state bytes per parameter (the module docstring: 16 in all, mixed precision or not)."""


@dataclass(frozen=True)
class ZeroChoice:
    stage: int
    reason: str


def state_bytes(params: int, stage: int, world: int) -> float:
    """Model-state bytes on each process at ZeRO `stage` over `world` processes."""
    w, g, o = (BYTES[k] * params for k in ("weights", "gradients", "optimizer"))
    split = {0: (w, g, o), 1: (w, g, o / world), 2: (w, g / world, o / world), 3: (w / world, g / world, o / world)}
    return sum(split[stage])


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def plan_zero_stage(requested: int | str, world: int, device_bytes: int | None, params: int) -> ZeroChoice:
    """The ZeRO stage to run: the one asked for, or (`auto`) the lowest whose model states fit in STATE_SHARE of
    each device's memory; stage 0 on one process, where there is nothing to split. `device_bytes` None: unknown
    (then stage 0 where it would fit a 16 GB device, else the lowest that would)."""
    if requested != AUTO:
        stage = int(requested)
        if stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage must be 0, 1, 2, 3 or auto, got {requested!r}")
        return ZeroChoice(stage, "asked for (--zero-stage)")
    if world == 1:
        return ZeroChoice(0, "one process: ZeRO would partition nothing, and its per-parameter hooks cost host time")
    room = STATE_SHARE * (device_bytes or 16e9)
    where = f"{STATE_SHARE:.0%} of {_gb(device_bytes)} per device" if device_bytes else "a 16 GB device (memory unknown)"
    for stage in (0, 1, 2, 3):
        need = state_bytes(params, stage, world)
        if need <= room:
            if stage == 0:
                return ZeroChoice(0, f"{params / 1e6:,.1f}M parameters' weights, gradients and AdamW state "
                                     f"({_gb(need)}) fit in {where}: plain data parallel, no per-parameter hooks")
            return ZeroChoice(stage, f"ZeRO-{stage - 1} would hold {_gb(state_bytes(params, stage - 1, world))} per "
                                     f"process, more than {where}; ZeRO-{stage} over {world} processes holds {_gb(need)}")
    return ZeroChoice(3, f"even ZeRO-3 over {world} processes holds {_gb(state_bytes(params, 3, world))} per process, "
                         f"more than {where}: expect out-of-memory errors; add processes or choose a smaller model")


# ---- the micro batch -----------------------------------------------------------------------------------

MARGIN = 0.10
"""Share of device memory kept free after the probed step's peak (fragmentation, the compiled graph's own
buffers, a longer evaluation batch)."""

Probe = Callable[[int], "float | None"]
"""micro batch -> peak bytes of one forward and backward at that size (optimizer state included), or None when
it ran out of memory."""


@dataclass(frozen=True)
class MicroBatchFit:
    size: int
    peak_bytes: float | None
    tried: tuple[tuple[int, float | None], ...]
    """(size, peak bytes or None for out of memory), in the order probed."""


def fit_micro_batch(probe: Probe, budget_bytes: float, largest: int, smallest: int = 1, start: int = 8) -> MicroBatchFit:
    """The largest micro batch in [smallest, largest] whose probed peak stays within `budget_bytes`: doubling from
    `start` until a size fails or `largest` is reached, then halving the gap between the last fit and the first
    failure (peak memory grows with the batch, so the answer is a threshold). Each probe is one step at start-up;
    bert_base at 128 tokens on an 80 GB GPU takes ~8 of them. Raises MemoryError when not even `smallest` fits."""
    if not 1 <= smallest <= largest:
        raise ValueError(f"need 1 <= smallest <= largest, got {smallest} and {largest}")
    tried: list[tuple[int, float | None]] = []

    def fits(size: int) -> bool:
        peak = probe(size)
        tried.append((size, peak))
        return peak is not None and peak <= budget_bytes

    good, bad = 0, largest + 1
    size = min(max(start, smallest), largest)
    while size <= largest:  # double while it fits
        if not fits(size):
            bad = size
            break
        good = size
        if size == largest:
            break
        size = min(size * 2, largest)
    if good == 0:  # the first try failed: look below it
        hi = bad
        size = hi // 2
        while size >= smallest:
            if fits(size):
                good = size
                break
            hi, size = size, size // 2
        if good == 0:
            raise MemoryError(f"not even a micro batch of {smallest} fits in {_gb(budget_bytes)} "
                              f"(tried {', '.join(str(s) for s, _ in tried)})")
        bad = hi
    while bad - good > max(1, good // 8):  # refine to within an eighth of the answer
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    peak = next(p for s, p in reversed(tried) if s == good)
    return MicroBatchFit(good, peak, tuple(tried))


def split_global_batch(global_batch: int, world: int, micro: int | None, fitted: int | None = None) -> tuple[int, int]:
    """(micro batch, accumulation steps) that make exactly `global_batch` rows a step over `world` processes: with
    `micro` given, it must divide the rows each process takes; with only `fitted` (the probe's largest), the
    largest divisor of those rows not above it."""
    if global_batch % world:
        raise ValueError(f"global batch {global_batch} is not a multiple of the {world} processes")
    rows = global_batch // world
    if micro is not None:
        if rows % micro:
            raise ValueError(f"global batch {global_batch} over {world} processes is {rows} rows each, not a multiple "
                             f"of micro batch {micro}")
        return micro, rows // micro
    if fitted is None:
        raise ValueError("split_global_batch needs micro or fitted")
    best = max(d for d in range(1, min(rows, fitted) + 1) if rows % d == 0)
    return best, rows // best
