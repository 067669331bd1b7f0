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
        assert_that(res.dups | "Pairs" >> beam.Map(lambda d: (d["id"], d["kept_id"])), equal_to([("b", "a")]), label="dups")


def test_band_grouping_verifies_candidates_and_links_to_smallest_id():
    base = np.arange(128, dtype=np.uint32)
    near = base.copy()
    near[:10] += 1000  # 118/128 = 0.92 agreement
    far = base.copy()
    far[:60] += 1000  # 0.53 agreement: shares a band by construction but fails verification
    sigs = [("d1", base), ("d2", near), ("d3", far)]
    with BeamTestPipeline() as p:
        links = (p | beam.Create(sigs) | beam.Map(lambda kv: (b"band0", kv)) | beam.GroupByKey()
                 | beam.FlatMap(verify_bucket, 0.8) | beam.Map(lambda kv: (kv[0], kv[1][0])))
        assert_that(links, equal_to([("d2", "d1")]))


def test_split_near_removes_linked_docs_only():
    items = [("d1", {"doc": [{"id": "d1"}], "link": []}), ("d2", {"doc": [{"id": "d2"}], "link": [("d1", 0.9)]})]
    with BeamTestPipeline() as p:
        res = p | beam.Create(items) | beam.FlatMap(split_near).with_outputs("dups", main="kept")
        assert_that(res.kept | "K" >> beam.Map(lambda d: d["id"]), equal_to(["d1"]), label="kept")
        assert_that(res.dups | "D" >> beam.Map(lambda d: (d["id"], d["kept_id"], d["kind"])), equal_to([("d2", "d1", "near")]), label="dups")
