"""The corpus stage on Apache Beam: read -> clean -> exact dedup -> MinHash dedup (beam_dedup.py)
-> C4 line dedup -> write, and extend the band index when one is given.

Run alone:  lmforge corpus --input samples/crawl --output runs/demo/corpus [--runner ...]
Any Beam pipeline option passes through (e.g. --runner FlinkRunner). The DirectRunner runs
in_memory by default: multi_processing lost records in the dedup joins at 100k documents here
and multi_threading after GroupByKey (stage.default_beam_args). On a dask.distributed cluster:
`--runner=DaskRunner --dask_client_address=HOST:PORT [--dask_npartitions=N]`, with absolute paths
(the workers resolve them); the same bytes as the DirectRunner (tests/integration/test_dask_runner.py).

Every record ends in exactly one of data/, dropped/, duplicates/ or quarantine/, and the
driver checks that in = kept + dropped + duplicates + quarantined before writing the manifest.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipelines.beam_tags import MultiOutput
from pipelines.corpus.beam_dedup import ExtendIndex, NearDedup, ReadIndex, sign_records
from pipelines.corpus.clean import DROPPED, KEPT, QUARANTINED, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.dedup import exact_key, quality, quality_of_rank, rank_key, split_band_keys
from pipelines.corpus.filters import clean_page
from pipelines.corpus.linededup import line_keys, losers, remove_lines
from pipelines.corpus.readers import read_file
from pipelines.io import shard_of, write_jsonl_rows, write_parquet_rows
from schemas import storage
from schemas.records import CLEAN_DOC_SCHEMA, DROPPED_SCHEMA, DUPLICATE_SCHEMA, Quarantined

NS = "corpus"


def _quarantine_row(q: Quarantined) -> dict[str, Any]:
    return dataclasses.asdict(q)


class ReadFiles(beam.DoFn):
    """path -> lists of up to `batch_size` RawDocuments of that file (main), quarantine rows,
    ('read', n) and ('skipped:<type>', n) tallies.

    Batches are cut here, within one file, rather than by beam.BatchElements: that emits its last
    batch from finish_bundle, whose outputs Beam's DaskRunner (2.77) drops (test_dask_runner.py,
    test_dask_runner_keeps_finish_bundle_outputs). CleanAndSign signs a batch in one MinHash.bulk call.
    """

    def __init__(self, batch_size: int = 256):
        self.batch_size = batch_size

    def process(self, path: str) -> Iterable[Any]:
        skipped: dict[str, int] = {}
        n, batch = 0, []
        for rec in read_file(path, skipped):
            n += 1
            if isinstance(rec, Quarantined):
                Metrics.counter(NS, f"quarantined_{rec.reason}").inc()
                yield TaggedOutput("quarantine", _quarantine_row(rec))
                continue
            batch.append(rec)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch
        Metrics.counter(NS, "in").inc(n)
        yield TaggedOutput("tally", ("in", n))
        for rtype, c in skipped.items():
            yield TaggedOutput("tally", (f"skipped_record_type:{rtype}", c))


class CleanAndSign(beam.DoFn):
    """A batch of RawDocuments -> kept documents split into what the later steps need:

      main      slim record: id, source, offset, exact_key, rank, quality, language, band keys
                (~0.5 KB; the only thing the id, exact and near dedup steps move)
      "docs"    (id, full record with text): joined back once, at the end
      "info"    (id, (rank, shingle hashes, None, (source, offset))): for near-dup confirmation
      "lines"   (id, ((source, offset), line keys)): for C4 line dedup
      "dropped", "quarantine": as process_document decides

    Text stays out of the dedup shuffles: on the DirectRunner every shuffle is held in memory,
    and at scale each one is bytes over the network.
    """

    def __init__(self, cfg: CorpusConfig, bands: int, rows: int):
        self.cfg, self.bands, self.rows = cfg, bands, rows

    def process(self, batch: list[Any]) -> Iterable[Any]:
        kept = []
        for doc in batch:
            status, value = process_document(doc, self.cfg)
            if status == KEPT:
                kept.append({**value, "offset": doc.offset})
            elif status == DROPPED:
                d, reason = value
                Metrics.counter(NS, f"dropped_{reason}").inc()
                yield TaggedOutput("dropped", {"id": d.id, "url": d.url, "source": d.source, "reason": reason})
            else:
                assert status == QUARANTINED
                Metrics.counter(NS, f"quarantined_{value.reason}").inc()
                yield TaggedOutput("quarantine", _quarantine_row(value))
        signed = sign_records(kept, self.cfg, self.bands, self.rows) if self.cfg.near_dedup and kept else [(None, None)] * len(kept)
        for r, (h, keys) in zip(kept, signed):
            q = quality(r)
            rank = rank_key(r["id"], q, indexed=False)
            where = (r["source"], r["offset"])
            yield {"id": r["id"], "source": r["source"], "offset": r["offset"], "exact_key": exact_key(r["text"]),
                   "rank": rank, "band_keys": b"".join(keys) if keys is not None else None}
            yield TaggedOutput("docs", (r["id"], pack_text(r)))
            if h is not None:
                yield TaggedOutput("info", (r["id"], (rank, h, None, where)))
            if self.cfg.line_dedup:
                yield TaggedOutput("lines", (r["id"], (where, sorted(line_keys(r["text"])))))


def pack_text(rec: dict) -> dict:
    """The text zstd-compressed while it waits for the final join (~2.5x smaller: the
    DirectRunner holds every waiting PCollection in memory, a distributed runner sends it over
    the network)."""
    import zstandard

    out = {k: v for k, v in rec.items() if k != "text"}
    out["ztext"] = zstandard.ZstdCompressor(level=1).compress(rec["text"].encode())
    return out


def unpack_text(rec: dict) -> dict:
    import zstandard

    out = {k: v for k, v in rec.items() if k != "ztext"}
    out["text"] = zstandard.ZstdDecompressor().decompress(rec["ztext"]).decode()
    return out


def first_of_id(item: tuple[str, Iterable[dict]]) -> Iterable[Any]:
    """Records sharing an id: the smallest (source, offset) is kept, the others are quarantined."""
    doc_id, recs = item
    recs = sorted(recs, key=lambda r: (r["source"], r["offset"]))
    yield recs[0]
    for r in recs[1:]:
        Metrics.counter(NS, "quarantined_duplicate_id").inc()
        yield TaggedOutput("quarantine", {"source": r["source"], "offset": r["offset"], "reason": "duplicate_id",
                                          "detail": f"id already used by {recs[0]['source']} at {recs[0]['offset']}", "id": doc_id})


def pick_exact(item: tuple[str, Iterable[tuple[str, dict]]]) -> Iterable[Any]:
    """One normalised-text hash -> the record kept and the exact duplicates removed.

    Members are ("new", slim record) from this snapshot or ("old", entry) from the band index;
    a published (indexed) document wins, else the best rank (dedup.rank_key: quality, then id).
    """
    _, members = item
    new = sorted((r for tag, r in members if tag == "new"), key=lambda r: tuple(r["rank"]))
    old = sorted((e for tag, e in members if tag == "old"), key=lambda e: tuple(e["rank"]))
    if old:
        kept_id, gen, removed = old[0]["id"], old[0]["generation"], new
    elif new:
        kept_id, gen, removed = new[0]["id"], None, new[1:]
        yield new[0]
    else:
        return
    for r in removed:
        Metrics.counter(NS, "duplicates_exact").inc()
        yield TaggedOutput("dups", {"id": r["id"], "cluster_id": kept_id, "kept_id": kept_id, "kind": "exact",
                                   "similarity": 1.0, "kept_generation": gen})


def repoint_exact(item: tuple[str, dict[str, list]]) -> Iterable[dict[str, Any]]:
    """An exact group's representative can itself be removed as a near-duplicate: point its
    exact copies at the near cluster's representative, so every kept_id names a kept document."""
    _, grouped = item
    near = grouped["near"][0] if grouped["near"] else None
    for row in grouped["exact"]:
        yield ({**row, "cluster_id": near["cluster_id"], "kept_id": near["kept_id"], "kept_generation": near["kept_generation"]}
               if near and row["kept_generation"] is None else row)


def line_losers(item: tuple[str, dict[str, list]]) -> Iterable[tuple[bytes, str]]:
    """(line key, id) for every line of a finally kept record (C4 line dedup sees survivors only)."""
    doc_id, grouped = item
    if not grouped["keep"]:
        return
    where = grouped["keep"][0]
    for w, keys in grouped["lines"]:
        if w == where:
            for k in keys:
                yield k, doc_id


def assemble(item: tuple[str, dict[str, list]], c4: Any) -> Iterable[Any]:
    """The one join that brings text back: a kept record's document, minus the lines another
    page owns (C4 line dedup), or a drop if too little is left."""
    _, grouped = item
    if not grouped["keep"]:
        return  # removed as a duplicate, or a repeated id: already accounted for
    where = grouped["keep"][0]
    doc = next(d for d in grouped["doc"] if (d["source"], d["offset"]) == where)
    doc = {k: v for k, v in doc.items() if k != "offset"}
    lose = set(grouped.get("lose", ()))
    if not lose:
        yield doc
        return
    doc = unpack_text(doc)
    text = remove_lines(doc["text"], lose)
    Metrics.counter(NS, "line_dedup_lines_removed").inc(len(lose))
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
        yield pack_text({**doc, "text": text})


def index_row(item: tuple[str, dict[str, list]]) -> Iterable[dict]:
    """A finally kept record and its shingle hashes -> its row in the band index."""
    _, grouped = item
    if not grouped["keep"]:
        return
    r = grouped["keep"][0]
    h = next(h for _, h, _, w in grouped["info"] if w == (r["source"], r["offset"]))
    yield {"id": r["id"], "exact_key": r["exact_key"], "quality": quality_of_rank(r["rank"]), "hashes": h,
           "band_keys": split_band_keys(r["band_keys"])}


def _write_group(item: tuple[Any, Iterable[dict]], out: str, kind: str, num_shards: int = 1) -> str:
    key, rows = item
    rows = list(rows)
    if kind == "data":
        lang, shard = key
        rows = [unpack_text(r) for r in rows]
        return write_parquet_rows(storage.join(out, "data", lang, f"part-{shard:05d}-of-{num_shards:05d}.parquet"), rows, CLEAN_DOC_SCHEMA)
    part = f"part-{key:05d}-of-{num_shards:05d}"
    if kind == "duplicates":
        return write_parquet_rows(storage.join(out, "duplicates", part + ".parquet"), rows, DUPLICATE_SCHEMA)
    if kind == "dropped":
        return write_parquet_rows(storage.join(out, "dropped", part + ".parquet"), rows, DROPPED_SCHEMA)
    return write_jsonl_rows(storage.join(out, "quarantine", part + ".jsonl"), rows)


def side_shard(row: dict[str, Any], kind: str, num_shards: int) -> tuple[int, dict[str, Any]]:
    """Dropped, duplicate and quarantined rows are sharded like the documents (by id; a quarantined
    record by where it was read, as a whole-file failure has no id), so no one worker holds them all."""
    key = f"{row.get('source')}:{row.get('offset')}" if kind == "quarantine" else row["id"]
    return shard_of(key, num_shards), row


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
        from pipelines.corpus.dedup import lsh_params

        bands, rows = lsh_params(cfg.jaccard_threshold, cfg.num_perm)
        # MultiOutput, not ParDo(...).with_outputs(...): Beam's DaskRunner mixes the tags (beam_tags.py).
        read = files | "Spread" >> beam.Reshuffle() | "ReadFiles" >> MultiOutput(ReadFiles(), main="docs", tags=("quarantine", "tally"))
        cleaned = (read.docs | "CleanAndSign" >> MultiOutput(CleanAndSign(cfg, bands, rows), main="slim",
                                                             tags=("dropped", "quarantine", "docs", "info", "lines")))
        # Ids must be unique for the joins below; a repeated id keeps its first occurrence (by
        # source file, then offset) and quarantines the others.
        unique = (cleaned.slim | "KeyId" >> beam.Map(lambda r: (r["id"], r)) | "GroupIds" >> beam.GroupByKey()
                  | "UniqueIds" >> MultiOutput(first_of_id, main="kept", tags=("quarantine",)))
        kept = unique.kept
        dup_lists, tallies, dropped = [], [read.tally], [cleaned.dropped]
        index = None
        if plan is not None and plan.read:
            index = kept | "ReadIndex" >> ReadIndex(plan.band_files(), plan.doc_files())
        if cfg.exact_dedup:
            by_hash = [kept | "KeyByHash" >> beam.Map(lambda r: (r["exact_key"], ("new", r)))]
            if index is not None:
                by_hash.append(index["exact"] | "TagOld" >> beam.Map(lambda kv: (kv[0], ("old", kv[1]))))
            exact = ((tuple(by_hash) | "AllHashes" >> beam.Flatten() if len(by_hash) > 1 else by_hash[0])
                     | "GroupHash" >> beam.GroupByKey() | "PickExact" >> MultiOutput(pick_exact, main="kept", tags=("dups",)))
            kept = exact.kept
            dup_lists.append(exact.dups)
        if cfg.near_dedup:
            near = kept | "NearDedup" >> NearDedup(cfg, cleaned.info, index)
            kept = near["kept"]
            tallies.extend(near["tallies"])
            if cfg.exact_dedup:
                # An exact group's representative can itself be a near-duplicate: point its
                # exact copies at the near cluster's representative, so every kept_id is kept.
                exact_dups = dup_lists.pop()
                exact_dups = ({"exact": exact_dups | "ExactByKept" >> beam.Map(lambda r: (r["kept_id"], r)),
                               "near": near["dups"] | "NearById" >> beam.Map(lambda r: (r["id"], r))}
                              | "JoinChains" >> beam.CoGroupByKey()
                              | "Repoint" >> beam.FlatMap(repoint_exact))
                dup_lists.append(exact_dups)
            dup_lists.append(near["dups"])
        keep = kept | "KeepById" >> beam.Map(lambda r: (r["id"], (r["source"], r["offset"])))
        parts = {"doc": cleaned.docs, "keep": keep}
        if cfg.line_dedup:
            # C4 line dedup: each line repeated across the kept pages stays on one of them.
            parts["lose"] = ({"keep": keep, "lines": cleaned.lines} | "JoinLines" >> beam.CoGroupByKey()
                             | "EmitLines" >> beam.FlatMap(line_losers) | "GroupLines" >> beam.GroupByKey()
                             | "Losers" >> beam.FlatMapTuple(losers))
        final = (parts | "JoinText" >> beam.CoGroupByKey()
                 | "Assemble" >> MultiOutput(assemble, cfg.c4, main="kept", tags=("dropped",)))
        dropped.append(final.dropped)
        written = []  # every write step's paths, flattened into the one output below
        if plan is not None and plan.write is not None and cfg.near_dedup:
            # Only documents that are finally kept enter the index.
            final_ids = final.kept | "FinalIds" >> beam.Map(lambda d: (d["id"], 1))
            rows_in = ({"keep": kept | "KeptSlimById" >> beam.Map(lambda r: (r["id"], r)), "info": cleaned.info,
                        "final": final_ids}
                       | "JoinIndexRows" >> beam.CoGroupByKey()
                       | "KeptIndexRows" >> beam.FlatMap(lambda kv: index_row(kv) if kv[1]["final"] else []))
            written.append(rows_in | "ExtendIndex" >> ExtendIndex(str(plan.generation_dir(plan.write)), cfg.num_shards))

        n = cfg.num_shards
        written.append(final.kept | "KeyByShard" >> beam.Map(lambda d: ((d["language"], shard_of(d["id"], n)), d))
                       | "GroupShards" >> beam.GroupByKey() | "WriteData" >> beam.Map(_write_group, out, "data", n))
        outputs = {"dropped": tuple(dropped),
                   "quarantine": (read.quarantine, cleaned.quarantine, unique.quarantine),
                   "duplicates": tuple(dup_lists)}
        for name, pcolls in outputs.items():
            if not pcolls:
                continue
            merged = pcolls | f"Merge_{name}" >> beam.Flatten() if len(pcolls) > 1 else pcolls[0]
            written.append(merged | f"Key_{name}" >> beam.Map(side_shard, name, n) | f"Group_{name}" >> beam.GroupByKey()
                           | f"Write_{name}" >> beam.Map(_write_group, out, name, n))
        written.append((tuple(tallies) | "MergeTallies" >> beam.Flatten()) | "SumTally" >> beam.CombinePerKey(sum) | "KeyTally" >> beam.Map(lambda kv: (0, kv))
             | "GroupTally" >> beam.GroupByKey()
             | "WriteTally" >> beam.Map(lambda kv: write_jsonl_rows(storage.join(out, "_tally.jsonl"), [{"id": k, "n": v} for k, v in kv[1]])))
        # One output that every write feeds: Beam's DaskRunner (2.77) computes only the step
        # applied last, so a write on a branch of its own would never run there
        # (test_dask_runner.py, test_dask_runner_runs_every_branch).
        return tuple(written) | "Written" >> beam.Flatten()
