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
from pipelines.corpus.dedup import (
    CANDIDATE_MARGIN,
    anchor_links,
    band_keys,
    estimated_jaccard,
    exact_jaccard,
    exact_key,
    shingle_hashes,
    signatures_from_hashes,
)
from pipelines.corpus.graph import both_directions, large_star, small_star, toward_larger
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


def pick_exact(item: tuple[str, Iterable[dict]]) -> Iterable[Any]:
    """Keep the smallest id among identical normalised texts."""
    _, docs = item
    docs = sorted(docs, key=lambda d: d["id"])
    yield docs[0]
    for d in docs[1:]:
        Metrics.counter(NS, "duplicates_exact").inc()
        yield TaggedOutput("dups", {"id": d["id"], "cluster_id": docs[0]["id"], "kept_id": docs[0]["id"],
                                   "kind": "exact", "similarity": 1.0})


class Sign(beam.DoFn):
    """A batch of documents -> (id, (document, signature)) using datasketch's batched MinHash.bulk,
    and (id, exact shingle hashes) under the tag "hashes" for confirming candidate pairs."""

    def __init__(self, num_perm: int, shingle_words: int, shingle_chars: int = 5, char_languages: tuple[str, ...] = ()):
        self.num_perm, self.shingle_words = num_perm, shingle_words
        self.shingle_chars, self.char_languages = shingle_chars, frozenset(char_languages)

    def process(self, batch: list[dict]) -> Iterable[Any]:
        hashes = [shingle_hashes(d["text"], self.shingle_chars, "char") if d.get("language") in self.char_languages
                  else shingle_hashes(d["text"], self.shingle_words) for d in batch]
        sigs = signatures_from_hashes(hashes, self.num_perm)
        for d, s, h in zip(batch, sigs, hashes):
            yield d["id"], (d, s)
            yield TaggedOutput("hashes", (d["id"], h))


def verify_bucket(item: tuple[bytes, Iterable[tuple[str, np.ndarray]]], threshold: float) -> Iterable[tuple[str, str]]:
    """One LSH bucket -> candidate edges (member, anchor) whose signatures agree on >= threshold."""
    _, members = item
    yield from anchor_links(list(members), threshold)


def attach_hashes(item: tuple[str, dict[str, list]]) -> Iterable[tuple[str, tuple[str, np.ndarray]]]:
    """(u, {edge: [anchors], h: [u's hashes]}) -> (anchor, (u, u's hashes)) per candidate edge."""
    u, grouped = item
    if grouped["h"]:
        for anchor in grouped["edge"]:
            yield anchor, (u, grouped["h"][0])


def confirm_exact(item: tuple[str, dict[str, list]], threshold: float) -> Iterable[tuple[str, str]]:
    """Keep candidate edges whose exact shingle Jaccard reaches the threshold."""
    anchor, grouped = item
    if not grouped["h"]:
        return
    h_anchor = grouped["h"][0]
    for u, h_u in grouped["edge"]:
        if exact_jaccard(h_u, h_anchor) >= threshold:
            Metrics.counter(NS, "near_pairs_confirmed").inc()
            yield u, anchor
        else:
            Metrics.counter(NS, "near_pairs_rejected_exact").inc()


class ConnectedComponents(beam.PTransform):
    """Edges (u, v) -> (node, root) for every non-root node; root = smallest id of the component.

    `rounds` large-star + small-star rounds, each two GroupByKeys (see pipelines/corpus/graph.py).
    Also returns, under the tag "unconverged", one element per node whose state is not yet a
    star after the last round (it has more than one parent, or it is a parent and a child).
    """

    def __init__(self, rounds: int):
        super().__init__()
        self.rounds = rounds

    def expand(self, edges):
        for i in range(self.rounds):
            edges = (edges
                     | f"LargeStarKey{i}" >> beam.FlatMap(both_directions)
                     | f"LargeStarGroup{i}" >> beam.GroupByKey()
                     | f"LargeStar{i}" >> beam.FlatMapTuple(large_star)
                     | f"SmallStarKey{i}" >> beam.Map(toward_larger)
                     | f"SmallStarGroup{i}" >> beam.GroupByKey()
                     | f"SmallStar{i}" >> beam.FlatMapTuple(small_star)
                     | f"Distinct{i}" >> beam.Distinct())
        roles = ((edges | "AsChild" >> beam.Map(lambda e: (e[0], ("child", e[1]))),
                  edges | "AsParent" >> beam.Map(lambda e: (e[1], ("parent", e[0]))))
                 | "Roles" >> beam.Flatten() | "GroupRoles" >> beam.GroupByKey())
        return roles | "Label" >> beam.FlatMap(_label).with_outputs("unconverged", main="labels")


def _label(item: tuple[str, Iterable[tuple[str, str]]]) -> Iterable[Any]:
    node, roles = item
    parents = sorted({other for role, other in roles if role == "child"})
    is_parent = any(role == "parent" for role, _ in roles)
    if parents and (len(parents) > 1 or is_parent):
        yield TaggedOutput("unconverged", node)
    if parents:
        yield node, parents[0]


def split_near(item: tuple[str, dict[str, list]]) -> Iterable[Any]:
    """A document with a root is a near-duplicate (sent on with its signature); others are kept."""
    doc_id, grouped = item
    signed, roots = grouped["signed"], grouped["root"]
    if not signed:
        return
    doc, sig = signed[0]
    if roots:
        yield TaggedOutput("pending", (roots[0], (doc_id, sig)))
    else:
        yield doc


def repoint_exact(item: tuple[str, dict[str, list]]) -> Iterable[dict[str, Any]]:
    _, grouped = item
    near = grouped["near"][0] if grouped["near"] else None
    for row in grouped["exact"]:
        yield {**row, "cluster_id": near["cluster_id"], "kept_id": near["kept_id"]} if near else row


def near_rows(item: tuple[str, dict[str, list]]) -> Iterable[dict[str, Any]]:
    """Duplicates of one root, with their estimated Jaccard similarity to it."""
    root, grouped = item
    root_sig = grouped["sig"][0] if grouped["sig"] else None
    for doc_id, sig in grouped["member"]:
        Metrics.counter(NS, "duplicates_near").inc()
        sim = estimated_jaccard(root_sig, sig) if root_sig is not None else None
        yield {"id": doc_id, "cluster_id": root, "kept_id": root, "kind": "near", "similarity": sim}


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
        # Ids must be unique for the joins below; a repeated id keeps its first occurrence (by
        # source file, then offset) and quarantines the others.
        unique = (cleaned.kept | "KeyId" >> beam.Map(lambda d: (d["id"], d)) | "GroupIds" >> beam.GroupByKey()
                  | "UniqueIds" >> beam.FlatMap(first_of_id).with_outputs("quarantine", main="kept"))
        kept = unique.kept
        dup_lists = []
        tallies = [read.tally]
        if cfg.exact_dedup:
            exact = (kept | "KeyByHash" >> beam.Map(lambda d: (exact_key(d["text"]), d))
                     | "GroupHash" >> beam.GroupByKey() | "PickExact" >> beam.FlatMap(pick_exact).with_outputs("dups", main="kept"))
            kept = exact.kept
            dup_lists.append(exact.dups)
        if cfg.near_dedup:
            from pipelines.corpus.dedup import lsh_params

            bands, rows = lsh_params(cfg.jaccard_threshold, cfg.num_perm)
            signed = (kept | "Batch" >> beam.BatchElements(min_batch_size=32, max_batch_size=256)
                      | "Sign" >> beam.ParDo(Sign(cfg.num_perm, cfg.shingle_words, cfg.shingle_chars,
                                                               tuple(cfg.char_shingle_languages))).with_outputs("hashes", main="signed"))
            hashes, signed = signed.hashes, signed.signed
            sigs = signed | "SigOnly" >> beam.Map(lambda kv: (kv[0], kv[1][1]))
            candidates = (sigs
                          | "Bands" >> beam.FlatMap(lambda kv: [(k, kv) for k in band_keys(kv[1], bands, rows)])
                          | "GroupBands" >> beam.GroupByKey()
                          | "Screen" >> beam.FlatMap(verify_bucket, cfg.jaccard_threshold - CANDIDATE_MARGIN)
                          | "DistinctCandidates" >> beam.Distinct())
            # Two joins bring both ends' exact shingle hashes to each candidate edge; only
            # candidate pairs move hash sets, never all documents times all bands.
            edges = (({"edge": candidates, "h": hashes} | "JoinFirstEnd" >> beam.CoGroupByKey()
                      | "AttachFirst" >> beam.FlatMap(attach_hashes)),
                     hashes)
            edges = ({"edge": edges[0], "h": edges[1]} | "JoinSecondEnd" >> beam.CoGroupByKey()
                     | "ConfirmExact" >> beam.FlatMap(confirm_exact, cfg.jaccard_threshold))
            cc = edges | "Components" >> ConnectedComponents(cfg.cc_rounds)
            tallies.append(cc.unconverged | "CountUnconverged" >> beam.combiners.Count.Globally()
                           | "TallyUnconverged" >> beam.Map(lambda n: ("cc_unconverged_nodes", n)))
            near = ({"signed": signed, "root": cc.labels}
                    | "JoinRoots" >> beam.CoGroupByKey()
                    | "SplitNear" >> beam.FlatMap(split_near).with_outputs("pending", main="kept"))
            near_dups = ({"member": near.pending, "sig": sigs}
                         | "JoinRootSigs" >> beam.CoGroupByKey()
                         | "NearRows" >> beam.FlatMap(near_rows))
            kept = near.kept
            if cfg.exact_dedup:
                # An exact group's representative can itself be a near-duplicate: point its
                # exact copies at the near cluster's root, so every kept_id is a kept document.
                exact_dups = dup_lists.pop()
                exact_dups = ({"exact": exact_dups | "ExactByKept" >> beam.Map(lambda r: (r["kept_id"], r)),
                               "near": near_dups | "NearById" >> beam.Map(lambda r: (r["id"], r))}
                              | "JoinChains" >> beam.CoGroupByKey()
                              | "Repoint" >> beam.FlatMap(repoint_exact))
                dup_lists.append(exact_dups)
            dup_lists.append(near_dups)

        n = cfg.num_shards
        _ = (kept | "KeyByShard" >> beam.Map(lambda d: ((d["language"], shard_of(d["id"], n)), d))
             | "GroupShards" >> beam.GroupByKey() | "WriteData" >> beam.Map(_write_group, out, "data", n))
        outputs = {"dropped": cleaned.dropped,
                   "quarantine": (read.quarantine, cleaned.quarantine, unique.quarantine),
                   "duplicates": tuple(dup_lists)}
        for name, pcolls in outputs.items():
            pcolls = pcolls if isinstance(pcolls, tuple) else (pcolls,)
            if not pcolls:
                continue
            merged = pcolls | f"Merge_{name}" >> beam.Flatten() if len(pcolls) > 1 else pcolls[0]
            _ = (merged | f"Key_{name}" >> beam.Map(lambda r: (0, r)) | f"Group_{name}" >> beam.GroupByKey()
                 | f"Write_{name}" >> beam.Map(_write_group, out, name))
        _ = ((tuple(tallies) | "MergeTallies" >> beam.Flatten()) | "SumTally" >> beam.CombinePerKey(sum) | "KeyTally" >> beam.Map(lambda kv: (0, kv))
             | "GroupTally" >> beam.GroupByKey()
             | "WriteTally" >> beam.Map(lambda kv: write_jsonl_rows(Path(out, "_tally.jsonl"), [{"id": k, "n": v} for k, v in kv[1]])))
        return files
