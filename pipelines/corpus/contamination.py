"""Check a finished corpus against evaluation sets, without cleaning it again.

    lmforge contamination --corpus runs/demo/corpus --decontaminate runs/demo/labeled/reuters --output runs/demo/contamination

For a new evaluation set and a corpus already kept (a refresh's earlier snapshots, a corpus built
before the set existed): every kept document (`data/*/*.parquet`) is matched as the corpus stage's
decontaminate step matches pages (pipelines/corpus/decont.py), and nothing in the corpus changes.
Output: `matches.jsonl` (one row per document sharing an n-gram: id, url, language, detail with the
first n-gram and every item shared), `report.json` (per task: items, too short to check, found, by
split, documents), and a manifest. To take the documents out, rerun the corpus stage with
`--decontaminate`, or filter the ids of matches.jsonl.

One process reads the Parquet files batch by batch (4,000+ documents/s on 3 KB pages, bench corpus);
the texts are never all in memory.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.config import config_to_dict, opt, require
from pipelines.corpus.decont import DecontConfig
from pipelines.corpus.steps.decontaminate import MAX_ITEMS, contamination, detail, index_for, summary
from schemas import storage
from schemas.manifest import Manifest, atomic_write_bytes, describe_outputs, input_ref, read_manifest, write_manifest

BATCH_ROWS = 4096


@dataclass
class ContaminationConfig:
    corpus: str = opt(help="a finished corpus stage directory (its data/*/*.parquet are checked)", path=True)
    output: str = opt(help="directory to write matches.jsonl, report.json and manifest.json", path=True)
    decontaminate: DecontConfig = field(default_factory=DecontConfig, metadata={"help": "the evaluation sets and the matching"})

    def __post_init__(self) -> None:
        if isinstance(self.decontaminate, dict):
            self.decontaminate = DecontConfig(**self.decontaminate)
        require(bool(self.decontaminate.files), "contamination: --decontaminate needs at least one evaluation set")


def run(cfg: ContaminationConfig) -> Path:
    import pyarrow.parquet as pq

    t0 = time.time()
    read_manifest(cfg.corpus)  # a ValueError naming it if the stage has not finished
    found_sets = summary(DecontConfig(**{**vars(cfg.decontaminate), "enabled": True}))  # fails on a bad set, naming it
    index = index_for(cfg.decontaminate)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    files = sorted(storage.files_under(storage.join(cfg.corpus, "data"), "*/*.parquet"))
    rows, documents = [], 0
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=BATCH_ROWS, columns=["id", "url", "text", "language"]):
            b = batch.to_pydict()
            for doc_id, url, text, lang in zip(b["id"], b["url"], b["text"], b["language"]):
                found = detail(index, text)
                if found is not None:
                    rows.append({"id": doc_id, "url": url, "language": lang, "detail": found})
            documents += batch.num_rows
        print(f"contamination: {documents:,} documents checked, {len(rows):,} share an n-gram ({f})", flush=True)
    per_task = contamination(found_sets, [("kept", r["detail"]) for r in rows])
    atomic_write_bytes(out / "matches.jsonl", "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                                       for r in sorted(rows, key=lambda r: r["id"])).encode())
    report = {"corpus": str(cfg.corpus), "documents": documents, "documents_matched": len(rows), "tasks": per_task,
              "items_listed_per_document": MAX_ITEMS, **{k: found_sets[k] for k in ("files", "splits", "n_grams")}}
    atomic_write_bytes(out / "report.json", (json.dumps(report, indent=1, sort_keys=True) + "\n").encode())
    write_manifest(out, Manifest(stage="contamination", config=config_to_dict(cfg), inputs=[input_ref(cfg.corpus)],
                                 counts={"documents": documents, "matched": len(rows)},
                                 outputs=describe_outputs(out, [out / "matches.jsonl", out / "report.json"]),
                                 extra={"decontamination": found_sets, "contamination": per_task},
                                 wall_seconds=round(time.time() - t0, 2)))
    for task, t in sorted(per_task.items()):
        print(f"contamination: {task}: {t['found']:,} of {t['items'] - t['too_short']:,} checkable items found "
              f"({t['too_short']:,} too short), in {t['pages_kept']:,} documents", flush=True)
    return out
