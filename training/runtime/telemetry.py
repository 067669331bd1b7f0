"""Training telemetry: `metrics.jsonl` streamed as the run goes, and the same scalars in TensorBoard.

One JSON object per line, flushed at once, so `tail -f`, pandas (`pd.read_json(path, lines=True)`) or
a dashboard can follow a run while it trains:

    {"kind": "train", "step": 20, "loss": 6.1, "mlm_accuracy": 0.12, "tokens_per_s": 14800.0,
     "samples_per_s": 115.6, "lr": 0.00098, "grad_norm": 1.9, "peak_rss_mb": 1210.4, "elapsed_s": 41.2, ...}
    {"kind": "valid", "step": 100, "loss": 5.9, "mlm_accuracy": 0.14, "elapsed_s": 180.3}

`train` lines average the steps since the previous line (loss, accuracy, gradient norm) and time
them (tokens/s counts non-padding tokens of all processes; samples/s sequences); `lr` is the
rate of the line's last step; `peak_rss_mb` is the largest peak resident set of any process so
far. `valid` lines come every `--eval-every` steps and at the end. TensorBoard gets each number
as `<kind>/<name>` at its step. On --resume, lines after the checkpoint's step (written by the
run that died) are dropped first, so the file reads as one run.
"""
from __future__ import annotations

import json
import logging
import resource
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("lmforge.telemetry")

METRICS_JSONL = "metrics.jsonl"


def peak_rss_mb() -> float:
    """This process's peak resident set in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a metrics.jsonl (a torn last line from a crash is skipped)."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


class Telemetry:
    """Rank 0's writer (other ranks pass enabled=False and every call is a no-op)."""

    def __init__(self, out: Path, enabled: bool, tensorboard: bool, resume_step: int | None = None):
        self.enabled = enabled
        self.path = out / METRICS_JSONL
        self.writer = None
        if not enabled:
            return
        if resume_step is not None and self.path.exists():
            kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= resume_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        elif self.path.exists():
            self.path.unlink()
        self.file = open(self.path, "a")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                log.warning("tensorboard not installed; no event log")
            else:
                self.writer = SummaryWriter(str(out / "tensorboard"), purge_step=resume_step)

    def write(self, kind: str, step: int, **values: Any) -> None:
        if not self.enabled:
            return
        record = {"kind": kind, "step": step, **values}
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.writer is not None:
            for name, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(f"{kind}/{name}", value, step)

    def close(self) -> None:
        if not self.enabled:
            return
        self.file.close()
        if self.writer is not None:
            self.writer.close()
