"""The corpus stage on Apache Beam: read -> clean -> exact dedup -> MinHash dedup (beam_dedup.py)
-> C4 line dedup -> write, and extend the band index when one is given.

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
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipelines.corpus.beam_dedup import ExtendIndex, NearDedup, ReadIndex
from pipelines.corpus.clean import DROPPED, KEPT, QUARANTINED, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.dedup import exact_key, quality, rank_key
from pipelines.corpus.filters import clean_page
from pipelines.corpus.linededup import line_keys, losers, remove_lines
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


def first_of_id(item: tuple[str, Iterable[dict]]) -> Iterable[Any]:
    doc_id, docs = item
    docs = sorted(docs, key=lambda d: (d["source"], d.get("offset", 0), d["text"]))  # deterministic
    yield docs[0]
    for d in docs[1:]:
        Metrics.counter(NS, "quarantined_duplicate_id").inc()
        yield TaggedOutput("quarantine", {"source": d["source"], "offset": d.get("offset", 0), "reason": "duplicate_id",
                                          "detail": f"id already used by {docs[0]['source']}", "id": doc_id})


def pick_exact(item: tuple[str, Iterable[tuple[str, dict]]]) -> Iterable[Any]:
    """One normalised-text hash -> the document kept and the exact duplicates removed.

    Members are ("new", doc) from this snapshot or ("old", entry) from the band index; a
    published (indexed) document wins, else the best rank (dedup.rank_key: quality, then id).
    """
    _, members = item
    new = sorted((d for tag, d in members if tag == "new"), key=lambda d: rank_key(d["id"], quality(d), indexed=False))
    old = sorted((e for tag, e in members if tag == "old"), key=lambda e: e["rank"])
    if old:
        kept_id, gen, removed = old[0]["id"], old[0]["generation"], new
    elif new:
        kept_id, gen, removed = new[0]["id"], None, new[1:]
        yield new[0]
    else:
        return
    for d in removed:
        Metrics.counter(NS, "duplicates_exact").inc()
        yield TaggedOutput("dups", {"id": d["id"], "cluster_id": kept_id, "kept_id": kept_id, "kind": "exact",
                                   "similarity": 1.0, "kept_generation": gen})


def repoint_exact(item: tuple[str, dict[str, list]]) -> Iterable[dict[str, Any]]:
    """An exact group's representative can itself be removed as a near-duplicate: point its
    exact copies at the near cluster's representative, so every kept_id names a kept document."""
    _, grouped = item
    near = grouped["near"][0] if grouped["near"] else None
    for row in grouped["exact"]:
        yield ({**row, "cluster_id": near["cluster_id"], "kept_id": near["kept_id"], "kept_generation": near["kept_generation"]}
               if near and row["kept_generation"] is None else row)


def dedup_lines(item: tuple[str, dict[str, list]], c4: Any) -> Iterable[Any]:
    """A document and the keys of lines another page owns -> the document without them, or a drop."""
    _, grouped = item
    if not grouped["doc"]:
        return
    doc = grouped["doc"][0]
    if not grouped["lose"]:
        yield doc
        return
    text = remove_lines(doc["text"], set(grouped["lose"]))
    Metrics.counter(NS, "line_dedup_lines_removed").inc(len(grouped["lose"]))
    reason = None
    if not text.strip():
        reason = "c4_no_lines_left"
    elif c4.enabled:
        text, reason = clean_page(text, c4)
    if reason:
        Metrics.counter(NS, f"dropped_line_dedup_{reason}").inc()
        yield TaggedOutput("dropped", {"id": doc["id"], "url": doc["url"], "source": doc["source"],
                                       "reason": f"line_dedup_{reason}"})
    else:
        yield {**doc, "text": text}


class LineDedup(beam.PTransform):
    """C4 line-level dedup (linededup.py): each repeated line stays on one page of the snapshot."""

    def __init__(self, c4: Any):
        super().__init__()
        self.c4 = c4

    def expand(self, docs):
        lose = (docs | "EmitLines" >> beam.FlatMap(lambda d: [(k, d["id"]) for k in line_keys(d["text"])])
                | "GroupLines" >> beam.GroupByKey() | "Losers" >> beam.FlatMapTuple(losers))
        return ({"doc": docs | "LineDocById" >> beam.Map(lambda d: (d["id"], d)), "lose": lose}
                | "JoinLosers" >> beam.CoGroupByKey()
                | "RemoveLines" >> beam.FlatMap(dedup_lines, self.c4).with_outputs("dropped", main="kept"))


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
    """files -> files written; wires the steps only.

    `index`: the band index plan (pipelines/corpus/index.py) or None. Its committed generations
    are read; the documents kept by this run are written as the plan's new generation.
    """

    def __init__(self, cfg: CorpusConfig, index: Any = None):
        super().__init__()
        self.cfg, self.index = cfg, index

    def expand(self, files):
        cfg, out, plan = self.cfg, self.cfg.output, self.index
        read = files | "Spread" >> beam.Reshuffle() | "ReadFiles" >> beam.ParDo(ReadFiles()).with_outputs("quarantine", "tally", main="docs")
        cleaned = read.docs | "Clean" >> beam.ParDo(Clean(cfg)).with_outputs("dropped", "quarantine", main="kept")
        # Ids must be unique for the joins below; a repeated id keeps its first occurrence (by
        # source file, then offset) and quarantines the others.
        unique = (cleaned.kept | "KeyId" >> beam.Map(lambda d: (d["id"], d)) | "GroupIds" >> beam.GroupByKey()
                  | "UniqueIds" >> beam.FlatMap(first_of_id).with_outputs("quarantine", main="kept"))
        kept = unique.kept
        dup_lists, tallies, dropped = [], [read.tally], [cleaned.dropped]
        index = None
        if plan is not None and plan.read:
            gen_of = {g: plan.generation_number(g) for g in plan.read}
            doc_files = [(f, gen_of[Path(f).parent.parent.name]) for f in plan.doc_files()]
            index = files.pipeline | "ReadIndex" >> ReadIndex(plan.band_files(), doc_files)
        if cfg.exact_dedup:
            by_hash = [kept | "KeyByHash" >> beam.Map(lambda d: (exact_key(d["text"]), ("new", d)))]
            if index is not None:
                by_hash.append(index["exact"] | "TagOld" >> beam.Map(lambda kv: (kv[0], ("old", kv[1]))))
            exact = ((tuple(by_hash) | "AllHashes" >> beam.Flatten() if len(by_hash) > 1 else by_hash[0])
                     | "GroupHash" >> beam.GroupByKey() | "PickExact" >> beam.FlatMap(pick_exact).with_outputs("dups", main="kept"))
            kept = exact.kept
            dup_lists.append(exact.dups)
        index_rows = None
        if cfg.near_dedup:
            from pipelines.corpus.dedup import lsh_params

            bands, rows = lsh_params(cfg.jaccard_threshold, cfg.num_perm)
            near = kept | "NearDedup" >> NearDedup(cfg, bands, rows, index)
            kept, index_rows = near["kept"], near["index_rows"]
            tallies.extend(near["tallies"])
            if cfg.exact_dedup:
                exact_dups = dup_lists.pop()
                exact_dups = ({"exact": exact_dups | "ExactByKept" >> beam.Map(lambda r: (r["kept_id"], r)),
                               "near": near["dups"] | "NearById" >> beam.Map(lambda r: (r["id"], r))}
                              | "JoinChains" >> beam.CoGroupByKey()
                              | "Repoint" >> beam.FlatMap(repoint_exact))
                dup_lists.append(exact_dups)
            dup_lists.append(near["dups"])
        if cfg.line_dedup:
            lines = kept | "LineDedup" >> LineDedup(cfg.c4)
            kept = lines.kept
            dropped.append(lines.dropped)
        if plan is not None and plan.write is not None and index_rows is not None:
            # Only documents that are finally kept enter the index (a join on id).
            final = ({"kept": kept | "KeptIds" >> beam.Map(lambda d: (d["id"], 1)), "row": index_rows}
                     | "JoinIndexRows" >> beam.CoGroupByKey()
                     | "KeptIndexRows" >> beam.FlatMap(lambda kv: kv[1]["row"][:1] if kv[1]["kept"] else []))
            _ = final | "ExtendIndex" >> ExtendIndex(str(plan.generation_dir(plan.write)), cfg.num_shards)

        n = cfg.num_shards
        _ = (kept | "KeyByShard" >> beam.Map(lambda d: ((d["language"], shard_of(d["id"], n)), d))
             | "GroupShards" >> beam.GroupByKey() | "WriteData" >> beam.Map(_write_group, out, "data", n))
        outputs = {"dropped": tuple(dropped),
                   "quarantine": (read.quarantine, cleaned.quarantine, unique.quarantine),
                   "duplicates": tuple(dup_lists)}
        for name, pcolls in outputs.items():
            if not pcolls:
                continue
            merged = pcolls | f"Merge_{name}" >> beam.Flatten() if len(pcolls) > 1 else pcolls[0]
            _ = (merged | f"Key_{name}" >> beam.Map(lambda r: (0, r)) | f"Group_{name}" >> beam.GroupByKey()
                 | f"Write_{name}" >> beam.Map(_write_group, out, name))
        _ = ((tuple(tallies) | "MergeTallies" >> beam.Flatten()) | "SumTally" >> beam.CombinePerKey(sum) | "KeyTally" >> beam.Map(lambda kv: (0, kv))
             | "GroupTally" >> beam.GroupByKey()
             | "WriteTally" >> beam.Map(lambda kv: write_jsonl_rows(Path(out, "_tally.jsonl"), [{"id": k, "n": v} for k, v in kv[1]])))
        return files
