"""A user's labelled file as a prepared task folder, the same one a known source gets (`lmforge labeled prepare`).

    lmforge labeled file tweets.csv --output runs/mine/labeled/tweets --text-column tweet --label-column sentiment
    prepare_file("tweets.csv", "out/", "classification", Columns(text="tweet", label="sentiment"), seed=0)

The file is read and checked by training.finetuning.dataset (JSONL, CSV/TSV, Parquet, a datasets folder, CoNLL): a
missing column, a label that only validation or test has, or too many unusable rows stop it with one line naming
the file, line and column; single bad rows are left out and counted by reason. Its splits are kept where it has
them (a split column, a DatasetDict); a file without any is split here, seeded and stratified by label
(dataset.stratified_split), and the split written down: every row of data.jsonl carries it, so finetune, the card
and the corpus stage's decontamination (its validation and test items) all read the same split. The folder holds
data.jsonl (id, text[, text_pair], label, split; or id, tokens, tags, split), finetune.json (the columns of
data.jsonl), README.md and a manifest with the source file's sha256, the counts per split and the left-out rows.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from schemas import manifest as mf
from training.finetuning.dataset import Columns, Example, load_task

SPLIT_SEED = 0
"""The seed of the split made for a file that has none (written into the manifest and finetune.json)."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _row(ex: Example, split: str, task: str) -> dict[str, Any]:
    if task == "tokens":
        return {"id": ex.uid, "tokens": list(ex.tokens), "tags": list(ex.tags), "split": split}
    return {"id": ex.uid, "text": ex.text, **({"text_pair": ex.text_pair} if ex.text_pair is not None else {}),
            "label": ex.label, "split": split}


def prepare_file(source: str | Path, output: str | Path, task: str = "classification", cols: Columns = Columns(),
                 seed: int = SPLIT_SEED, test_per_mille: int = 100, validation_per_mille: int = 100,
                 max_bad_fraction: float = 0.1) -> Path:
    """Check and split `source` into the prepared task folder `output` (module docstring); returns `output`."""
    t0 = time.time()
    src = Path(source)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such labelled file")
    data = load_task(task, cols, data=[str(src)], test_per_mille=test_per_mille,
                     validation_per_mille=validation_per_mille, max_bad_fraction=max_bad_fraction, split_seed=seed)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    lines = [json.dumps(_row(ex, split, task), ensure_ascii=False) for split in ("train", "validation", "test")
             for ex in data.split(split)]
    mf.atomic_write_bytes(out / "data.jsonl", ("\n".join(lines) + "\n").encode())
    columns = ({"tokens_column": "tokens", "tags_column": "tags"} if task == "tokens" else
               {"text_column": "text", "label_column": "label",
                **({"text_pair_column": "text_pair"} if cols.text_pair else {})})
    finetune = {"task": task, **columns, "split_column": "split", "id_column": "id",
                "data": [str((out / "data.jsonl").resolve())]}
    mf.atomic_write_json(out / "finetune.json", finetune)
    counts: Counter = Counter({k: v for k, v in data.counts.items()})
    if data.labels and task == "classification":
        counts.update({f"label_{name}": 0 for name in data.labels})
        counts.update(f"label_{ex.label}" for split in ("train", "validation", "test") for ex in data.split(split))
    sha = _sha256(src)
    splits = {s: len(data.split(s)) for s in ("train", "validation", "test")}
    warned = unscored_classes(data, task)
    readme = (f"# {src.name}\n\nA user's labelled file, prepared by `lmforge labeled file` ({task}).\n\n"
              f"Source: {src.resolve()} (sha256 {sha}).\n\nRows: " + ", ".join(f"{k} {v:,}" for k, v in splits.items())
              + "; splits: " + "; ".join(f"{k}: {v}" for k, v in data.splits_from.items())
              + (f"; left out: {sum(v for k, v in counts.items() if k.startswith('left_out_')):,}" if data.left_out else "")
              + f".\n\nFine-tune: `lmforge finetune --config {out / 'finetune.json'} --model DIR --output DIR`\n")
    mf.atomic_write_bytes(out / "README.md", readme.encode())
    config = {"file": str(src.resolve()), "task": task, "columns": {k: v for k, v in vars(cols).items() if v},
              "seed": seed, "test_per_mille": test_per_mille, "validation_per_mille": validation_per_mille}
    mf.write_manifest(out, mf.Manifest(stage="labeled", config=config, inputs=[mf.input_ref(src)], counts=dict(counts),
                                 outputs=mf.describe_outputs(out, ["data.jsonl", "finetune.json", "README.md"]),
                                 extra={"finetune": finetune, "source": {"path": str(src.resolve()), "sha256": sha},
                                        "splits_from": data.splits_from, "labels": data.labels,
                                        "left_out": data.left_out, "warnings": warned},
                                 wall_seconds=round(time.time() - t0, 2)))
    print(f"labeled: {src}: " + ", ".join(f"{k} {v:,}" for k, v in splits.items())
          + (f" ({', '.join(f'{k} {v}' for k, v in counts.items() if k.startswith('left_out_'))})" if data.left_out else "")
          + f" -> {out}", flush=True)
    for line in warned:
        print(f"labeled: warning: {line}", flush=True)
    return out


def unscored_classes(data, task: str) -> list[str]:
    """A line per class with no row in validation or test (too few rows for its share to round to one): the fine-tune
    trains on it, but no score ever sees it."""
    if task != "classification":
        return []
    per = {s: Counter(ex.label for ex in data.split(s)) for s in ("train", "validation", "test")}
    lines = []
    for label in data.labels or sorted({*per["train"], *per["validation"], *per["test"]}, key=str):
        missing = [s for s in ("validation", "test") if not per[s][label]]
        if missing:
            n = sum(per[s][label] for s in per)
            lines.append(f"class {label!r} has {n:,} row{'s' if n != 1 else ''}: none in {' or '.join(missing)}, "
                         f"so {'no score sees it' if len(missing) == 2 else 'the ' + missing[0] + ' score never sees it'}")
    return lines
