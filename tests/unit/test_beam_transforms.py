"""Beam transforms under TestPipeline (in-memory DirectRunner)."""
from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import numpy as np
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.corpus.beam_corpus import pick_exact
from pipelines.corpus.beam_dedup import INDEXED, choose_representative, screen_bucket, split_removed
from pipelines.corpus.dedup import rank_key


def _slim(doc_id: str, text: str, score: float = 0.99) -> dict:
    from pipelines.corpus.dedup import quality

    return {"id": doc_id, "rank": rank_key(doc_id, quality({"text": text, "language_score": score}), indexed=False)}


def test_pick_exact_keeps_best_quality_then_smallest_id():
    short, longer, tie = _slim("a", "one two"), _slim("b", "one two three"), _slim("c", "one two three")
    docs = [("h1", ("new", tie)), ("h1", ("new", short)), ("h1", ("new", longer)), ("h2", ("new", _slim("d", "y")))]
    with BeamTestPipeline() as p:
        res = (p | beam.Create(docs) | beam.GroupByKey() | beam.FlatMap(pick_exact).with_outputs("dups", main="kept"))
        assert_that(res.kept | "Ids" >> beam.Map(lambda d: d["id"]), equal_to(["b", "d"]), label="kept")
        assert_that(res.dups | "Pairs" >> beam.Map(lambda d: (d["id"], d["kept_id"], d["kept_generation"])),
                    equal_to([("a", "b", None), ("c", "b", None)]), label="dups")


def test_pick_exact_prefers_a_document_already_in_the_index():
    old = {"id": "z-old", "rank": rank_key(INDEXED + "z-old", [0.5, 2.0], indexed=True), "generation": 3}
    item = ("h", [("new", _slim("a", "one two three four", 1.0)), ("old", old)])
    out = list(pick_exact(item))
    assert [o.value["kept_id"] for o in out] == ["z-old"] and out[0].value["kept_generation"] == 3


def test_screen_bucket_links_each_new_member_to_one_anchor():
    with BeamTestPipeline() as p:
        links = (p | beam.Create(["d2", "d1", "d3"]) | beam.Map(lambda n: (b"band0", n))
                 | beam.GroupByKey() | beam.FlatMap(screen_bucket))
        assert_that(links, equal_to([("d2", "d1"), ("d3", "d1")]))
    old = [INDEXED + "x", INDEXED + "w"]
    assert sorted(screen_bucket((b"k", ["d1", "a0", *old]))) == [("a0", INDEXED + "w"), ("d1", INDEXED + "w")]
    assert screen_bucket((b"k", old)) == []  # only published docs: compared when they were new


def test_representative_is_verified_against_every_removed_member():
    """a~b and b~c confirmed, a and c far apart: with a kept, b is removed, c stays kept."""
    h = {k: np.array(v, np.uint64) for k, v in {"a": range(0, 100), "b": range(5, 105), "c": range(15, 115)}.items()}
    members = [(n, rank_key(n, [1.0, 100.0], indexed=False), h[n], None) for n in "abc"]
    out = list(choose_representative(("a", members), 0.8))
    removed = [o for o in out if not hasattr(o, "tag")]
    chain = [o.value for o in out if hasattr(o, "tag")]
    assert [(r[0], r[1]["kept_id"]) for r in removed] == [("b", "a")] and chain == ["c"]
    assert removed[0][1]["similarity"] == round(95 / 105, 6)


def test_indexed_members_are_never_removed_and_win():
    h = np.arange(100, dtype=np.uint64)
    old = (INDEXED + "p", rank_key(INDEXED + "p", [0.1, 1.0], indexed=True), h, 2)
    new = ("n", rank_key("n", [1.0, 100.0], indexed=False), h, None)
    out = list(choose_representative(("n", [new, old]), 0.8))
    assert out == [("n", {"id": "n", "cluster_id": "p", "kept_id": "p", "kind": "near", "similarity": 1.0, "kept_generation": 2})]


def test_split_removed_routes_by_decision():
    items = [("d1", {"doc": [{"id": "d1"}], "removed": []}), ("d2", {"doc": [{"id": "d2"}], "removed": [{"id": "d2"}]})]
    out = [o for it in items for o in split_removed(it)]
    assert out[0] == {"id": "d1"} and out[1].tag == "dups"


def test_connected_components_in_beam_match_union_find():
    import random

    from pipelines.corpus.beam_dedup import ConnectedComponents
    from pipelines.corpus.graph import components_local

    rng = random.Random(7)
    nodes = [f"doc{i:03d}" for i in range(60)]
    # a long chain (the case one-hop linking gets wrong), a star, and random pairs
    edges = [(nodes[i], nodes[i + 1]) for i in range(12)] + [(nodes[20], n) for n in nodes[21:26]]
    edges += [tuple(rng.sample(nodes[30:], 2)) for _ in range(25)]
    want = components_local(edges)
    want.update({r: r for r in set(want.values())})  # roots are labelled too
    with BeamTestPipeline() as p:
        cc = p | beam.Create(edges) | ConnectedComponents(rounds=6)
        assert_that(cc.labels, equal_to(sorted(want.items())), label="labels")
        assert_that(cc.unconverged, equal_to([]), label="converged")
    assert want[nodes[12]] == nodes[0]  # the end of the chain joins its start


def test_read_and_clean_dofns_route_every_record(tmp_path):
    """ReadFiles + CleanAndSign on a real page, a truncated record and a bad JSON line."""
    import gzip

    from test_corpus_core import EN, html, warc_bytes  # same folder: pytest puts it on sys.path

    from pipelines.corpus.beam_corpus import CleanAndSign, ReadFiles
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.steps.c4 import C4Config

    data = warc_bytes([("https://a.invalid/1", html(EN.replace(". ", ".</p><p>")), "text/html; charset=utf-8"),
                       ("https://a.invalid/2", html(EN * 30), "text/html")])
    (tmp_path / "a.warc.gz").write_bytes(data[:-300])
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"id": "j1", "text": "too short."}\n{oops\n'))
    cfg = CorpusConfig(input=[str(tmp_path)], output=str(tmp_path / "out"), c4=C4Config(min_chars=50))
    with BeamTestPipeline() as p:
        read = (p | beam.Create(sorted(str(f) for f in tmp_path.iterdir()))
                | beam.ParDo(ReadFiles(batch_size=4)).with_outputs("quarantine", "tally", main="docs"))
        cleaned = (read.docs | beam.ParDo(CleanAndSign(cfg, 16, 8))
                   .with_outputs("dropped", "quarantine", "lines", main="slim"))
        assert_that(cleaned.slim | "S" >> beam.Map(lambda r: (r["language"], len(r["band_keys"]), "text" in r, "hashes" in r)),
                    equal_to([("en", 16 * 14, False, False)]), label="slim")
        assert_that(cleaned.dropped | "D" >> beam.Map(lambda d: (d["id"], d["reason"])), equal_to([("j1", "c4_no_lines_left")]), label="dropped")
        assert_that(read.quarantine | "Q" >> beam.Map(lambda q: q["reason"].split("_")[0]), equal_to(["truncated", "invalid"]), label="quarantine")
        assert_that(read.tally | "T" >> beam.CombinePerKey(sum), equal_to([("in", 4)]), label="tally")
    # The kept page's text and shingle hashes went to its batch's staged file, not into the pipeline.
    from pipelines.corpus.staging import read_staged, staging_dir

    staged = sorted(Path(staging_dir(cfg.output)).iterdir())
    assert len(staged) == 1
    rows = list(read_staged(cfg.output, staged[0].name))
    assert [(r["url"], r["language"]) for r in rows] == [("https://a.invalid/1", "en")]
    assert rows[0]["text"].startswith(EN.split(".")[0]) and len(rows[0]["hashes"]) > 10


def test_encode_pack_write_writes_a_readable_masked_shard(tmp_path):
    import datasets
    import pyarrow as pa

    from pipelines.shards.beam_shards import EncodePackWrite
    from pipelines.shards.mask_config import MaskConfig
    from tests.fixtures import SENTENCES, make_tokenizer

    tok_dir = make_tokenizer(tmp_path / "tok")
    docs = [{"id": f"d{i}", "text": s} for i, s in enumerate(SENTENCES)]
    fn = EncodePackWrite(str(tok_dir / "tokenizer.json"), str(tmp_path / "out"), 16, MaskConfig(num_variants=3), "concat")
    with BeamTestPipeline() as p:
        res = p | beam.Create([(("train", 0), docs)]) | beam.ParDo(fn)
        assert_that(res | beam.Map(lambda r: (r["path"], r["part"])), equal_to([("train/shard-00000-000.arrow", 0)]))
    path = tmp_path / "out" / "train" / "shard-00000-000.arrow"
    table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
    assert table.schema.metadata[b"lmforge.schema"] == b"lmforge.token_shard/v3"
    assert all(len(v) == 3 for v in table.column("mask_positions").to_pylist())
    ds = datasets.Dataset.from_file(str(path))
    assert len(ds) == table.num_rows and len(ds[0]["input_ids"]) == 16


def test_a_candidate_node_without_hashes_is_reported_not_skipped():
    import pytest

    from pipelines.corpus.beam_dedup import attach_hashes, confirm_exact, to_root
    from pipelines.corpus.stage import check_dedup_tallies

    assert [o.tag for o in attach_hashes(("u", {"edge": ["v"], "info": []}))] == ["missing"]
    assert [o.tag for o in confirm_exact(("v", {"edge": [("u", np.zeros(1, np.uint64))], "info": []}), 0.8)] == ["missing"]
    assert [o.tag for o in to_root(("n", {"root": ["r"], "info": []}))] == ["missing"]
    check_dedup_tallies({"dedup_nodes_missing_hashes:JoinFirstEnd": 0})
    with pytest.raises(RuntimeError, match="3 at JoinSecondEnd.*lost records"):
        check_dedup_tallies({"dedup_nodes_missing_hashes:JoinSecondEnd": 3})


def test_default_beam_args_pick_a_mode_and_refuse_multi_threading():
    import pytest

    from pipelines.corpus.stage import auto_mode, default_beam_args, direct_workers

    assert default_beam_args([], mode="in_memory") == ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    assert default_beam_args([]) == ["--direct_running_mode=multi_processing", f"--direct_num_workers={direct_workers()}"]
    assert direct_workers() >= 2  # every core; two on a one-core machine, as before
    # The caller's choice wins over the default.
    assert default_beam_args(["--direct_running_mode=multi_processing"], mode="in_memory") == [
        "--direct_running_mode=multi_processing", f"--direct_num_workers={direct_workers()}"]
    assert auto_mode(12 << 20) == "in_memory" and auto_mode(40 << 20) == "multi_processing"
    with pytest.raises(ValueError, match="multi_threading"):
        default_beam_args(["--direct_running_mode=multi_threading"])


def test_a_step_appended_to_the_list_has_its_drops_counted_by_reason(monkeypatch):
    """CleanAndSign counts a new family's drops as `dropped_<reason>` and writes them to dropped/ with
    the reason, as every other family's (the step and its config: test_corpus_steps.py)."""
    from collections import Counter
    from types import SimpleNamespace

    from test_corpus_steps import TOY_STEPS, doc, toy_config

    from pipelines.corpus import beam_corpus, clean

    counted: Counter = Counter()

    class Metrics:  # Beam's Metrics, recording instead of reporting to a runner
        @staticmethod
        def counter(namespace: str, name: str) -> SimpleNamespace:
            return SimpleNamespace(inc=lambda n=1: counted.update({f"{namespace}:{name}": n}))

    monkeypatch.setattr(clean, "STEPS", TOY_STEPS)
    monkeypatch.setattr(beam_corpus, "Metrics", Metrics)
    out = list(beam_corpus.CleanAndSign(toy_config(), 4, 4).process(("f", 0, [doc("spam spam"), doc("more spam")])))
    assert counted == {"corpus:dropped_toy_word": 2}
    assert [(o.tag, o.value["reason"]) for o in out] == [("dropped", "toy_word")] * 2


def test_choose_languages_keeps_the_crawls_languages_and_drops_the_rest_with_their_count():
    from pipelines.corpus.beam_corpus import ChooseLanguages
    from pipelines.corpus.steps.language import language_verdicts

    slim = [{"id": f"{lang}{i}", "url": f"u{i}", "source": "f", "language": lang}
            for lang, n in (("fr", 40), ("de", 30), ("en", 6), ("la", 2)) for i in range(n)]
    with BeamTestPipeline() as p:
        out = p | beam.Create(slim) | ChooseLanguages(share=0.05, documents=1000, parts=4)
        assert_that(out["kept"] | "KeptLangs" >> beam.Map(lambda r: r["language"]) | "CountKept" >> beam.combiners.Count.PerElement(),
                    equal_to([("fr", 40), ("de", 30), ("en", 6)]), label="kept")  # en: 6 of 78, over 5%
        assert_that(out["dropped"] | "Rows" >> beam.Map(lambda r: (r["id"], r["reason"], r["language"], r["detail"])),
                    equal_to([(f"la{i}", "language_not_kept", "la", "auto: la had 2 of the 78 documents that passed "
                               "cleaning, under 5% and under 1,000") for i in range(2)]), label="dropped")
        assert_that(out["tally"], equal_to([("cleaned_language:fr", 40), ("cleaned_language:de", 30),
                                            ("cleaned_language:en", 6), ("cleaned_language:la", 2)]), label="tally")
    # the document count alone keeps a language, whatever its share; the commonest is kept when none reaches either
    assert language_verdicts({"en": 100_000, "fr": 1_000}, 0.05, 1000) == {"en": None, "fr": None}
    even = language_verdicts({"en": 30, "fr": 31}, 0.6, 1000)
    assert even["fr"] is None and even["en"].startswith("auto: en had 30 of the 61 documents")
