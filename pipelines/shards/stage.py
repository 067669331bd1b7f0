"""Driver for the shards stage: run the Beam pipeline, then describe the shards in the manifest."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from lmforge.config import config_to_dict, opt, require
from pipelines.corpus.stage import default_beam_args
from pipelines.shards.masking import MaskConfig
from schemas.manifest import MANIFEST_NAME, Manifest, describe_outputs, input_ref, read_manifest, write_manifest
from schemas.shards import SHARD_SCHEMA_VERSION


@dataclass
class ShardsConfig:
    corpus: str = opt(help="corpus stage directory")
    tokenizer: str = opt(help="tokenizer stage directory (tokenizer.json)")
    output: str = opt(help="stage directory to write train/ and valid/ Arrow shards to")
    seq_len: int = opt(128, "tokens per packed row (512 supported)")
    num_shards: int = opt(2, "train shards (valid is one shard)")
    valid_per_mille: int = opt(50, "documents per 1,000 held out for validation, chosen by a hash of the id")
    mask: MaskConfig = field(default_factory=MaskConfig, metadata={"help": "masking"})

    def __post_init__(self) -> None:
        require(8 <= self.seq_len <= 4096, f"seq_len must be in [8, 4096], got {self.seq_len}")
        require(self.num_shards >= 1, "num_shards must be >= 1")
        require(0 < self.valid_per_mille < 1000, "valid_per_mille must be in (0, 1000)")
        if isinstance(self.mask, dict):
            self.mask = MaskConfig(**self.mask)


def run(cfg: ShardsConfig, beam_args: list[str] | None = None) -> Path:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.shards.beam_shards import ShardsPipeline

    t0 = time.time()
    read_manifest(cfg.corpus)
    tok_manifest = read_manifest(cfg.tokenizer)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    for split in ("train", "valid"):
        shutil.rmtree(out / split, ignore_errors=True)
    corpus_glob = str(Path(cfg.corpus, "data", "*", "*.parquet"))
    tokenizer_json = str(Path(cfg.tokenizer, "tokenizer.json"))
    args = default_beam_args(beam_args or [])
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        _ = p | "Shards" >> ShardsPipeline(corpus_glob, tokenizer_json, str(out), cfg.seq_len, cfg.mask,
                                           cfg.num_shards, cfg.valid_per_mille)
    splits: dict[str, list[str]] = {"train": [], "valid": []}
    counts = {"train_rows": 0, "valid_rows": 0, "train_tokens": 0, "valid_tokens": 0}
    for split in splits:
        for f in sorted((out / split).glob("shard-*.arrow")):
            with pa.memory_map(str(f)) as src:
                t = pa.ipc.open_stream(src).read_all()
            splits[split].append(str(f.relative_to(out)))
            counts[f"{split}_rows"] += t.num_rows
            counts[f"{split}_tokens"] += int(pa.compute.sum(t.column("length")).as_py() or 0)
    if not splits["train"] or not splits["valid"]:
        raise RuntimeError(f"shards: empty split in {out} ({counts}); the corpus is too small for valid_per_mille={cfg.valid_per_mille}")
    special = tok_manifest["extra"]["special_tokens"]
    write_manifest(out, Manifest(
        stage="shards", config=config_to_dict(cfg), inputs=[input_ref(cfg.corpus), input_ref(cfg.tokenizer)],
        counts=counts,
        outputs=describe_outputs(out, [out / f for fs in splits.values() for f in fs]),
        extra={"schema": SHARD_SCHEMA_VERSION, "seq_len": cfg.seq_len, "num_variants": cfg.mask.num_variants,
               "objective": "mlm", "vocab_size": tok_manifest["counts"]["vocab_size"],
               "pad_id": special["[PAD]"], "mask_id": special["[MASK]"], "special_ids": special,
               "splits": splits,
               "tokenizer_sha256": next(o["sha256"] for o in tok_manifest["outputs"] if o["path"] == "tokenizer.json")},
        wall_seconds=round(time.time() - t0, 2)))
    print(f"shards: {counts} -> {out}", flush=True)
    return out
