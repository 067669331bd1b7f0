"""lmforge's per-user cache ($XDG_CACHE_HOME/lmforge, else ~/.cache/lmforge): things derived from
installed packages that are slow to derive and the same every run (the URL blocklists' hashes, the
LSH parameters). Everything in it can be deleted; it is rebuilt on next use."""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def cache_dir(*parts: str) -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "lmforge", *parts)


def torch_extensions_dir() -> Path:
    """Where DeepSpeed's JIT-built ops (its CPU shared-memory comm op: ~45-90 s to compile) go: one folder per Python
    environment. torch's default (~/.cache/torch_extensions/py311_cpu) is one folder for every environment of one
    Python version, so two environments (a checkout's .venv and CI's clone of it) took turns rebuilding the op."""
    key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "torch_extensions", f"env-{key}")


def remembered(name: str, key: str, compute: Any) -> Any:
    """compute() once per key, kept in cache_dir(name + ".json"): a JSON value. Written to a
    temporary name and renamed, so two processes writing at once each leave a whole file (one of
    the two new keys may be lost, and is computed again later); an unreadable file is recomputed."""
    path = cache_dir(f"{name}.json")
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if key in known:
        return known[key]
    value = known[key] = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a read-only home: the value is still right, only not kept
        pass
    return value

