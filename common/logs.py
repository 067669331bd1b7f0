"""Where a stage's messages go: lmforge's own progress lines to stdout, library chatter to stderr.

A flow shows a stage's stdout and keeps both streams in `logs/<stage>.log` (flows/stages/runner.py), so
the Prefect log holds lmforge's progress only, without string filters: the libraries' loggers are
configured instead (warnings and above, on stderr) and tqdm bars write to stderr as they do by default.
"""
from __future__ import annotations

import logging
import sys

from common.redact import redact_text

OWN = ("lmforge", "training", "pipelines", "flows")
NOISY = ("apache_beam", "absl", "DeepSpeed", "torch.distributed", "transformers", "datasets", "urllib3", "filelock")


def _redacted(record: logging.LogRecord) -> bool:
    """Every record passes the one redaction rule (common/redact.py) before any handler writes it."""
    record.msg, record.args = redact_text(record.getMessage()), None
    return True


def setup(level: int = logging.INFO, fmt: str = "%(asctime)s %(name)s: %(message)s") -> None:
    """Own loggers at `level` to stdout; everything else WARNING and above to stderr. Idempotent."""
    root = logging.getLogger()
    if not any(getattr(h, "_lmforge", False) for h in root.handlers):
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        err._lmforge = True  # type: ignore[attr-defined]
        # Beam's import-time note that Google Cloud's client libraries are not installed: nothing a run
        # without GCP needs, and the first line of every Beam stage's output
        err.addFilter(lambda r: not str(r.msg).startswith("apitools not found"))
        err.addFilter(_redacted)
        root.addHandler(err)
    root.setLevel(logging.WARNING)
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(logging.Formatter(fmt, datefmt="%H:%M:%S"))
    out.addFilter(_redacted)
    for name in OWN:
        lg = logging.getLogger(name)
        lg.handlers = [out]
        lg.setLevel(level)
        lg.propagate = False
