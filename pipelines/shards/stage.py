"""Driver for the shards stage: check the inputs, run the Beam pipeline, describe the shards in the manifest."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from common.config import config_to_dict, opt, require
from pipelines.beam_options import check_worker_paths, runner_name
from pipelines.corpus.stage import default_beam_args
from pipelines.shards.mask_config import MaskConfig
from schemas import storage
from schemas.manifest import (
    MANIFEST_NAME,
    Manifest,
    describe_outputs,
    input_ref,
    read_manifest,
    sha256_file,
    write_manifest,
)
from schemas.shards import MASK_COLUMNS, PACKINGS, SHARD_SCHEMA_VERSION, ShardMeta, shard_file_key

SPLITS = ("train", "valid")


@dataclass
class ShardsConfig:
    corpus: str = opt(help="corpus stage directory", path=True)
    tokenizer: str = opt(help="tokenizer stage directory (tokenizer.json)", path=True)
    output: str = opt(help="stage directory to write train/ and valid/ Arrow shards to", path=True)
    seq_len: int = opt(128, "tokens per packed row (512 supported)")
    num_shards: int = opt(2, "train shard groups, one Beam task each (valid is one group)")
    valid_per_mille: int = opt(50, "documents per 1,000 held out for validation, chosen by a hash of the id")
    packing: str = opt("concat", "concat: documents back to back, cut into rows (HF group_texts) | "
                                 "document: one document per row, padded (a longer one continues in the next rows)")
    target_shard_mb: float = opt(4.0, "largest shard file in MiB; a group is cut into equal consecutive files up to "
                                      "this (the demo's 7.5 MiB of train rows make 3 files; MosaicML streaming uses 64)")
    fast_encode: bool = opt(True, "encode through a word cache: HF tokenizers' ids (checked against them on every 64th "
                                  "document) for a fraction of their CPU time, see docs/BENCHMARKS.md; off: HF "
                                  "tokenizers' encode_batch on every core")
    replay: list[str] = opt([], "earlier corpus stage directories whose documents are partly mixed in (a refresh's "
                                "replay of earlier snapshots, so continued training does not only see the new pages)", path=True)
    replay_fraction: float = opt(0.1, "fraction of the --replay corpora's documents mixed in, chosen by a hash of "
                                      "the document id (the same ones on every run)")
    mask: MaskConfig = field(default_factory=MaskConfig, metadata={"help": "masking"})

    def __post_init__(self) -> None:
        require(0.0 <= self.replay_fraction <= 1.0, f"replay_fraction must be in [0, 1], got {self.replay_fraction}")
        require(8 <= self.seq_len <= 4096, f"seq_len must be in [8, 4096], got {self.seq_len}")
        require(self.num_shards >= 1, "num_shards must be >= 1")
        require(0 < self.valid_per_mille < 1000, "valid_per_mille must be in (0, 1000)")
        require(self.packing in PACKINGS, f"packing {self.packing!r} is not one of {', '.join(PACKINGS)}")
        require(self.target_shard_mb > 0, f"target_shard_mb must be > 0, got {self.target_shard_mb}")
        if isinstance(self.mask, dict):
            self.mask = MaskConfig(**self.mask)

    @property
    def target_bytes(self) -> int:
        return int(self.target_shard_mb * (1 << 20))


def describe_shard(path: str | Path) -> dict[str, Any]:
    """Rows, real tokens, bytes, and the bytes the same file would take without the mask columns."""
    from pipelines.shards.write import stream_size

    src = pa.BufferReader(storage.read_bytes(path)) if storage.is_remote(path) else pa.memory_map(str(path))
    with src:
        table = pa.ipc.open_stream(src).read_all()
        return {"rows": table.num_rows, "tokens": int(pc.sum(table["length"]).as_py() or 0),
                "bytes": storage.size(path), "bytes_without_masks": stream_size(table.drop_columns(list(MASK_COLUMNS)))}


def bytes_per_token(shards: list[dict[str, Any]]) -> dict[str, float | None]:
    """On-disk bytes per real (non-padding) token, with and without the K mask variants."""
    tokens = sum(s["tokens"] for s in shards)
    if not tokens:
        return {"with_masks": None, "without_masks": None}
    return {"with_masks": round(sum(s["bytes"] for s in shards) / tokens, 3),
            "without_masks": round(sum(s["bytes_without_masks"] for s in shards) / tokens, 3)}


def check_documents(corpus: str, metrics: dict[str, int], replayed: int = 0) -> None:
    """Every corpus document (and every replayed one) reached a group: a shuffle that lost documents
    before the GroupByKey would leave files and row counters in agreement, so the documents are
    counted against the corpus Parquet footers (num_rows, no data read)."""
    if not metrics:  # runners that report no counters skip this cross-check
        return
    want = corpus_documents(corpus) + replayed
    got = sum(metrics.get(f"{split}_{k}", 0) for split in SPLITS for k in ("documents", "empty_documents"))
    if got != want:
        raise RuntimeError(f"shards: {want} documents in {corpus}/data (and replayed) but {got} reached the shard "
                           "groups; a shuffle lost records (rerun with --direct_running_mode=in_memory)")


def replay_files(cfg: ShardsConfig) -> list[str]:
    return sorted(f for r in cfg.replay for f in corpus_files(r))


def replay_documents(cfg: ShardsConfig) -> int:
    """How many documents of the replay corpora the hash sample takes (ids read, not texts)."""

    from pipelines.shards.rows import replay_mask

    return sum(sum(replay_mask(storage.parquet_file(f).read(columns=["id"]).column("id").to_pylist(), cfg.replay_fraction))
               for f in replay_files(cfg))


def beam_counters(pipeline) -> dict[str, int]:
    """The pipeline's counters summed over steps; {} on runners that report none."""
    metrics: dict[str, int] = {}
    try:
        for c in pipeline.result.metrics().query()["counters"]:
            n = c.committed if c.committed is not None else c.attempted
            metrics[c.key.metric.name] = metrics.get(c.key.metric.name, 0) + n
    except Exception:  # noqa: BLE001 - metrics are a cross-check; the files are the record of truth
        pass
    return dict(sorted(metrics.items()))


@dataclass
class Prepared:
    """What the driver checked before any group runs."""

    tokenizer_json: Path
    tokenizer_sha256: str
    ids: dict[str, Any]
    """`pipelines.tokenizer.special_ids` of the tokenizer."""
    vocab_size: int
    meta: ShardMeta


def prepare(cfg: ShardsConfig) -> Prepared:
    """Check the inputs (finished stages, unchanged tokenizer, objective it can serve), then empty the output."""
    from pipelines.shards.rows import check_objective, load_tokenizer, shard_meta
    from pipelines.tokenizer import special_ids

    read_manifest(cfg.corpus)  # the corpus must have finished; input_ref pins its manifest's sha256
    for r in cfg.replay:
        read_manifest(r)
    tok_manifest = read_manifest(cfg.tokenizer)
    tokenizer_json = storage.join(cfg.tokenizer, "tokenizer.json")
    digest = sha256_file(tokenizer_json)
    listed = next((o["sha256"] for o in tok_manifest["outputs"] if o["path"] == "tokenizer.json"), None)
    if listed != digest:
        raise ValueError(f"{tokenizer_json}: sha256 {digest} differs from {listed} in "
                         f"{storage.join(cfg.tokenizer, MANIFEST_NAME)}; the tokenizer changed after its stage finished")
    tok = load_tokenizer(tokenizer_json)
    ids = special_ids(tok)
    check_objective(ids, cfg.mask.objective, str(tokenizer_json))
    out = str(cfg.output)
    storage.make_dirs(out)
    storage.remove(storage.join(out, MANIFEST_NAME))  # first: a crashed rerun never looks finished
    for split in SPLITS:
        storage.remove_tree(storage.join(out, split))
    return Prepared(tokenizer_json, digest, ids, tok.get_vocab_size(), shard_meta(ids, cfg.seq_len, cfg.mask, cfg.packing, tok.get_vocab_size()))


IN_MEMORY_UP_TO = 50_000
"""Corpora of at most this many documents run on the DirectRunner in_memory by default."""


def corpus_documents(corpus: str | Path) -> int:
    """Documents in the corpus Parquet, from the footers (no data read)."""

    return sum(storage.parquet_file(f).metadata.num_rows for f in corpus_files(corpus))


def corpus_files(corpus: str | Path) -> list[str]:
    """The corpus stage's kept-document Parquet files (data/<language>/part-*.parquet), sorted."""
    return storage.files_under(storage.join(corpus, "data"), "*/*.parquet")


def auto_mode(documents: int) -> str:
    """The DirectRunner mode the stage picks when not told: `in_memory` (one process, nothing to
    start) for a sample of at most IN_MEMORY_UP_TO documents, else `multi_processing` (a worker
    process per core, which take a few seconds to start and then encode groups at once). Measured
    on 2 cores with the demo corpus (1,420 documents): 1.0 s in_memory against 4.0 s; its texts
    10 times, 4.7 s against 6.3 s; 100 times, 36 s against 26 s."""
    return "in_memory" if documents <= IN_MEMORY_UP_TO else "multi_processing"


def run(cfg: ShardsConfig, beam_args: list[str] | None = None) -> Path:
    """The stage on Beam: the DirectRunner in the mode `auto_mode` picks, unless `beam_args` say otherwise."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.shards.beam_shards import ShardsPipeline

    t0 = time.time()
    storage.configure(beam_args)  # corpus, tokenizer and output may be on object storage
    check_worker_paths(beam_args or [], [cfg.corpus, cfg.tokenizer, cfg.output, *cfg.replay])
    prep = prepare(cfg)
    corpus_glob = storage.join(cfg.corpus, "data", "*", "*.parquet")
    given = beam_args or []
    chosen = runner_name(given) != "DirectRunner" or any(a.startswith("--direct_running_mode") for a in given)
    docs = None if chosen else corpus_documents(cfg.corpus)
    mode = auto_mode(docs) if docs is not None else None
    args = default_beam_args(given, mode or "multi_processing")
    if mode:
        print(f"shards: {docs:,} documents -> DirectRunner {mode} "
              f"(in_memory up to {IN_MEMORY_UP_TO:,}; --direct_running_mode=... chooses)", flush=True)
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        _ = p | "Shards" >> ShardsPipeline(corpus_glob, str(prep.tokenizer_json), cfg.output, cfg.seq_len, cfg.mask,
                                           cfg.num_shards, cfg.valid_per_mille, cfg.packing, cfg.target_bytes,
                                           cfg.fast_encode, replay_files(cfg), cfg.replay_fraction)
    return finish(cfg, prep, beam_counters(p), t0)


def run_local(cfg: ShardsConfig) -> Path:
    """The same stage in this process, without Beam (for tests and tiny corpora): the same groups
    through the same `write_group`, so the same bytes as `run`."""

    from pipelines.io import shard_of
    from pipelines.shards.rows import DocEncoder, load_tokenizer, shard_setup, split_of, write_group

    t0 = time.time()
    prep = prepare(cfg)
    from pipelines.shards.rows import replay_mask

    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    own = corpus_files(cfg.corpus)
    for f in own + replay_files(cfg):
        docs = storage.parquet_file(f).read(columns=["id", "text"]).to_pylist()
        if f not in own:
            docs = [d for d, keep in zip(docs, replay_mask([d["id"] for d in docs], cfg.replay_fraction)) if keep]
        for d in docs:
            split = split_of(d["id"], cfg.valid_per_mille)
            groups.setdefault((split, shard_of(d["id"], cfg.num_shards if split == "train" else 1)), []).append(d)
    tok = load_tokenizer(prep.tokenizer_json)
    spec, vocab = shard_setup(tok, cfg.seq_len, cfg.mask, cfg.packing)
    metrics: dict[str, int] = {}
    enc = DocEncoder(tok, cfg.fast_encode)
    for (split, shard), docs in sorted(groups.items()):
        _, counts = write_group(cfg.output, split, shard, docs, enc, spec, vocab, cfg.mask, cfg.target_bytes)
        for name, n in counts.items():
            metrics[f"{split}_{name}"] = metrics.get(f"{split}_{name}", 0) + n
    return finish(cfg, prep, dict(sorted(metrics.items())), t0)


def finish(cfg: ShardsConfig, prep: Prepared, metrics: dict[str, int], t0: float) -> Path:
    """Describe every file written (rows, tokens, bytes with and without masks, sha256), check the
    counts against the run's counters, and write the manifest, last."""
    out = str(cfg.output)
    splits: dict[str, list[str]] = {}
    shards: list[dict[str, Any]] = []
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1))  # Arrow reads release the GIL
    for split in SPLITS:
        files = sorted(storage.files_under(storage.join(out, split), "shard-*.arrow"), key=lambda f: shard_file_key(storage.name(f)))
        splits[split] = [f"{split}/{storage.name(f)}" for f in files]
        for f, rel, described in zip(files, splits[split], pool.map(describe_shard, files)):
            shard, part = shard_file_key(storage.name(f))
            shards.append({"path": rel, "split": split, "shard": shard, "part": part, **described})
    pool.shutdown()
    outputs = describe_outputs(out, [s["path"] for s in shards])
    digests = {o.path: o.sha256 for o in outputs}
    for s in shards:
        s["sha256"] = digests[s["path"]]
    counts: dict[str, Any] = {}
    for split in SPLITS:
        mine = [s for s in shards if s["split"] == split]
        counts.update({f"{split}_rows": sum(s["rows"] for s in mine), f"{split}_tokens": sum(s["tokens"] for s in mine),
                       f"{split}_files": len(mine), f"{split}_documents": metrics.get(f"{split}_documents"),
                       f"{split}_empty_documents": metrics.get(f"{split}_empty_documents")})
        if metrics and metrics.get(f"{split}_rows", 0) != counts[f"{split}_rows"]:
            raise RuntimeError(f"shards: the run counted {metrics.get(f'{split}_rows', 0)} {split} rows but "
                               f"{storage.join(out, split)} holds {counts[f'{split}_rows']}; records were lost")
    replayed = replay_documents(cfg) if cfg.replay else 0
    check_documents(cfg.corpus, metrics, replayed)
    counts["replayed_documents"] = replayed
    if not counts["train_rows"] or not counts["valid_rows"]:
        raise RuntimeError(f"shards: empty split in {out} ({counts}); the corpus is too small for valid_per_mille={cfg.valid_per_mille}")
    per_token = bytes_per_token(shards)
    counts.update({"bytes": sum(s["bytes"] for s in shards), "bytes_without_masks": sum(s["bytes_without_masks"] for s in shards),
                   "bytes_per_token": per_token["with_masks"], "bytes_per_token_without_masks": per_token["without_masks"]})
    meta, ids = prep.meta, prep.ids
    corpus_ref, tokenizer_ref = input_ref(cfg.corpus), input_ref(cfg.tokenizer)
    write_manifest(out, Manifest(
        stage="shards", config=config_to_dict(cfg), inputs=[corpus_ref, tokenizer_ref, *map(input_ref, cfg.replay)],
        counts=counts, outputs=outputs,
        extra={"schema": SHARD_SCHEMA_VERSION, "seq_len": cfg.seq_len, "num_variants": meta.num_variants,
               "objective": meta.objective, "family": meta.family, "packing": meta.packing,
               "vocab_size": prep.vocab_size, "pad_id": meta.pad_id, "mask_id": ids["mask"], "eos_id": meta.eos_id,
               "max_encoder_len": meta.max_encoder_len, "max_target_len": meta.max_target_len,
               "special_ids": ids, "splits": splits, "shards": shards, "target_shard_bytes": cfg.target_bytes,
               "bytes_per_token": per_token, "tokenizer_sha256": prep.tokenizer_sha256,
               "corpus_manifest_sha256": corpus_ref.manifest_sha256,
               "tokenizer_manifest_sha256": tokenizer_ref.manifest_sha256, "run_counters": metrics},
        wall_seconds=round(time.time() - t0, 2)))
    print(f"shards: {meta.objective} x {meta.num_variants} variants, {meta.family} {meta.packing} packing: "
          f"{counts['train_rows']} train / {counts['valid_rows']} valid rows in {len(shards)} files, "
          f"{per_token['with_masks']} bytes/token ({per_token['without_masks']} without masks) -> {out}", flush=True)
    return out if storage.is_remote(out) else Path(out)
