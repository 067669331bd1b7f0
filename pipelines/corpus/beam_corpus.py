"""The corpus stage on Apache Beam: read -> clean -> exact dedup -> MinHash dedup -> write.

Run alone:  lmforge corpus --input samples/crawl --output runs/demo/corpus [--runner ...]
Any Beam pipeline option passes through (e.g. --direct_num_workers 2). The DirectRunner runs
in multi_processing mode by default: multi_threading lost records after GroupByKey here.

Every record ends in exactly one of data/, dropped/, duplicates/ or quarantine/, and the
driver checks that in = kept + dropped + duplicates + quarantined before writing the manifest.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipelines.corpus.clean import DROPPED, KEPT, QUARANTINED, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.dedup import band_keys, estimated_jaccard, exact_key, signatures
from pipelines.corpus.readers import read_file
from pipelines.io import shard_of, write_jsonl_rows, write_parquet_rows
from schemas.records import CLEAN_DOC_SCHEMA, DROPPED_SCHEMA, DUPLICATE_SCHEMA, Quarantined

NS = "corpus"


def _quarantine_row(q: Quarantined) -> dict[str, Any]:
    return dataclasses.asdict(q)


class ReadFiles(beam.DoFn):
    """path -> RawDocument (main), quarantine rows, ('read', n) and ('skipped:<type>', n) tallies."""

    def process(self, path: str) -> Iterable[Any]:
        skipped: dict[str, int] = {}
        n = 0
        for rec in read_file(path, skipped):
            n += 1
            if isinstance(rec, Quarantined):
                Metrics.counter(NS, f"quarantined_{rec.reason}").inc()
                yield TaggedOutput("quarantine", _quarantine_row(rec))
            else:
                yield rec
        Metrics.counter(NS, "in").inc(n)
        yield TaggedOutput("tally", ("in", n))
        for rtype, c in skipped.items():
            yield TaggedOutput("tally", (f"skipped_record_type:{rtype}", c))


class Clean(beam.DoFn):
    def __init__(self, cfg: CorpusConfig):
        self.cfg = cfg

    def process(self, doc: Any) -> Iterable[Any]:
        status, value = process_document(doc, self.cfg)
        if status == KEPT:
            yield value
        elif status == DROPPED:
            d, reason = value
            Metrics.counter(NS, f"dropped_{reason}").inc()
            yield TaggedOutput("dropped", {"id": d.id, "url": d.url, "source": d.source, "reason": reason})
        else:
            assert status == QUARANTINED
            Metrics.counter(NS, f"quarantined_{value.reason}").inc()
            yield TaggedOutput("quarantine", _quarantine_row(value))


def pick_exact(item: tuple[str, Iterable[dict]]) -> Iterable[Any]:
    """Keep the smallest id among identical normalised texts."""
    _, docs = item
    docs = sorted(docs, key=lambda d: d["id"])
    yield docs[0]
    for d in docs[1:]:
        Metrics.counter(NS, "duplicates_exact").inc()
        yield TaggedOutput("dups", {"id": d["id"], "kept_id": docs[0]["id"], "kind": "exact", "similarity": 1.0})


class Sign(beam.DoFn):
    """A batch of documents -> (id, signature) using datasketch's batched MinHash.bulk."""

    def __init__(self, num_perm: int, shingle_words: int):
        self.num_perm, self.shingle_words = num_perm, shingle_words

    def process(self, batch: list[dict]) -> Iterable[tuple[str, np.ndarray]]:
        sigs = signatures([d["text"] for d in batch], self.num_perm, self.shingle_words)
        for d, s in zip(batch, sigs):
            yield d["id"], s


def verify_bucket(item: tuple[bytes, Iterable[tuple[str, np.ndarray]]], threshold: float) -> Iterable[tuple[str, tuple[str, float]]]:
    """In one LSH bucket, pair every member with the smallest id; keep pairs whose signatures agree.

    One hop only: a document is removed when it has a verified neighbour with a smaller id, and
    points at that neighbour. Chains (a~b~c with a!~c) may keep more than one member; full
    connected components in Beam are issue 3's work.
    """
    _, members = item
    members = sorted(members, key=lambda m: m[0])
    if len(members) < 2:
        return
    anchor_id, anchor_sig = members[0]
    for mid, sig in members[1:]:
        sim = estimated_jaccard(anchor_sig, sig)
        if sim >= threshold:
            yield mid, (anchor_id, sim)


def split_near(item: tuple[str, dict[str, list]]) -> Iterable[Any]:
    doc_id, grouped = item
    docs, links = grouped["doc"], grouped["link"]
    if not docs:
        return
    if links:
        kept_id, sim = min(links)
        Metrics.counter(NS, "duplicates_near").inc()
        yield TaggedOutput("dups", {"id": doc_id, "kept_id": kept_id, "kind": "near", "similarity": float(sim)})
    else:
        yield docs[0]


def _write_group(item: tuple[Any, Iterable[dict]], out: str, kind: str, num_shards: int = 1) -> str:
    key, rows = item
    rows = list(rows)
    if kind == "data":
        lang, shard = key
        return write_parquet_rows(Path(out, "data", lang, f"part-{shard:05d}-of-{num_shards:05d}.parquet"), rows, CLEAN_DOC_SCHEMA)
    if kind == "duplicates":
        return write_parquet_rows(Path(out, "duplicates", "part-00000.parquet"), rows, DUPLICATE_SCHEMA)
    if kind == "dropped":
        return write_parquet_rows(Path(out, "dropped", "part-00000.parquet"), rows, DROPPED_SCHEMA)
    return write_jsonl_rows(Path(out, "quarantine", "part-00000.jsonl"), rows)


class CorpusPipeline(beam.PTransform):
    """files -> files written; wires the steps only."""

    def __init__(self, cfg: CorpusConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, files):
        cfg, out = self.cfg, self.cfg.output
        read = files | "Spread" >> beam.Reshuffle() | "ReadFiles" >> beam.ParDo(ReadFiles()).with_outputs("quarantine", "tally", main="docs")
        cleaned = read.docs | "Clean" >> beam.ParDo(Clean(cfg)).with_outputs("dropped", "quarantine", main="kept")
        kept = cleaned.kept
        dup_lists = []
        if cfg.exact_dedup:
            exact = (kept | "KeyByHash" >> beam.Map(lambda d: (exact_key(d["text"]), d))
                     | "GroupHash" >> beam.GroupByKey() | "PickExact" >> beam.FlatMap(pick_exact).with_outputs("dups", main="kept"))
            kept = exact.kept
            dup_lists.append(exact.dups)
        if cfg.near_dedup:
            from pipelines.corpus.dedup import lsh_params

            bands, rows = lsh_params(cfg.jaccard_threshold, cfg.num_perm)
            sigs = (kept | "Batch" >> beam.BatchElements(min_batch_size=32, max_batch_size=256)
                    | "Sign" >> beam.ParDo(Sign(cfg.num_perm, cfg.shingle_words)))
            links = (sigs
                     | "Bands" >> beam.FlatMap(lambda kv: [(k, kv) for k in band_keys(kv[1], bands, rows)])
                     | "GroupBands" >> beam.GroupByKey()
                     | "Verify" >> beam.FlatMap(verify_bucket, cfg.jaccard_threshold))
            near = ({"doc": kept | "KeyById" >> beam.Map(lambda d: (d["id"], d)), "link": links}
                    | "JoinLinks" >> beam.CoGroupByKey()
                    | "SplitNear" >> beam.FlatMap(split_near).with_outputs("dups", main="kept"))
            kept = near.kept
            dup_lists.append(near.dups)

        n = cfg.num_shards
        _ = (kept | "KeyByShard" >> beam.Map(lambda d: ((d["language"], shard_of(d["id"], n)), d))
             | "GroupShards" >> beam.GroupByKey() | "WriteData" >> beam.Map(_write_group, out, "data", n))
        outputs = {"dropped": cleaned.dropped,
                   "quarantine": (read.quarantine, cleaned.quarantine),
                   "duplicates": tuple(dup_lists)}
        for name, pcolls in outputs.items():
            pcolls = pcolls if isinstance(pcolls, tuple) else (pcolls,)
            if not pcolls:
                continue
            merged = pcolls | f"Merge_{name}" >> beam.Flatten() if len(pcolls) > 1 else pcolls[0]
            _ = (merged | f"Key_{name}" >> beam.Map(lambda r: (0, r)) | f"Group_{name}" >> beam.GroupByKey()
                 | f"Write_{name}" >> beam.Map(_write_group, out, name))
        _ = (read.tally | "SumTally" >> beam.CombinePerKey(sum) | "KeyTally" >> beam.Map(lambda kv: (0, kv))
             | "GroupTally" >> beam.GroupByKey()
             | "WriteTally" >> beam.Map(lambda kv: write_jsonl_rows(Path(out, "_tally.jsonl"), [{"id": k, "n": v} for k, v in kv[1]])))
        return files
