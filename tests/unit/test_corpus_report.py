"""The corpus data report on a tiny stage directory built here with the stage's own schemas."""
from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.corpus import report
from pipelines.corpus.report import NO_HOST, NO_URL, cluster_sizes, domain_of, histogram, log_edges, write_report
from schemas.records import CLEAN_DOC_SCHEMA, DROPPED_SCHEMA, DUPLICATE_SCHEMA

EN = ("Debian will remain 100% free. We provide the guidelines that we use to determine if a work is free. "
      "We will support our users who develop and run non-free works on Debian.")
RU = "Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему."


def _write(path, rows, schema):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _doc(i, text, lang, url):
    return {"id": f"<urn:uuid:{i:08d}>", "url": url, "text": text, "language": lang, "language_score": 0.99,
            "source": "samples/crawl/news-000.warc.gz"}


@pytest.fixture
def stage_dir(tmp_path):
    out = tmp_path / "corpus"
    _write(out / "data/en/part-00000-of-00002.parquet",
           [_doc(1, EN, "en", "https://www.debian.org/social_contract"), _doc(2, EN + " " + EN, "en", "https://Example.COM:8080/a"),
            _doc(3, EN[:40], "en", None)], CLEAN_DOC_SCHEMA)
    _write(out / "data/en/part-00001-of-00002.parquet", [_doc(4, EN, "en", "https://www.debian.org/intro")], CLEAN_DOC_SCHEMA)
    _write(out / "data/ru/part-00000-of-00002.parquet", [_doc(5, RU, "ru", "https://ru.wikisource.org/wiki/x")], CLEAN_DOC_SCHEMA)
    _write(out / "dropped/part-00000.parquet",
           [{"id": "d1", "url": "https://spam.example/1", "source": "s", "reason": "c4_curly_bracket"},
            {"id": "d2", "url": "https://spam.example/2", "source": "s", "reason": "c4_curly_bracket"},
            {"id": "d3", "url": "https://www.debian.org/x", "source": "s", "reason": "too_short"}], DROPPED_SCHEMA)
    k1, k2 = "<urn:uuid:00000001>", "<urn:uuid:00000004>"
    _write(out / "duplicates/part-00000.parquet",
           [{"id": "x1", "cluster_id": k1, "kept_id": k1, "kind": "exact", "similarity": 1.0},
            {"id": "x2", "cluster_id": k1, "kept_id": k1, "kind": "near", "similarity": 0.91},
            {"id": "x3", "cluster_id": k2, "kept_id": k2, "kind": "near", "similarity": 0.82}], DUPLICATE_SCHEMA)
    (out / "quarantine").mkdir()
    (out / "quarantine/part-00000.jsonl").write_text(json.dumps(
        {"source": "samples/crawl/broken-000.warc.gz", "offset": 19734, "reason": "truncated_record", "detail": "", "id": "q"}) + "\n")
    return out


COUNTS = {"in": 12, "kept": 5, "dropped": {"c4_curly_bracket": 2, "too_short": 1}, "duplicates": 3, "quarantined": 1}


def test_report_numbers(stage_dir, monkeypatch):
    monkeypatch.setattr(report, "BATCH_ROWS", 2)  # several batches per file: the sums must still add up
    paths = write_report(stage_dir, COUNTS)
    rep = json.loads((stage_dir / "report.json").read_text())
    assert rep["outcomes"] == {"in": 12, "kept": 5, "dropped": 3, "duplicates": 3, "quarantined": 1,
                               "accounted": 12, "reconciles": True}
    assert rep["stage_counts_disagree"] == []
    assert rep["dropped_by_reason"] == {"c4_curly_bracket": 2, "too_short": 1}
    assert rep["quarantined_by_reason"] == {"truncated_record": 1}
    assert rep["quarantined_examples"] == {"truncated_record": [
        {"source": "samples/crawl/broken-000.warc.gz", "offset": 19734, "id": "q", "detail": ""}]}
    en = rep["kept_by_language"]["en"]
    assert en["documents"] == 4 and en["characters"] == 4 * len(EN) + 1 + 40  # docs 1, 2 (twice, plus a space), 3, 4
    assert en["min_characters"] == 40 and en["max_characters"] == 2 * len(EN) + 1
    assert en["words"] == 4 * len(EN.split()) + len(EN[:40].split())
    assert rep["kept_by_language"]["ru"]["characters"] == len(RU)  # characters, not UTF-8 bytes
    assert sum(rep["length_histograms"]["characters"]["counts"]["en"]) == 4
    assert sum(rep["length_histograms"]["words"]["counts"]["ru"]) == 1
    d = rep["duplicates"]
    assert d["by_kind"] == {"exact": 1, "near": 2} and d["clusters"] == 2
    assert d["cluster_sizes"] == [[2, 1], [3, 1]]
    assert d["largest_clusters"][0] == {"kept_id": "<urn:uuid:00000001>", "size": 3}
    assert sum(d["near_similarity"]["counts"]) == 2
    dom = rep["domains"]
    assert dom["kept_top"][0] == {"domain": "www.debian.org", "documents": 2}
    assert {x["domain"] for x in dom["kept_top"]} == {"www.debian.org", "example.com", NO_URL, "ru.wikisource.org"}
    assert dom["dropped_top"][0] == {"domain": "spam.example", "documents": 2, "top_reasons": [["c4_curly_bracket", 2]]}
    # The HTML references PNGs that exist, and every PNG written is referenced.
    page = (stage_dir / "report.html").read_text()
    srcs = set(re.findall(r'<img src="([^"]+)"', page))
    assert srcs and all((stage_dir / s).is_file() for s in srcs)
    assert {str(p.relative_to(stage_dir)) for p in paths if p.suffix == ".png"} == srcs
    assert "reconciles" in page and "12 = 5 + 3 + 3 + 1" in page


def test_rerun_is_byte_identical_and_mismatch_is_reported(stage_dir):
    first = {p: p.read_bytes() for p in write_report(stage_dir, COUNTS)}
    assert {p: p.read_bytes() for p in write_report(stage_dir, COUNTS)} == first
    write_report(stage_dir, {**COUNTS, "in": 13, "kept": 6})
    rep = json.loads((stage_dir / "report.json").read_text())
    assert rep["outcomes"]["reconciles"] is False and rep["stage_counts_disagree"] == ["kept"]
    assert "DOES NOT reconcile" in (stage_dir / "report.html").read_text()


def test_empty_stage_dir(tmp_path):
    (tmp_path / "data").mkdir()
    write_report(tmp_path, {"in": 0})
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["outcomes"]["reconciles"] is True and rep["duplicates"]["cluster_sizes"] == []


def test_pure_helpers():
    assert log_edges(2, 3) == [100, 158, 251, 398, 631, 1000]
    assert histogram(np.array([1, 100, 150, 5000]), [100, 158, 251]).tolist() == [3, 1]  # outliers go to the end bins
    assert domain_of("https://Example.COM:8080/a?b") == "example.com"
    assert domain_of("") == NO_URL and domain_of(None) == NO_URL
    assert domain_of("not a url") == NO_HOST and domain_of("http://[::1/") == NO_HOST
    from collections import Counter

    assert cluster_sizes(Counter({"a": 1, "b": 1, "c": 4})) == [[2, 2], [5, 1]]
