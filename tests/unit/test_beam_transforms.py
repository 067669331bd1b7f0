"""Beam transforms under TestPipeline (in-memory DirectRunner)."""
from __future__ import annotations

import apache_beam as beam
import numpy as np
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.corpus.beam_corpus import pick_exact, split_near, verify_bucket


def test_pick_exact_keeps_smallest_id():
    docs = [("h1", {"id": "b", "text": "x"}), ("h1", {"id": "a", "text": "x"}), ("h2", {"id": "c", "text": "y"})]
    with BeamTestPipeline() as p:
        res = (p | beam.Create(docs) | beam.GroupByKey() | beam.FlatMap(pick_exact).with_outputs("dups", main="kept"))
        assert_that(res.kept | "Ids" >> beam.Map(lambda d: d["id"]), equal_to(["a", "c"]), label="kept")
        assert_that(res.dups | "Pairs" >> beam.Map(lambda d: (d["id"], d["cluster_id"], d["kept_id"])),
                    equal_to([("b", "a", "a")]), label="dups")


def test_band_grouping_verifies_candidates_and_links_to_smallest_id():
    base = np.arange(128, dtype=np.uint32)
    near = base.copy()
    near[:10] += 1000  # 118/128 = 0.92 agreement
    far = base.copy()
    far[:60] += 1000  # 0.53 agreement: shares a band by construction but fails verification
    sigs = [("d1", base), ("d2", near), ("d3", far)]
    with BeamTestPipeline() as p:
        links = (p | beam.Create(sigs) | beam.Map(lambda kv: (b"band0", kv)) | beam.GroupByKey()
                 | beam.FlatMap(verify_bucket, 0.8))
        assert_that(links, equal_to([("d2", "d1")]))


def test_connected_components_in_beam_match_union_find():
    import random

    from pipelines.corpus.beam_corpus import ConnectedComponents
    from pipelines.corpus.graph import components_local

    rng = random.Random(7)
    nodes = [f"doc{i:03d}" for i in range(60)]
    # a long chain (the case one-hop linking gets wrong), a star, and random pairs
    edges = [(nodes[i], nodes[i + 1]) for i in range(12)] + [(nodes[20], n) for n in nodes[21:26]]
    edges += [tuple(rng.sample(nodes[30:], 2)) for _ in range(25)]
    want = components_local(edges)
    with BeamTestPipeline() as p:
        cc = p | beam.Create(edges) | ConnectedComponents(rounds=6)
        assert_that(cc.labels, equal_to(sorted(want.items())), label="labels")
        assert_that(cc.unconverged, equal_to([]), label="converged")
    assert want[nodes[12]] == nodes[0]  # the end of the chain joins its start


def test_split_near_removes_docs_with_a_root_only():
    sig = np.zeros(4, np.uint32)
    items = [("d1", {"signed": [({"id": "d1"}, sig)], "root": []}),
             ("d2", {"signed": [({"id": "d2"}, sig)], "root": ["d1"]})]
    with BeamTestPipeline() as p:
        res = p | beam.Create(items) | beam.FlatMap(split_near).with_outputs("pending", main="kept")
        assert_that(res.kept | "K" >> beam.Map(lambda d: d["id"]), equal_to(["d1"]), label="kept")
        assert_that(res.pending | "P" >> beam.Map(lambda kv: (kv[0], kv[1][0])), equal_to([("d1", "d2")]), label="pending")


def test_read_and_clean_dofns_route_every_record(tmp_path):
    """ReadFiles + Clean on a real page, a truncated record and a bad JSON line."""
    import gzip

    from test_corpus_core import EN, html, warc_bytes  # same folder: pytest puts it on sys.path

    from pipelines.corpus.beam_corpus import Clean, ReadFiles
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.filters import C4Config

    data = warc_bytes([("https://a.invalid/1", html(EN.replace(". ", ".</p><p>")), "text/html; charset=utf-8"),
                       ("https://a.invalid/2", html(EN * 30), "text/html")])
    (tmp_path / "a.warc.gz").write_bytes(data[:-300])
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"id": "j1", "text": "too short."}\n{oops\n'))
    cfg = CorpusConfig(input=[str(tmp_path)], output=str(tmp_path / "out"), c4=C4Config(min_chars=50))
    with BeamTestPipeline() as p:
        read = (p | beam.Create(sorted(str(f) for f in tmp_path.iterdir()))
                | beam.ParDo(ReadFiles()).with_outputs("quarantine", "tally", main="docs"))
        cleaned = read.docs | beam.ParDo(Clean(cfg)).with_outputs("dropped", "quarantine", main="kept")
        assert_that(cleaned.kept | "K" >> beam.Map(lambda d: (d["url"], d["language"])), equal_to([("https://a.invalid/1", "en")]), label="kept")
        assert_that(cleaned.dropped | "D" >> beam.Map(lambda d: (d["id"], d["reason"])), equal_to([("j1", "c4_no_lines_left")]), label="dropped")
        assert_that(read.quarantine | "Q" >> beam.Map(lambda q: q["reason"].split("_")[0]), equal_to(["truncated", "invalid"]), label="quarantine")
        assert_that(read.tally | "T" >> beam.CombinePerKey(sum), equal_to([("in", 4)]), label="tally")


def test_encode_pack_write_writes_a_readable_masked_shard(tmp_path):
    import datasets
    import pyarrow as pa

    from pipelines.shards.beam_shards import EncodePackWrite
    from pipelines.shards.masking import MaskConfig
    from training.testing import SENTENCES, make_tokenizer

    tok_dir = make_tokenizer(tmp_path / "tok")
    docs = [{"id": f"d{i}", "text": s} for i, s in enumerate(SENTENCES)]
    fn = EncodePackWrite(str(tok_dir / "tokenizer.json"), str(tmp_path / "out"), 16, MaskConfig(num_variants=3), "mlm")
    with BeamTestPipeline() as p:
        res = p | beam.Create([(("train", 0), docs)]) | beam.ParDo(fn)
        assert_that(res | beam.Map(lambda r: (r["path"], r["documents"])), equal_to([("train/shard-00000.arrow", len(SENTENCES))]))
    path = tmp_path / "out" / "train" / "shard-00000.arrow"
    table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
    assert table.schema.metadata[b"lmforge.schema"] == b"lmforge.token_shard/v1"
    assert all(len(v) == 3 for v in table.column("mask_positions").to_pylist())
    ds = datasets.Dataset.from_file(str(path))
    assert len(ds) == table.num_rows and len(ds[0]["input_ids"]) == 16
