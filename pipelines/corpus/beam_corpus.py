"""The corpus stage on Apache Beam: read -> clean -> exact dedup -> MinHash dedup (beam_dedup.py)
-> C4 line dedup -> write, and extend the band index when one is given.

Run alone:  lmforge corpus --input samples/crawl --output runs/demo/corpus [--runner ...]
Any Beam pipeline option passes through (e.g. --runner FlinkRunner). The DirectRunner runs in_memory
for small inputs and multi_processing with a worker per core above 16 MB (stage.auto_mode; never
multi_threading, which lost records after GroupByKey: stage.default_beam_args). On a dask.distributed cluster:
`--runner=DaskRunner --dask_client_address=HOST:PORT [--dask_npartitions=N]`, with absolute paths
(the workers resolve them); the same bytes as the DirectRunner (tests/integration/test_dask_runner.py).

Every record ends in exactly one of data/, dropped/, duplicates/ or quarantine/, and the
driver checks that in = kept + dropped + duplicates + quarantined before writing the manifest.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
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
from pipelines.corpus.linededup import line_keys, losers, remove_lines
from pipelines.corpus.readers import MAX_RECORD_BYTES, MAX_ROW_GROUP_BYTES, read_file
from pipelines.corpus.staging import staged_name, staged_rows, where, write_staged
from pipelines.corpus.steps.c4 import clean_page
from pipelines.corpus.steps.language import language_verdicts
from pipelines.io import shard_of, write_jsonl_rows, write_parquet_rows
from schemas import storage
from schemas.records import CLEAN_DOC_SCHEMA, DROPPED_SCHEMA, DUPLICATE_SCHEMA, Quarantined

NS = "corpus"


def _quarantine_row(q: Quarantined) -> dict[str, Any]:
    return dataclasses.asdict(q)


class ReadFiles(beam.DoFn):
    """path -> (path, batch number, up to `batch_size` RawDocuments of that file) (main),
    quarantine rows, ('read', n) and ('skipped:<type>', n) tallies.

    Batches are cut here, within one file, rather than by beam.BatchElements: that emits its last
    batch from finish_bundle, whose outputs Beam's DaskRunner (2.77) drops (test_dask_runner.py,
    test_dask_runner_keeps_finish_bundle_outputs). CleanAndSign signs a batch in one MinHash.bulk call.
    """

    def __init__(self, batch_size: int = 256, max_record_bytes: int = MAX_RECORD_BYTES,
                 max_row_group_bytes: int = MAX_ROW_GROUP_BYTES):
        self.batch_size, self.max_record_bytes, self.max_row_group_bytes = batch_size, max_record_bytes, max_row_group_bytes

    def process(self, path: str) -> Iterable[Any]:
        skipped: dict[str, int] = {}
        n, batch, numbered = 0, [], 0
        for rec in read_file(path, skipped, self.max_record_bytes, self.max_row_group_bytes):
            n += 1
            if isinstance(rec, Quarantined):
                Metrics.counter(NS, f"quarantined_{rec.reason}").inc()
                yield TaggedOutput("quarantine", _quarantine_row(rec))
                continue
            batch.append(rec)
            if len(batch) == self.batch_size:
                yield path, numbered, batch
                batch, numbered = [], numbered + 1
        if batch:
            yield path, numbered, batch
        Metrics.counter(NS, "in").inc(n)
        yield TaggedOutput("tally", ("in", n))
        for rtype, c in skipped.items():
            yield TaggedOutput("tally", (f"skipped_record_type:{rtype}", c))


class CleanAndSign(beam.DoFn):
    """(source, batch number, RawDocuments) -> the batch's kept documents staged to one file
    (staging.py: text, metadata, exact shingle hashes), and what the later steps move:

      main      slim record: id, url, source, offset, exact_key, rank, language, band keys, staged
                (the staged file's name); the only thing the id, exact and near dedup steps and
                the final routing to shards move
      "lines"   (id, ((source, offset), line keys)): for C4 line dedup
      "dropped", "quarantine": as process_document decides

    Text stays out of every shuffle, hashes out of all but the near-dedup joins of candidate
    nodes: on the DirectRunner each shuffle is held in
    memory until the pipeline ends, and at scale each one is bytes over the network.
    """

    def __init__(self, cfg: CorpusConfig, bands: int, rows: int):
        self.cfg, self.bands, self.rows = cfg, bands, rows

    def process(self, item: tuple[str, int, list[Any]]) -> Iterable[Any]:
        source, batch_no, batch = item
        kept, noted = [], Counter()
        for doc in batch:
            status, value = process_document(doc, self.cfg)
            if status == KEPT:
                for note in value.pop("notes"):
                    noted[note.kind] += note.count
                    if note.detail:
                        yield TaggedOutput("matches", {"id": doc.id, "url": doc.url, "source": doc.source, "kind": note.kind,
                                                       "action": "kept", "detail": note.detail})
                kept.append({**value, "offset": doc.offset})
            elif status == DROPPED:
                d, reason, language = value
                detail = getattr(reason, "detail", None)
                Metrics.counter(NS, f"dropped_{reason}").inc()
                yield TaggedOutput("dropped", {"id": d.id, "url": d.url, "source": d.source, "reason": str(reason), "detail": detail,
                                               "language": language})
            else:
                assert status == QUARANTINED
                Metrics.counter(NS, f"quarantined_{value.reason}").inc()
                yield TaggedOutput("quarantine", _quarantine_row(value))
        for kind, n in sorted(noted.items()):  # counted as cleaned, before dedup removes any of these pages
            Metrics.counter(NS, f"noted_{kind}").inc(n)
            yield TaggedOutput("tally", (f"noted:{kind}", n))
        if not kept:
            return
        signed = sign_records(kept, self.cfg, self.bands, self.rows) if self.cfg.near_dedup else [(None, None)] * len(kept)
        name = staged_name(source, batch_no)
        n = self.cfg.num_shards
        write_staged(self.cfg.output, name, [{**r, "shard": shard_of(r["id"], n), "hashes": h} for r, (h, _) in zip(kept, signed)])
        for r, (_, keys) in zip(kept, signed):
            yield {"id": r["id"], "url": r["url"], "source": r["source"], "offset": r["offset"], "exact_key": exact_key(r["text"]),
                   "rank": rank_key(r["id"], quality(r), indexed=False), "language": r["language"],
                   "band_keys": b"".join(keys) if keys is not None else None, "staged": name}
            if self.cfg.line_dedup:
                yield TaggedOutput("lines", (r["id"], (where(r), sorted(line_keys(r["text"])))))


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
    at = grouped["keep"][0]
    for w, keys in grouped["lines"]:
        if w == at:
            for k in keys:
                yield k, doc_id


def route_kept(item: tuple[str, dict[str, list]], num_shards: int) -> Iterable[tuple[tuple[str, int], dict]]:
    """A kept slim record (and the lines another page owns, with C4 line dedup) -> its output
    shard (language, shard_of(id)) and what the writer needs to find it in its staged file."""
    doc_id, grouped = item
    if not grouped["keep"]:
        return
    r = grouped["keep"][0]
    yield (r["language"], shard_of(doc_id, num_shards)), {"id": doc_id, "source": r["source"], "offset": r["offset"],
                                                          "staged": r["staged"], "lose": sorted(grouped.get("lose", ()))}


def finish_doc(doc: dict[str, Any], lose: Iterable[bytes], c4: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A kept document minus the lines another page owns (C4 line dedup) -> (document, None), or
    (None, dropped row) if too little is left."""
    lose = set(lose)
    if not lose:
        return doc, None
    text = remove_lines(doc["text"], lose)
    Metrics.counter(NS, "line_dedup_lines_removed").inc(len(lose))
    reason = None
    if not text.strip():
        reason = "c4_no_lines_left"
    elif c4.enabled:
        text, reason = clean_page(text, c4)
    if reason:
        Metrics.counter(NS, f"dropped_line_dedup_{reason}").inc()
        return None, {"id": doc["id"], "url": doc["url"], "source": doc["source"], "reason": f"line_dedup_{reason}",
                      "language": doc["language"]}
    return {**doc, "text": text}, None


DOC_FIELDS = tuple(CLEAN_DOC_SCHEMA.names)


def write_data(item: tuple[tuple[str, int], Iterable[dict]], out: str, num_shards: int, c4: Any) -> Iterable[Any]:
    """One output shard's kept records -> its Parquet file (main: the path), its documents read from
    the shard's row group of each staged file they came from; "dropped": pages C4 line dedup left
    too short; "final": the id of every document written (the index takes only those)."""
    (lang, shard), refs = item
    rows = []
    for ref, doc in staged_rows(out, refs, shard, list(DOC_FIELDS)):
        doc, dropped = finish_doc({k: doc[k] for k in DOC_FIELDS}, ref["lose"], c4)
        if dropped is not None:
            yield TaggedOutput("dropped", dropped)
        else:
            rows.append(doc)
            yield TaggedOutput("final", doc["id"])
    if rows:  # a shard whose every page line dedup dropped has no file, as before staging
        yield write_parquet_rows(storage.join(out, "data", lang, f"part-{shard:05d}-of-{num_shards:05d}.parquet"), rows, CLEAN_DOC_SCHEMA)


def index_row(item: tuple[str, dict[str, list]]) -> Iterable[dict]:
    """A finally kept record -> its row in the band index, less its shingle hashes (the index
    writer reads those from the staged file)."""
    _, grouped = item
    if not grouped["keep"] or not grouped["final"]:
        return
    r = grouped["keep"][0]
    yield {"id": r["id"], "exact_key": r["exact_key"], "quality": quality_of_rank(r["rank"]),
           "band_keys": split_band_keys(r["band_keys"]), "source": r["source"], "offset": r["offset"], "staged": r["staged"]}


def _write_group(item: tuple[Any, Iterable[dict]], out: str, kind: str, num_shards: int = 1) -> str:
    key, rows = item
    rows = list(rows)
    part = f"part-{key:05d}-of-{num_shards:05d}"
    if kind == "duplicates":
        return write_parquet_rows(storage.join(out, "duplicates", part + ".parquet"), rows, DUPLICATE_SCHEMA)
    if kind == "dropped":
        return write_parquet_rows(storage.join(out, "dropped", part + ".parquet"), rows, DROPPED_SCHEMA)
    if kind == "matches":
        return write_jsonl_rows(storage.join(out, "matches", part + ".jsonl"), rows)
    return write_jsonl_rows(storage.join(out, "quarantine", part + ".jsonl"), rows)


def side_shard(row: dict[str, Any], kind: str, num_shards: int) -> tuple[int, dict[str, Any]]:
    """Dropped, duplicate and quarantined rows are sharded like the documents (by id; a quarantined
    record by where it was read, as a whole-file failure has no id), so no one worker holds them all."""
    key = f"{row.get('source')}:{row.get('offset')}" if kind == "quarantine" else row["id"]
    return shard_of(key, num_shards), row


LANGUAGE_SHARDS = 16
"""Parts each language's documents are split into to meet its verdict (ChooseLanguages): no one worker holds a whole
language's records."""


def _verdicts(item: tuple[int, Iterable[tuple[str, int]]], share: float, documents: int, parts: int) -> Iterable[Any]:
    verdicts = language_verdicts(dict(item[1]), share, documents)
    for lang, why in verdicts.items():
        for part in range(parts):
            yield (lang, part), why


def _meet_verdict(item: tuple[tuple[str, int], dict[str, list]]) -> Iterable[Any]:
    (lang, _), grouped = item
    why = grouped["verdict"][0] if grouped["verdict"] else "auto: no count reached this language"
    for r in grouped["doc"]:
        if why is None:
            yield r
        else:
            Metrics.counter(NS, "dropped_language_not_kept").inc()
            yield TaggedOutput("dropped", {"id": r["id"], "url": r["url"], "source": r["source"], "reason": "language_not_kept",
                                           "detail": why, "language": lang})


class ChooseLanguages(beam.PTransform):
    """Slim records of every language -> {"kept": those of the languages kept (language_verdicts), "dropped": rows of
    the others (language_not_kept, the count in `detail`), "tally": ("cleaned_language:<code>", n) per language}.

    The counts meet the records by a join on (language, part), not a side input (which lost records in
    multi_processing here: beam_dedup.NearDedup)."""

    def __init__(self, share: float, documents: int, parts: int = LANGUAGE_SHARDS):
        super().__init__()
        self.share, self.documents, self.parts = share, documents, parts

    def expand(self, slim):
        parts = self.parts
        counts = slim | "LanguageOf" >> beam.Map(lambda r: (r["language"], 1)) | "CountLanguages" >> beam.CombinePerKey(sum)
        verdicts = (counts | "OneKey" >> beam.Map(lambda kv: (0, kv)) | "AllLanguages" >> beam.GroupByKey()
                    | "Verdicts" >> beam.FlatMap(_verdicts, self.share, self.documents, parts))
        keyed = slim | "ByLanguagePart" >> beam.Map(lambda r: ((r["language"], shard_of(r["id"], parts)), r))
        met = ({"doc": keyed, "verdict": verdicts} | "JoinVerdicts" >> beam.CoGroupByKey()
               | "MeetVerdicts" >> MultiOutput(_meet_verdict, main="kept", tags=("dropped",)))
        tally = counts | "LanguageTally" >> beam.Map(lambda kv: (f"cleaned_language:{kv[0]}", kv[1]))
        return {"kept": met.kept, "dropped": met.dropped, "tally": tally}


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
        reader = ReadFiles(max_record_bytes=cfg.max_record_bytes, max_row_group_bytes=cfg.max_row_group_bytes)
        read = files | "Spread" >> beam.Reshuffle() | "ReadFiles" >> MultiOutput(reader, main="docs", tags=("quarantine", "tally"))
        cleaned = (read.docs | "CleanAndSign" >> MultiOutput(CleanAndSign(cfg, bands, rows), main="slim",
                                                             tags=("dropped", "quarantine", "lines", "tally", "matches")))
        # Ids must be unique for the joins below; a repeated id keeps its first occurrence (by
        # source file, then offset) and quarantines the others.
        unique = (cleaned.slim | "KeyId" >> beam.Map(lambda r: (r["id"], r)) | "GroupIds" >> beam.GroupByKey()
                  | "UniqueIds" >> MultiOutput(first_of_id, main="kept", tags=("quarantine",)))
        kept = unique.kept
        dup_lists, tallies, dropped = [], [read.tally, cleaned.tally], [cleaned.dropped]
        if cfg.auto_languages:  # the languages the crawl has enough of, before dedup compares documents
            chosen = kept | "ChooseLanguages" >> ChooseLanguages(cfg.auto_language_share, cfg.auto_language_documents)
            kept = chosen["kept"]
            dropped.append(chosen["dropped"])
            tallies.append(chosen["tally"])
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
            near = kept | "NearDedup" >> NearDedup(cfg, index)
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
        n = cfg.num_shards
        kept_by_id = kept | "KeptById" >> beam.Map(lambda r: (r["id"], r))
        if cfg.line_dedup:
            # C4 line dedup: each line repeated across the kept pages stays on one of them.
            keep_at = kept | "KeepAtById" >> beam.Map(lambda r: (r["id"], (r["source"], r["offset"])))
            lose = ({"keep": keep_at, "lines": cleaned.lines} | "JoinLines" >> beam.CoGroupByKey()
                    | "EmitLines" >> beam.FlatMap(line_losers) | "GroupLines" >> beam.GroupByKey()
                    | "Losers" >> beam.FlatMapTuple(losers))
            routed = {"keep": kept_by_id, "lose": lose} | "JoinLosers" >> beam.CoGroupByKey()
        else:
            routed = kept_by_id | "AsGroups" >> beam.Map(lambda kv: (kv[0], {"keep": [kv[1]]}))
        # Text comes back only here: each shard's writer reads its documents from the staged files.
        data = (routed | "KeyByShard" >> beam.FlatMap(route_kept, n) | "GroupShards" >> beam.GroupByKey()
                | "WriteData" >> MultiOutput(write_data, out, n, cfg.c4, main="written", tags=("dropped", "final")))
        dropped.append(data.dropped)
        written = [data.written]  # every write step's paths, flattened into the one output below
        if plan is not None and plan.write is not None and cfg.near_dedup:
            # Only documents that are finally kept (written) enter the index.
            rows_in = ({"keep": kept_by_id, "final": data.final | "FinalIds" >> beam.Map(lambda i: (i, 1))}
                       | "JoinIndexRows" >> beam.CoGroupByKey() | "KeptIndexRows" >> beam.FlatMap(index_row))
            written.append(rows_in | "ExtendIndex" >> ExtendIndex(str(plan.generation_dir(plan.write)), n, out))
        outputs = {"dropped": tuple(dropped),
                   "quarantine": (read.quarantine, cleaned.quarantine, unique.quarantine),
                   "duplicates": tuple(dup_lists),
                   "matches": (cleaned.matches,)}
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
