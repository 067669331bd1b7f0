"""What a run publishes to the Prefect UI opens from the run page in a browser on another machine: markdown,
tables and inline images, never a file:// link."""
from __future__ import annotations

import json

import pytest

from flows import artifacts as art
from pipelines.corpus.report import write_report
from schemas.card import Card
from schemas.manifest import Manifest, write_manifest

COUNTS = {"in": 0, "kept": 0, "dropped": {}, "duplicates": 0, "quarantined": 0}


@pytest.fixture
def published(monkeypatch):
    """Each create_*_artifact call flows.artifacts makes, as (kind, keyword arguments)."""
    calls: list[tuple[str, dict]] = []
    for kind in ("markdown", "table", "image"):
        monkeypatch.setattr(art, f"create_{kind}_artifact", lambda _k=kind, **kw: calls.append((_k, kw)))
    return calls


def _png(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)  # only its bytes are read
    return path


def test_corpus_report_is_markdown_and_inline_plots(tmp_path, published):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_report(corpus, COUNTS)  # an empty stage: every section, no rows
    write_manifest(corpus, Manifest("corpus", {}, counts=COUNTS))
    art.publish_corpus("demo", corpus)
    kinds = {kw["key"]: kind for kind, kw in published}
    assert kinds["demo-corpus-counts"] == "table" and kinds["demo-corpus-report"] == "markdown"
    md = next(kw["markdown"] for _, kw in published if kw["key"] == "demo-corpus-report")
    assert "## Dropped, per reason" in md and "**reconciles**" in md and str(corpus / "report.html") in md
    images = [kw for kind, kw in published if kind == "image"]
    assert images  # outcomes.png at least
    assert {kw["key"] for kw in images} == {f"demo-corpus-{p.stem}" for p in (corpus / "report").glob("*.png")}
    assert all(kw["image_url"].startswith("data:image/png;base64,") for kw in images)
    assert "file://" not in json.dumps(published)


def test_corpus_markdown_tables_the_report(tmp_path):
    rep = {"outcomes": {"in": 12, "kept": 5, "dropped": 3, "duplicates": 3, "quarantined": 1, "accounted": 12,
                        "reconciles": True},
           "dropped_by_reason": {"too_short": 1, "c4_curly_bracket": 2}, "noted": {"pii_email": 3},
           "quarantined_by_reason": {"truncated_record": 1}, "stage_counts_disagree": [],
           "kept_by_language": {"en": {"documents": 4, "characters": 1200, "mean_characters": 300.0, "mean_words": 50.0}},
           "duplicates": {"clusters": 2, "by_kind": {"exact": 1, "near": 2}},
           "domains": {"kept_distinct": 1, "dropped_distinct": 1, "kept_top": [{"domain": "a|b.org", "documents": 4}],
                       "dropped_top": [{"domain": "spam.example", "documents": 2, "top_reasons": [["c4_curly_bracket", 2]]}]}}
    md = art.corpus_markdown(rep, tmp_path)
    assert "12 = 5 + 3 + 3 + 1: **reconciles**" in md
    assert md.index("| c4_curly_bracket | 2 |") < md.index("| too_short | 1 |")  # most frequent first
    assert "| en | 4 | 1,200 | 300.0 | 50.0 |" in md and "| a\\|b.org | 4 |" in md
    assert "| spam.example | 2 | c4_curly_bracket 2 |" in md


def test_card_is_markdown_table_and_inline_plots(tmp_path, published):
    card = tmp_path / "card"
    _png(card / "quality_cost.png")
    (card / "report.json").write_text(json.dumps(Card([], ["quality_cost.png", "gone.png"]).to_dict()))
    (card / "report.md").write_text("# card\n\n![quality_cost](quality_cost.png)\n\n![gone](gone.png)\n")
    art.publish_card("demo", card, {})
    assert [(kind, kw["key"]) for kind, kw in published] == [
        ("markdown", "demo-card"), ("table", "demo-card-table"), ("image", "demo-card-quality-cost")]
    assert str((card / "report.html").resolve()) in published[0][1]["markdown"]
    assert published[2][1]["image_url"].startswith("data:image/png;base64,")
    assert "file://" not in json.dumps(published)
    # the markdown shows its plot inline too (a relative name is a broken image in the UI); a missing file stays a name
    md = published[0][1]["markdown"]
    assert "![quality_cost](data:image/png;base64," in md and "![gone](gone.png)" in md
