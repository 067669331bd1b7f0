"""What `bench train` measures about the machine itself: its clock, a matmul ceiling, and whether other
processes took CPU during a measurement. The arithmetic is in `training.models.flops`; this module only reads and runs.

The clock is measured because a virtual machine's kernel shows the nominal clock only (here: /proc/cpuinfo
2,596 MHz, no cpufreq) while the cores run boosted (3,670 MHz measured); a peak from the nominal clock
is one that a plain matmul exceeds. psutil.cpu_freq() and py-cpuinfo read the same kernel figures, so
they do not help; the measurement is a C loop of dependent integer adds, one cycle each on current x86 cores (AMD
Zen, Intel Core), one copy per core at once (the all-core clock, what training runs at). The adds are register to
register (`add %0, %0`, x doubling): Intel's Golden Cove cores (Sapphire Rapids) fold chains of add-immediate into
the renamer, so `add $1, %0` ran at "21,373 MHz" on such a host (2026-11-29) where `add %0, %0`, `rol` and `adc`
agree on about 3,880.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from training.models.flops import CpuPeak, cpu_peak

ADDS_PER_ITERATION = 100
CLOCK_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* argv: iterations, repeats. Prints each timing's MHz (ADDS dependent 1-cycle adds per iteration), then x. */
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int reps = atoi(argv[2]);
    unsigned long x = 0;
    for (int r = 0; r < reps; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) __asm__ volatile(BODY : "+r"(x));
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
        printf("%.1f ", n * (double)ADDS / s / 1e6);
    }
    printf("%lu\n", x);
    return 0;
}
"""


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def measure_clock(copies: int, iterations: int = 300_000, repeats: int = 50) -> float | None:
    """All-core clock in MHz: `copies` processes at once, each the best of `repeats` timings of
    iterations x 100 dependent register adds (300k x 100 = 30M cycles, ~8 ms at 3.7 GHz: short enough that
    some fall between another process's time slices; with 5 timings of 100 ms, a busy machine read
    1,237-3,647 MHz, with these 3,668-3,682); the highest copy. A timing above GLITCH times its copy's median is left
    out (`best_timing`): the best of 50 would otherwise take one jump of a virtual machine's timer for the clock.
    None without a C compiler or off x86 (the adds are x86 assembly)."""
    import platform

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc or platform.machine() not in ("x86_64", "AMD64", "i686"):
        return None
    with tempfile.TemporaryDirectory(prefix="lmforge-clock-") as d:
        src, exe = Path(d, "clock.c"), Path(d, "clock")
        body = '"' + "add %0, %0\\n\\t" * ADDS_PER_ITERATION + '"'
        src.write_text(CLOCK_SOURCE.replace("BODY", body).replace("(double)ADDS", f"(double){ADDS_PER_ITERATION}"))
        if subprocess.run([cc, "-O1", "-o", str(exe), str(src)], capture_output=True).returncode != 0:
            return None
        procs = [subprocess.Popen([str(exe), str(iterations), str(repeats)], stdout=subprocess.PIPE, text=True)
                 for _ in range(copies)]
        mhz = [best_timing([float(v) for v in p.communicate()[0].split()[:-1]]) for p in procs]
    return max(mhz)


GLITCH = 2.5
"""A timing this many times its copy's median is a clock glitch: a busy machine's slowest timings are about half
the core's clock (1,237 against 3,647 MHz above), so the core's own best stays within 2.5x of any median."""


def best_timing(mhz: list[float]) -> float:
    """The highest of one copy's timings, those above GLITCH x their median left out."""
    import statistics

    median = statistics.median(mhz)
    return max(v for v in mhz if v <= GLITCH * median)


def machine_peak() -> CpuPeak:
    n = cores()
    max_freq = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    measured = measure_clock(n)
    return cpu_peak(Path("/proc/cpuinfo").read_text(), n, max_freq.read_text() if max_freq.exists() else None,
                    measured_mhz=measured,
                    measured_how=f"measured: {n} copies at once of a loop of dependent integer adds, 1 cycle each")


def matmul_ceiling(threads: int, n: int = 2048, repeats: int = 5) -> dict[str, Any]:
    """The best fp32 FLOP/s of an n x n matmul with `threads` torch threads: what this CPU's BLAS
    reaches at all, a check on the stated peak (a measured rate above it proves the peak wrong)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    torch.set_num_threads(before)
    return {"n": n, "threads": threads, "flops": 2 * n ** 3 / best}


