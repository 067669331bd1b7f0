"""The band index is looked up by this run's keys, never read whole: only the index entries that can meet
this run's documents (a shared LSH bucket, a shared exact key, a candidate node's hashes) come out."""
from __future__ import annotations

import numpy as np

from pipelines.corpus.beam_dedup import (
    INDEXED,
    index_band_files,
    index_doc_shards,
    index_info_requests,
    lookup_index_bands,
    lookup_index_exact,
    lookup_index_info,
)
from pipelines.io import shard_of, write_parquet_rows
from schemas.minhash_index import INDEX_BAND_SCHEMA, INDEX_DOC_SCHEMA


def _key(band: int, tail: bytes) -> bytes:
    return band.to_bytes(2, "big") + tail.ljust(12, b"\0")


def _index(tmp_path, gen: str, docs: list[str], shards: int = 2) -> tuple[list[str], list[str]]:
    band_files, doc_files = [], []
    for band in (0, 1):
        rows = sorted({(_key(band, d.encode()), d) for d in docs})
        f = tmp_path / gen / "bands" / f"band={band:02d}" / "part-00000.parquet"
        band_files.append(write_parquet_rows(f, [{"key": k, "id": i} for k, i in rows], INDEX_BAND_SCHEMA, sort_key=None))
    for shard in range(shards):
        rows = [{"id": d, "exact_key": f"{ord(d[0]):x}" * 5, "quality": [0.9, 10.0], "hashes": [ord(c) for c in d]}
                for d in docs if shard_of(d, shards) == shard]
        f = tmp_path / gen / "docs" / f"part-{shard:05d}-of-{shards:05d}.parquet"
        doc_files.append(write_parquet_rows(f, rows, INDEX_DOC_SCHEMA))
    return band_files, doc_files


def test_lookups_return_only_what_meets_this_run(tmp_path):
    bands1, docs1 = _index(tmp_path, "gen-00001", ["alpha", "beta", "gamma"], shards=2)
    bands2, docs2 = _index(tmp_path, "gen-00002", ["delta", "beta"], shards=3)  # an id in two generations
    by_band = index_band_files(bands1 + bands2)
    assert sorted(by_band) == [0, 1] and len(by_band[1]) == 2

    got = sorted(lookup_index_bands((1, [_key(1, b"beta"), _key(1, b"zeta"), _key(1, b"beta")]), by_band))
    assert got == [(_key(1, b"beta"), INDEXED + "beta")] * 2  # both generations' entries, nothing else
    assert list(lookup_index_bands((0, [_key(0, b"zeta")]), by_band)) == []

    doc_files = [(f, 1) for f in docs1] + [(f, 2) for f in docs2]
    exact = sorted((k, e["id"], e["generation"]) for k, e in lookup_index_exact((0, ["64" * 5, "ff" * 5]), doc_files))
    assert exact == [("64" * 5, "delta", 2)]  # "d" is 0x64

    shards = index_doc_shards(doc_files)
    assert [total for total, _ in shards] == [2, 3]
    requests = sorted(index_info_requests(INDEXED + "beta", shards))
    assert [p for p, _ in requests] == sorted([docs1[shard_of("beta", 2)], docs2[shard_of("beta", 3)]])
    assert list(index_info_requests("beta", shards)) == []  # a new document's hashes come from this run
    gen_of = dict(doc_files)
    info = [x for path, doc_id in requests for x in lookup_index_info((path, [doc_id, "nobody"]), gen_of)]
    assert sorted(g for _, (_, _, g, _) in info) == [1, 2]
    assert all(node == INDEXED + "beta" and np.array_equal(h, [ord(c) for c in "beta"]) for node, (_, h, _, _) in info)
