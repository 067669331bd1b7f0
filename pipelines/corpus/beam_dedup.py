"""Near-duplicate removal on Beam: MinHash -> LSH bands -> verified edges -> connected components
-> one representative per cluster, against this snapshot and the persisted band index.

Nodes are document ids; documents of the index (kept by earlier runs) are nodes named
INDEXED + id, so an id reused by a new snapshot never merges with an old one by name.

    sign_records   (in the cleaning step) signatures (datasketch MinHash.bulk) -> band keys,
                   and exact shingle hashes, staged to disk with the text (staging.py); text
                   never enters the dedup steps, hashes only for candidate nodes
    Bands          (band key, member) for new docs; the index contributes the stored entries of
                   the buckets those keys fall in (looked up per band, never read whole)
    Screen         per bucket: each new member linked to one anchor (the smallest indexed
                   doc if any, else the smallest id); buckets carry ids, not signatures
    Confirm        exact shingle Jaccard >= threshold on both ends (two CoGroupByKeys)
    Components     large-star/small-star rounds (graph.py), never all edges on one machine
    Representatives per cluster: indexed docs first, then best quality, then smallest id
                   (dedup.rank_key). Each other new member is removed only if its own exact
                   Jaccard with the representative reaches the threshold; members joined to the
                   cluster through a chain (a~b~c, a and c apart) stay kept and are counted as
                   `near_chain_kept`. Indexed documents are never removed: they are published.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipelines.beam_tags import MultiOutput
from pipelines.corpus.dedup import (
    band_keys,
    bucket_candidates,
    exact_jaccard,
    rank_key,
    shingle_hashes,
    signatures_from_hashes,
    split_band_keys,
)
from pipelines.corpus.graph import both_directions, large_star, small_star, toward_larger
from pipelines.corpus.staging import read_staged, staged_rows, where
from pipelines.io import shard_of, write_parquet_rows
from schemas import storage
from schemas.minhash_index import INDEX_BAND_SCHEMA, INDEX_DOC_SCHEMA

NS = "corpus"

# (counter before a shuffle, counter after it): equal in a correct run. Document counts
# reconcile on their own (every document lands in exactly one output), but a record lost inside
# the dedup path would only make fewer duplicates found; these pairs make that loss loud
# (stage.check_shuffles).
SHUFFLE_CHECKS = (("dedup_band_entries_out", "dedup_band_entries_in"),
                  ("dedup_candidates_out", "dedup_candidates_in"),
                  ("dedup_half_edges_out", "dedup_half_edges_in"),
                  ("dedup_rooted_out", "dedup_rooted_in"),
                  ("dedup_info_requests_out", "dedup_info_requests_in"),
                  ("dedup_node_info_out", "dedup_node_info_in_first"),
                  ("dedup_node_info_out", "dedup_node_info_in_second"),
                  ("dedup_node_info_out", "dedup_node_info_in_rooted"))


def _count(name: str, n: int = 1) -> None:
    Metrics.counter(NS, name).inc(n)


def counted(name: str):
    """A Map that counts the elements passing through it under `name`."""
    def fn(x):
        _count(name)
        return x
    return fn
INDEXED = "\x1fidx\x1f"
"""Prefix of index nodes; sorts before printable ids, so an indexed doc anchors its buckets."""


def given_id(node: str) -> str:
    return node[len(INDEXED):] if node.startswith(INDEXED) else node


def sign_records(records: list[dict], cfg, bands: int, rows: int) -> list[tuple[np.ndarray, list[bytes]]]:
    """(exact shingle hashes, LSH band keys) per record, one datasketch MinHash.bulk call per batch.
    Languages written without spaces are shingled by characters."""
    chars = frozenset(cfg.char_shingle_languages)
    hashes = [shingle_hashes(r["text"], cfg.shingle_chars, "char") if r.get("language") in chars
              else shingle_hashes(r["text"], cfg.shingle_words) for r in records]
    sigs = signatures_from_hashes(hashes, cfg.num_perm)
    return [(h, band_keys(s, bands, rows)) for h, s in zip(hashes, sigs)]


def pick_info(entries: list[tuple]) -> tuple:
    """Two records can share an id (the later ones are quarantined by first_of_id, which keeps
    the smallest (source, offset)); pick the same one here: (rank, hashes, generation)."""
    rank, h, gen, _ = min(entries, key=lambda e: e[3])
    return rank, h, gen


def screen_bucket(item: tuple[bytes, Iterable[str]]) -> list[tuple[str, str]]:
    """One LSH bucket of node ids -> candidate edges (dedup.bucket_candidates)."""
    _, nodes = item
    nodes = list(nodes)
    _count("dedup_band_entries_in", len(nodes))
    return bucket_candidates((n, n.startswith(INDEXED)) for n in nodes)


def staged_info_requests(item: tuple[str, dict[str, list]]) -> Iterable[Any]:
    """A candidate node of this run joined with its slim record -> (staged file, (node, rank,
    (source, offset))): the one place its shingle hashes can be read from."""
    node, grouped = item
    if not grouped["node"] or node.startswith(INDEXED):
        return
    if not grouped["doc"]:  # every new candidate node is a kept record: a miss means a shuffle lost records
        yield TaggedOutput("missing", node)
        return
    r = grouped["doc"][0]
    _count("dedup_info_requests_out")
    yield r["staged"], (node, r["rank"], where(r))


def lookup_staged_info(item: tuple[str, Iterable[tuple]], out: str, num_shards: int) -> Iterable[Any]:
    """A staged file and its candidate nodes -> (node, (rank, hashes, None, (source, offset))),
    reading only the row groups of the shards those nodes fall in."""
    name, requests = item
    wanted = {at: (node, rank) for node, rank, at in requests}
    _count("dedup_info_requests_in", len(wanted))
    shards = {shard_of(node, num_shards) for node, _ in wanted.values()}
    for row in read_staged(out, name, shards, columns=["id", "source", "offset", "hashes"]):
        at = where(row)
        if at in wanted and wanted[at][0] == row["id"]:
            node, rank = wanted.pop(at)
            yield node, (rank, np.asarray(row["hashes"], np.uint64), None, at)
    for node, _ in wanted.values():  # requested but not staged: the file lost rows
        yield TaggedOutput("missing", node)


def attach_hashes(item: tuple[str, dict[str, list]]) -> Iterable[tuple[str, tuple[str, np.ndarray]]]:
    """(u, {edge: [v...], info: [(rank, h, gen)]}) -> (v, (u, u's hashes)) per candidate edge."""
    u, grouped = item
    _count("dedup_candidates_in", len(grouped["edge"]))
    _count("dedup_node_info_in_first", len(grouped["info"]))
    if grouped["info"]:
        h = pick_info(grouped["info"])[1]
        for v in grouped["edge"]:
            yield v, (u, h)
    elif grouped["edge"]:  # every candidate node has hashes: a miss means a shuffle lost records
        yield TaggedOutput("missing", u)


def confirm_exact(item: tuple[str, dict[str, list]], threshold: float) -> Iterable[tuple[str, str]]:
    v, grouped = item
    _count("dedup_half_edges_in", len(grouped["edge"]))
    _count("dedup_node_info_in_second", len(grouped["info"]))
    if not grouped["info"]:
        if grouped["edge"]:
            yield TaggedOutput("missing", v)
        return
    h_v = pick_info(grouped["info"])[1]
    for u, h_u in grouped["edge"]:
        if exact_jaccard(h_u, h_v) >= threshold:
            Metrics.counter(NS, "near_pairs_confirmed").inc()
            yield u, v
        else:
            Metrics.counter(NS, "near_pairs_rejected_exact").inc()


class ConnectedComponents(beam.PTransform):
    """Edges (u, v) -> (node, root) for every node of every component, the root included
    (root = smallest node id of the component).

    `rounds` large-star + small-star rounds, each two GroupByKeys (see pipelines/corpus/graph.py).
    Also returns, under "unconverged", one element per node whose state is not yet a star after
    the last round (it has more than one parent, or it is a parent and a child).
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
        return roles | "Label" >> MultiOutput(label_node, main="labels", tags=("unconverged",))


def label_node(item: tuple[str, Iterable[tuple[str, str]]]) -> Iterable[Any]:
    node, roles = item
    roles = list(roles)
    parents = sorted({other for role, other in roles if role == "child"})
    is_parent = any(role == "parent" for role, _ in roles)
    if parents and (len(parents) > 1 or is_parent):
        yield TaggedOutput("unconverged", node)
    yield node, (parents[0] if parents else node)


def to_root(item: tuple[str, dict[str, list]]) -> Iterable[tuple[str, tuple]]:
    node, grouped = item
    _count("dedup_node_info_in_rooted", len(grouped["info"]))
    if grouped["root"] and grouped["info"]:
        rank, h, gen = pick_info(grouped["info"])
        yield grouped["root"][0], (node, rank, h, gen)
    elif grouped["root"]:
        yield TaggedOutput("missing", node)


def choose_representative(item: tuple[str, Iterable[tuple]], threshold: float) -> Iterable[Any]:
    """One cluster -> (removed new doc id, duplicate row) for members verified against the
    representative; indexed members are never removed.

    The whole cluster's hash sets meet here; near-duplicate clusters are small (a page and its
    copies). A giant cluster would be one hot key: at scale, cap its size or split by rank.
    """
    _, members = item
    members = sorted(members, key=lambda m: m[1])
    _count("dedup_rooted_in", len(members))
    rep, _, h_rep, rep_gen = members[0]
    rep_id = given_id(rep)
    for node, _, h, _ in members[1:]:
        if node.startswith(INDEXED):
            continue
        sim = exact_jaccard(h, h_rep)
        if sim >= threshold:
            Metrics.counter(NS, "duplicates_near").inc()
            yield node, {"id": node, "cluster_id": rep_id, "kept_id": rep_id, "kind": "near",
                         "similarity": round(sim, 6), "kept_generation": rep_gen}
        else:
            Metrics.counter(NS, "near_chain_kept").inc()
            yield TaggedOutput("chain_kept", node)


def split_removed(item: tuple[str, dict[str, list]]) -> Iterable[Any]:
    """A kept record and the decision about it -> the record (still kept) or its duplicate row."""
    _, grouped = item
    if not grouped["doc"]:
        return
    if grouped["removed"]:
        yield TaggedOutput("dups", grouped["removed"][0])
    else:
        yield grouped["doc"][0]


def band_of(key: bytes) -> int:
    """The band a key belongs to (dedup.band_keys puts it in the key's first two bytes)."""
    return int.from_bytes(key[:2], "big")


def index_band_files(band_files: list[str]) -> dict[int, list[str]]:
    """The index's band files by band (their folder is band=NN), every generation's."""
    by_band: dict[int, list[str]] = {}
    for f in band_files:
        folder = storage.name(storage.parent(f))
        by_band.setdefault(int(folder.split("=", 1)[1]), []).append(f)
    return {b: sorted(fs) for b, fs in by_band.items()}


def lookup_index_bands(item: tuple[int, Iterable[bytes]], by_band: dict[int, list[str]]) -> Iterable[tuple[bytes, str]]:
    """One band's keys of this run -> (key, indexed node) for every indexed document in one of those buckets.

    Only buckets this run's documents fall in can give a candidate (dedup.bucket_candidates: a bucket of
    indexed documents alone gives none), so the index's other entries never enter the shuffle: what this
    step holds is one band's keys of this run plus one index file at a time, not the whole index."""
    import pyarrow as pa
    import pyarrow.compute as pc

    band, keys = item
    wanted = pa.array(sorted(set(keys)), pa.binary())
    for f in by_band.get(band, []):
        t = storage.parquet_file(f).read(columns=["key", "id"])
        t = t.filter(pc.is_in(t.column("key"), value_set=wanted))
        for key, doc_id in zip(t.column("key").to_pylist(), t.column("id").to_pylist()):
            yield key, INDEXED + doc_id


EXACT_PARTS = 16
"""Partitions of this run's exact keys for the index lookup (by their first hex digit)."""


def lookup_index_exact(item: tuple[int, Iterable[str]], doc_files: list[tuple[str, int]]) -> Iterable[tuple[str, dict]]:
    """A partition of this run's exact keys -> (exact_key, entry) for each indexed document with one of
    them (a group of indexed copies alone decides nothing: beam_corpus.pick_exact). The index's docs
    files are read a column batch at a time; only matching rows become records."""
    import pyarrow as pa
    import pyarrow.compute as pc

    _, keys = item
    wanted = pa.array(sorted(set(keys)), pa.string())
    for path, gen in doc_files:
        pf = storage.parquet_file(path)
        for batch in pf.iter_batches(batch_size=65536, columns=["id", "exact_key", "quality"]):
            batch = batch.filter(pc.is_in(batch.column("exact_key"), value_set=wanted))
            for r in batch.to_pylist():
                yield r["exact_key"], {"id": r["id"], "rank": rank_key(INDEXED + r["id"], r["quality"], indexed=True),
                                       "generation": gen}


def index_doc_shards(doc_files: list[tuple[str, int]]) -> list[tuple[int, dict[int, str]]]:
    """Per generation: (number of shards, shard -> docs file); a document's file is its id's shard_of."""
    by_gen: dict[int, tuple[int, dict[int, str]]] = {}
    for path, gen in doc_files:
        stem = storage.name(path).removesuffix(".parquet")  # part-SSSSS-of-NNNNN
        _, shard, _, total = stem.split("-")
        by_gen.setdefault(gen, (int(total), {}))[1][int(shard)] = path
    return [by_gen[g] for g in sorted(by_gen)]


def index_info_requests(node: str, shards: list[tuple[int, dict[int, str]]]) -> Iterable[tuple[str, str]]:
    """An indexed candidate node -> (docs file, id) for each generation's file that would hold it."""
    if not node.startswith(INDEXED):
        return
    doc_id = given_id(node)
    for total, files in shards:
        path = files.get(shard_of(doc_id, total))
        if path is not None:
            yield path, doc_id


def lookup_index_info(item: tuple[str, Iterable[str]], gen_of: dict[str, int]) -> Iterable[tuple[str, tuple]]:
    """A docs file and the candidate ids it may hold -> (node, (rank, hashes, generation, tiebreak)) of those
    it holds. Hashes are the index's largest column: only candidates' are read into the joins."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path, ids = item
    wanted = pa.array(sorted(set(ids)), pa.string())
    pf = storage.parquet_file(path)
    for batch in pf.iter_batches(batch_size=1024, columns=["id", "quality", "hashes"]):
        batch = batch.filter(pc.is_in(batch.column("id"), value_set=wanted))
        for r in batch.to_pylist():
            node = INDEXED + r["id"]
            yield node, (rank_key(node, r["quality"], indexed=True), np.asarray(r["hashes"], np.uint64), gen_of[path], ("", 0))


class ReadIndex(beam.PTransform):
    """The committed generations of the band index, looked up by this run's keys (never read whole):
    kept slim records -> {"exact": (exact_key, entry) of indexed documents sharing an exact key with
    this run, "band_files", "doc_files"}; NearDedup looks up bands and hashes the same way."""

    def __init__(self, band_files: list[str], doc_files: list[tuple[str, int]]):
        super().__init__()
        self.band_files, self.doc_files = band_files, doc_files

    def expand(self, kept):
        exact = (kept | "NewExactKeys" >> beam.Map(lambda r: (int(r["exact_key"][0], 16) % EXACT_PARTS, r["exact_key"]))
                 | "GroupNewExactKeys" >> beam.GroupByKey()
                 | "LookupIndexExact" >> beam.FlatMap(lookup_index_exact, self.doc_files))
        return {"exact": exact, "band_files": self.band_files, "doc_files": self.doc_files}


class NearDedup(beam.PTransform):
    """Kept slim records (id, band_keys, ...) -> {"kept": slim records still kept, "dups":
    near-duplicate rows, "tallies": (name, n)}.

    `index` is ReadIndex's output or None. Only nodes that appear in a candidate edge (~10-20%
    of documents) bring their shingle hashes into the three joins, read from the batch files the
    cleaning step staged them in (staging.py) or from the index's docs files.
    """

    def __init__(self, cfg, index: dict | None = None):
        super().__init__()
        self.cfg, self.index = cfg, index

    def expand(self, kept):
        cfg = self.cfg
        new_members = (kept | "Bands" >> beam.FlatMap(lambda r: [(k, r["id"]) for k in split_band_keys(r["band_keys"])])
                       | "CountBands" >> beam.Map(counted("dedup_band_entries_out")))
        if self.index is not None and self.index["band_files"]:
            old = (new_members | "NewKeysByBand" >> beam.Map(lambda kv: (band_of(kv[0]), kv[0]))
                   | "GroupNewKeysByBand" >> beam.GroupByKey()
                   | "LookupIndexBands" >> beam.FlatMap(lookup_index_bands, index_band_files(self.index["band_files"]))
                   | "CountOldBands" >> beam.Map(counted("dedup_band_entries_out")))
            members = (new_members, old) | "AllMembers" >> beam.Flatten()
        else:
            members = new_members
        candidates = (members | "GroupBands" >> beam.GroupByKey()
                      | "Screen" >> beam.FlatMap(screen_bucket)
                      | "DistinctCandidates" >> beam.Distinct() | "CountCandidates" >> beam.Map(counted("dedup_candidates_out")))
        nodes = (candidates | "CandidateNodes" >> beam.FlatMap(lambda e: [(e[0], 1), (e[1], 1)])
                 | "DistinctNodes" >> beam.Distinct())
        # Shingle hashes of candidate nodes only, read where they were staged (staging.py): a new
        # node's slim record names its staged file; an indexed node's id names the index's docs
        # file per generation that can hold it. No shuffle carries every document's hashes.
        # (An AsDict side input of the candidate ids, tried before, let 255 candidate nodes through
        # without their hashes in a 250k-document multi_processing run here.)
        by_id = kept | "SlimById" >> beam.Map(lambda r: (r["id"], r))
        requests = ({"node": nodes, "doc": by_id} | "JoinCandidateDocs" >> beam.CoGroupByKey()
                    | "StagedInfoRequests" >> MultiOutput(staged_info_requests, main="requests", tags=("missing",)))
        looked_up = (requests.requests | "GroupInfoRequestsByFile" >> beam.GroupByKey()
                     | "LookupStagedInfo" >> MultiOutput(lookup_staged_info, cfg.output, cfg.num_shards, main="info",
                                                         tags=("missing",)))
        infos = [looked_up.info]
        if self.index is not None and self.index["doc_files"]:
            doc_files = self.index["doc_files"]
            infos.append(nodes | "IndexInfoRequests" >> beam.FlatMap(lambda kv, shards: index_info_requests(kv[0], shards),
                                                                    index_doc_shards(doc_files))
                         | "GroupInfoRequests" >> beam.GroupByKey()
                         | "LookupIndexInfo" >> beam.FlatMap(lookup_index_info, {p: g for p, g in doc_files}))
        info = ((tuple(infos) | "AllInfo" >> beam.Flatten() if len(infos) > 1 else infos[0])
                | "CountNodeInfo" >> beam.Map(counted("dedup_node_info_out")))
        # Two joins bring both ends' exact shingle hashes to each candidate edge.
        first = ({"edge": candidates, "info": info} | "JoinFirstEnd" >> beam.CoGroupByKey()
                 | "AttachFirst" >> MultiOutput(attach_hashes, main="edges", tags=("missing",)))
        half = first.edges | "CountHalfEdges" >> beam.Map(counted("dedup_half_edges_out"))
        second = ({"edge": half, "info": info} | "JoinSecondEnd" >> beam.CoGroupByKey()
                  | "ConfirmExact" >> MultiOutput(confirm_exact, cfg.jaccard_threshold, main="edges", tags=("missing",)))
        cc = second.edges | "Components" >> ConnectedComponents(cfg.cc_rounds)
        rooted = ({"root": cc.labels, "info": info} | "JoinNodeInfo" >> beam.CoGroupByKey()
                  | "KeyByRoot" >> MultiOutput(to_root, main="rooted", tags=("missing",)))
        decided = (rooted.rooted | "CountRooted" >> beam.Map(counted("dedup_rooted_out")) | "GroupClusters" >> beam.GroupByKey()
                   | "Representatives" >> MultiOutput(choose_representative, cfg.jaccard_threshold, main="removed",
                                                      tags=("chain_kept",)))
        split = ({"doc": by_id, "removed": decided.removed}
                 | "JoinRemoved" >> beam.CoGroupByKey() | "SplitRemoved" >> MultiOutput(split_removed, main="kept", tags=("dups",)))
        # Tallies summed with the stage's others (SumTally), one ("name", 1) per element: a Map fused into
        # the step that makes the element, where a Count.Globally each cost two stages of their own (14
        # of the pipeline's 67, about 0.3 s on the DirectRunner). The zeros keep every name in _tally.jsonl.
        missing = (("JoinFirstEnd", first.missing), ("JoinSecondEnd", second.missing), ("JoinNodeInfo", rooted.missing),
                   ("JoinCandidateDocs", requests.missing), ("LookupStagedInfo", looked_up.missing))
        counted_by = [("cc_unconverged_nodes", "Unconverged", cc.unconverged), ("near_chain_kept", "ChainKept", decided.chain_kept),
                      # Must be 0; the driver refuses to write a manifest otherwise (stage.check_dedup_tallies).
                      *((f"dedup_nodes_missing_hashes:{name}", f"Missing{name}", pc) for name, pc in missing)]
        tallies = (kept.pipeline | "TallyZeros" >> beam.Create([(key, 0) for key, _, _ in counted_by]),
                   *(pc | f"Tally{label}" >> beam.Map(lambda _, key=key: (key, 1)) for key, label, pc in counted_by))
        return {"kept": split.kept, "dups": split.dups, "tallies": tallies}


def _write_bands(item: tuple[int, Iterable[tuple[bytes, str]]], gen_dir: str) -> str:
    band, pairs = item
    rows = sorted({(k, i) for k, i in pairs})
    return write_parquet_rows(storage.join(gen_dir, "bands", f"band={band:02d}", "part-00000.parquet"),
                              [{"key": k, "id": i} for k, i in rows], INDEX_BAND_SCHEMA, sort_key=None)


def _write_docs(item: tuple[int, Iterable[dict]], gen_dir: str, num_shards: int, out: str) -> str:
    """One index shard's rows, their shingle hashes read from the shard's row group of each staged file."""
    shard, rows = item
    docs = [{"id": r["id"], "exact_key": r["exact_key"], "quality": r["quality"], "hashes": row["hashes"]}
            for r, row in staged_rows(out, rows, shard, ["hashes"])]
    return write_parquet_rows(storage.join(gen_dir, "docs", f"part-{shard:05d}-of-{num_shards:05d}.parquet"), docs, INDEX_DOC_SCHEMA)


class ExtendIndex(beam.PTransform):
    """Index rows of every document kept by this run (beam_corpus.index_row: no hashes; those are read
    from the staged files under `out`) -> a new generation's Parquet files (their paths)."""

    def __init__(self, gen_dir: str, num_shards: int, out: str):
        super().__init__()
        self.gen_dir, self.num_shards, self.out = gen_dir, num_shards, out

    def expand(self, rows):
        bands = (rows | "BandRows" >> beam.FlatMap(lambda r: [(int.from_bytes(k[:2], "big"), (k, r["id"])) for k in r["band_keys"]])
                 | "GroupByBand" >> beam.GroupByKey() | "WriteBands" >> beam.Map(_write_bands, self.gen_dir))
        docs = (rows | "DocShard" >> beam.Map(lambda r, n: (shard_of(r["id"], n), r), self.num_shards)
                | "GroupDocShards" >> beam.GroupByKey() | "WriteIndexDocs" >> beam.Map(_write_docs, self.gen_dir, self.num_shards, self.out))
        return (bands, docs) | "IndexWritten" >> beam.Flatten()  # the caller's output waits on both writes
