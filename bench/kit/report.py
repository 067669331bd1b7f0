"""docs/BENCHMARKS.md: one `## <title>` section per benchmark, replaced in place on each run."""
from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

from schemas.manifest import atomic_write_bytes

HEADER = ("# Benchmarks\n\nWritten by `lmforge bench <name>`; each section is replaced when its benchmark runs "
          "again. Peers are measured in the same run on the same machine, so compare ratios.\n")


def cpu_model() -> str:
    """The processor's name and its widest vector unit (hosts differ about 2x between AVX-512 and AVX2 alone)."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or "processor unknown"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.processor() or "processor unknown")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    return f"{name}, {'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'}"


def machine_line() -> str:
    """This machine as a section's stamp names it: architecture, processor, cores, Python."""
    return f"{platform.machine()} ({cpu_model()}), {os.cpu_count()} cores, Python {platform.python_version()}"


def device_facts() -> dict[str, Any]:
    """The device a GPU bench ran on, for its results JSON ("machine"): torch, CUDA, the GPU (or "cpu"), the library
    versions (with their folder when not installed in site-packages, e.g. carried wheels) and LMFORGE_CARRIED."""
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
                             "cpu_count": os.cpu_count()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        facts.update(device=torch.cuda.get_device_name(0), gpu_memory_gb=p.total_memory / 1e9,
                     capability=list(torch.cuda.get_device_capability(0)))
    else:
        facts["device"] = "cpu"
    for mod in ("deepspeed", "transformers", "tokenizers"):
        with contextlib.suppress(ImportError):
            m = __import__(mod)
            site = str(Path(m.__file__).parents[1])
            facts[mod] = m.__version__ + ("" if "site-packages" in site or "dist-packages" in site else f" ({site})")
    facts["carried"] = os.environ.get("LMFORGE_CARRIED", "")
    return facts


def write_section(path: Path, title: str, body: str, data: dict[str, Any], measured: str | None = None,
                  where: str | None = None) -> None:
    """Replace the section `title`; `measured` (e.g. "2026-11-23 18:41 UTC") when the numbers are older than now;
    `where` names the machine when it is not this one (a report rendered here from a device's results)."""
    where = where or machine_line()
    stamp = f"_Measured {measured or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {where}._\n\n"
    section = f"## {title}\n\n{stamp}{body}\n"
    text = path.read_text() if path.exists() else HEADER
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    atomic_write_bytes(path, text.encode())
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    atomic_write_bytes(path.parent / "benchmarks" / f"{slug}.json", (json.dumps(data, indent=2, default=str) + "\n").encode())
