"""Model FLOPs of a masked-LM or decoder training step and a CPU's peak, for MFU (`lmforge doctor`, `bench train`).

FLOPs per trained token (matrix multiplies only, forward + backward = 3 x forward = 6 per weight):

    blocks     6 * L * (4 H^2 + 2 H I)       Q, K, V, output projection and the two feed-forward matrices
    attention  12 * L * H * S                QK^T and AV: 2 * S * H each per token and layer, x 3
    head       6 * (H^2 + H V) * share       BERT's head transform (H x H) and the decoder (H x V), counted
                                             on the share of positions where it is computed: lmforge's
                                             SparseMLM runs it at masked positions only, HF's
                                             BertForMaskedLM at every position (share 1)

A Llama-style decoder (`model_shape`): its key and value projections are kv_hidden wide (grouped-query
attention), its SwiGLU has three H x I matrices, and its head is the decoder alone, at every position.

Embedding lookups, LayerNorm, softmax, GELU, biases and the optimizer are left out (they do no
matrix multiply; PaLM's MFU counts the same way). For the demo model (L 4, H 128, I 512, S 128,
V 8,000): blocks 6 * 4 * 196,608 = 4.72M, attention 12 * 4 * 128 * 128 = 0.79M, head 6.24M at
every position or 0.94M at 15% of them: 11.75M vs 6.45M FLOPs per token.

Peak = cores x clock x fp32 FLOPs per cycle per core, each read from the machine
(`os.sched_getaffinity`; the clock measured by `train_machine`, else cpufreq or /proc/cpuinfo; the
SIMD flags in /proc/cpuinfo, see `fp32_flops_per_cycle`).
"""
from __future__ import annotations

import contextlib
import os
import re
import resource
from dataclasses import dataclass
from pathlib import Path

from training.models.presets import architecture


@dataclass(frozen=True)
class ModelShape:
    """The sizes the FLOPs depend on."""

    layers: int
    hidden: int
    intermediate: int
    vocab: int
    seq_len: int
    kv_hidden: int = 0
    """Width of the key and value projections (grouped-query attention: kv heads x head size); 0: hidden."""
    gated: bool = False
    """A gated feed-forward (Llama's SwiGLU: gate, up and down matrices) instead of BERT's two matrices."""
    head_transform: bool = True
    """BERT's H x H transform before the vocabulary decoder; a decoder's head is the decoder alone."""

    def __post_init__(self) -> None:
        if min(self.layers, self.hidden, self.intermediate, self.vocab, self.seq_len) < 1:
            raise ValueError(f"model sizes must be positive: {self}")


@dataclass(frozen=True)
class TokenFlops:
    """Training FLOPs per token, by part (see the module docstring)."""

    blocks: float
    attention: float
    head: float

    @property
    def total(self) -> float:
        return self.blocks + self.attention + self.head


def block_weights(m: ModelShape) -> int:
    """N of "6N": the matrix weights of the transformer blocks (no embeddings, no head, no biases)."""
    kv = m.kv_hidden or m.hidden
    return m.layers * (2 * m.hidden * m.hidden + 2 * m.hidden * kv + (3 if m.gated else 2) * m.hidden * m.intermediate)


def flops_per_token(m: ModelShape, head_share: float) -> TokenFlops:
    """Training FLOPs per token; `head_share`: the share of positions where the vocabulary head runs."""
    if not 0 <= head_share <= 1:
        raise ValueError(f"head_share must be in [0, 1], got {head_share}")
    return TokenFlops(blocks=6.0 * block_weights(m),
                      attention=12.0 * m.layers * m.hidden * m.seq_len,
                      head=6.0 * (m.hidden * m.hidden * m.head_transform + m.hidden * m.vocab) * head_share)


def model_shape(m, vocab: int, seq_len: int, model_kind: str = "masked_lm") -> ModelShape:
    """The FLOPs shape of preset `m` (a training.models.presets.ModelConfig) built for `model_kind` shards: a
    Llama-style decoder's grouped key/value projections, SwiGLU's third matrix and a head without BERT's
    transform; BERT's layout otherwise (GPT-2's head has no transform either). T5's encoder-decoder is not
    counted (its cross-attention and two stacks): ValueError."""
    arch = architecture(m, model_kind)
    if arch.encoder_decoder:
        raise ValueError("FLOPs of a T5 (encoder-decoder) step are not counted")
    kv = (m.num_kv_heads or m.num_heads) * (m.hidden_size // m.num_heads) if arch.grouped_kv else 0
    return ModelShape(layers=m.num_layers, hidden=m.hidden_size, intermediate=m.intermediate_size, vocab=vocab,
                      seq_len=seq_len, kv_hidden=kv, gated=arch.gated_mlp, head_transform=arch.head_transform)


# ---- the CPU's peak ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CpuInfo:
    """What /proc/cpuinfo says about the first processor (and the highest current clock of any)."""

    model_name: str
    vendor: str
    family: int | None
    model: int | None
    mhz: float | None
    flags: frozenset[str]


def parse_cpuinfo(text: str) -> CpuInfo:
    """/proc/cpuinfo's fields; `mhz` is the highest "cpu MHz" over the processors listed."""
    first: dict[str, str] = {}
    mhz: list[float] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "cpu MHz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
        first.setdefault(key, value)

    def as_int(key: str) -> int | None:
        v = first.get(key, "")
        return int(v) if v.isdigit() else None

    return CpuInfo(model_name=first.get("model name", "unknown"), vendor=first.get("vendor_id", "unknown"),
                   family=as_int("cpu family"), model=as_int("model"), mhz=max(mhz) if mhz else None,
                   flags=frozenset(first.get("flags", "").split()))


def fp32_flops_per_cycle(info: CpuInfo) -> tuple[int, str]:
    """fp32 FLOPs one core can retire per cycle, from its SIMD flags, and the assumption behind it.

    Two FMA pipes per core (every x86 server core since Haswell and Zen 1), an FMA being 2 FLOPs per
    lane. AVX-512 (avx512f): 2 x 16 lanes x 2 = 64, except on AMD family 25 (Zen 4), which has the
    flag but runs a 512-bit instruction on its two 256-bit pipes, so 32 like AVX2 + FMA (2 x 8 x 2).
    AVX without FMA: a 256-bit multiply and add each cycle, 16; otherwise SSE, 8. Parts with a
    single AVX-512 FMA unit (some Xeon Bronze/Silver) cannot be told from the flags and would get 64.
    """
    f = info.flags
    if "avx512f" in f:
        if info.vendor == "AuthenticAMD" and info.family == 25:
            return 32, ("AVX-512 on AMD family 25 (Zen 4): 512-bit instructions run on two 256-bit FMA pipes, "
                        "2 x 8 fp32 lanes x 2 FLOPs per FMA")
        return 64, "AVX-512: two 512-bit FMA units, 2 x 16 fp32 lanes x 2 FLOPs per FMA"
    if "avx2" in f and "fma" in f:
        return 32, "AVX2 + FMA: two 256-bit FMA units, 2 x 8 fp32 lanes x 2 FLOPs per FMA"
    if "avx" in f:
        return 16, "AVX without FMA: one 256-bit multiply and one add per cycle, 2 x 8 fp32 lanes"
    return 8, "SSE: one 128-bit multiply and one add per cycle, 2 x 4 fp32 lanes"


@dataclass(frozen=True)
class CpuPeak:
    cores: int
    """Cores this process may run on (os.sched_getaffinity)."""
    mhz: float
    mhz_source: str
    flops_per_cycle: int
    assumption: str
    model_name: str
    reported: str = ""
    """What the kernel says about the clock when a measured clock is used instead."""

    @property
    def flops(self) -> float:
        """Peak fp32 FLOP/s of all `cores`."""
        return self.cores * self.mhz * 1e6 * self.flops_per_cycle

    def describe(self) -> str:
        also = f"; {self.reported}" if self.reported else ""
        return (f"{self.cores} cores x {self.mhz:,.0f} MHz ({self.mhz_source}{also}) x {self.flops_per_cycle} fp32 "
                f"FLOPs per cycle = {self.flops / 1e9:,.1f} GFLOP/s ({self.model_name}; {self.assumption})")


def cpu_peak(cpuinfo_text: str, cores: int, max_khz_text: str | None = None, measured_mhz: float | None = None,
             measured_how: str = "measured") -> CpuPeak:
    """The peak from /proc/cpuinfo's text, the core count and the clock: `measured_mhz` when given (what the
    cores run at under load; a virtual machine's kernel reports only the nominal clock, without boost), else
    cpufreq's cpuinfo_max_freq (kHz, what `lscpu` reports as max MHz; often absent in a virtual machine),
    else /proc/cpuinfo's "cpu MHz"."""
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    info = parse_cpuinfo(cpuinfo_text)
    if max_khz_text and max_khz_text.strip().isdigit():
        kernel: tuple[float, str] | None = (int(max_khz_text.strip()) / 1000, "cpufreq cpuinfo_max_freq")
    elif info.mhz:
        kernel = (info.mhz, '/proc/cpuinfo "cpu MHz"')
    else:
        kernel = None
    if measured_mhz:
        mhz, source = measured_mhz, measured_how
        reported = f"{kernel[1]} says {kernel[0]:,.0f} MHz" if kernel else ""
    elif kernel:
        (mhz, source), reported = kernel, ""
    else:
        raise ValueError("no clock: /proc/cpuinfo has no 'cpu MHz' line and cpufreq no cpuinfo_max_freq")
    per_cycle, why = fp32_flops_per_cycle(info)
    return CpuPeak(cores=cores, mhz=mhz, mhz_source=source, flops_per_cycle=per_cycle, assumption=why,
                   model_name=re.sub(r"\s+", " ", info.model_name), reported=reported)


def mfu(tokens_per_s: float, flops: TokenFlops, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the peak."""
    return tokens_per_s * flops.total / peak_flops


def scaling_efficiency(tokens_per_s_1: float, tokens_per_s_2: float) -> float:
    """(tokens/s at 2 processes) / (2 x tokens/s at 1 process): 1.0 when a second process doubles the rate."""
    return tokens_per_s_2 / (2 * tokens_per_s_1)


# ---- was the machine quiet? ---------------------------------------------------------------------

def proc_stat_ticks(text: str) -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs from /proc/stat's `cpu` line; idle and iowait are not busy."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            ticks = [int(x) for x in parts[1:9]]  # user nice system idle iowait irq softirq steal
            return sum(ticks) - ticks[3] - ticks[4], sum(ticks)
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def foreign_share(before: tuple[int, int], after: tuple[int, int], own_cpu_seconds: float, ticks_per_s: float) -> float:
    """Share of the machine's CPU time that processes other than ours were busy with between two
    /proc/stat readings: (busy ticks - our CPU time) / all ticks. E.g. 2 cores for 10 s = 20 s of CPU;
    14 s busy, 12 of them ours: 2 / 20 = 10% taken by someone else."""
    total = (after[1] - before[1]) / ticks_per_s
    busy = (after[0] - before[0]) / ticks_per_s
    return max(0.0, busy - own_cpu_seconds) / total if total > 0 else 0.0


def own_cpu_seconds() -> float:
    """CPU time of this process and of every finished child (torchrun's workers are reaped by torchrun,
    itself reaped by us, so theirs count)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@contextlib.contextmanager
def cpu_watch():
    """Yields a dict that gets `foreign_share`: how much of the CPU other processes took meanwhile."""
    stat = Path("/proc/stat")
    if not stat.exists():
        yield {}
        return
    got: dict[str, float] = {}
    before, own = proc_stat_ticks(stat.read_text()), own_cpu_seconds()
    yield got
    got["foreign_share"] = foreign_share(before, proc_stat_ticks(stat.read_text()), own_cpu_seconds() - own,
                                         os.sysconf("SC_CLK_TCK"))
