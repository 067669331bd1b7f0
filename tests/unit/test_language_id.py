"""The numpy feature walk (pipelines/corpus/language_id.py) against py3langid's own, on the sample
crawl's real pages: the same features in the same order, the same counts, the same scores."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from py3langid.langid import _load_identifier, visit_counts

from pipelines.corpus.language_id import load
from pipelines.corpus.readers import read_file
from pipelines.corpus.text import decode_html, html_to_text, normalize_text
from schemas.records import RawDocument

CRAWL = Path(__file__).resolve().parents[2] / "samples" / "crawl"


@pytest.fixture(scope="module")
def identifiers():
    return _load_identifier(norm_probs=True), load()


def crawl_texts() -> list[str]:
    out = []
    for path in sorted(CRAWL.glob("*.warc.gz")):
        for rec in read_file(str(path)):
            if isinstance(rec, RawDocument) and rec.html:
                try:
                    out.append(normalize_text(html_to_text(decode_html(rec.html, rec.charset).text))[:2000])
                except Exception:  # noqa: BLE001 - undecodable pages are the quarantine's test, not this one
                    continue
    return out


def test_walk_is_used_and_finds_the_model_depth(identifiers):
    _, fast = identifiers
    assert hasattr(fast, "feature_counts"), "py3langid's internals changed: the numpy walk was not installed"
    assert fast._depth == 6  # py3langid 0.4's model; a new model is still exact, whatever its depth


def test_same_features_counts_and_scores_on_real_pages(identifiers):
    ref, fast = identifiers
    texts = crawl_texts()
    assert len(texts) > 1000
    langs = set()
    # short and edge inputs too: no byte, one byte, fewer bytes than the trie is deep, upper case
    for text in [*texts, "", "a", "ab", "Ж", "ALL CAPS HEADLINE", "\u00a0"]:
        data = ref._encode(text)
        want = visit_counts(ref.tk_nextmove, ref._rowbase, ref.tk_output, data) or {}
        idx, counts = fast.feature_counts(data)
        assert idx.tolist() == list(want.keys()) and counts.tolist() == list(want.values()), text[:80]
        assert np.array_equal(fast._decide(text), ref._decide(text)), text[:80]
        langs.add(fast.classify(text)[0])
    assert {"en", "ru"} <= langs


def test_restricting_languages_keeps_the_scores_equal(identifiers):
    ref, _ = identifiers
    fast = load()
    texts = crawl_texts()[:200]
    for ident in (ref, fast):
        ident.set_languages(["en", "de", "ru"])
    try:
        assert [fast.classify(t) for t in texts] == [ref.classify(t) for t in texts]
    finally:
        ref.set_languages(None)


def test_model_unpacked_once_into_the_cache(identifiers, tmp_path, monkeypatch):
    ref, _ = identifiers
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = load()
    (unpacked,) = (tmp_path / "lmforge" / "py3langid").glob("model-*.npz")
    stamp = unpacked.stat().st_mtime_ns
    second = load()
    assert unpacked.stat().st_mtime_ns == stamp  # read, not written again
    texts = crawl_texts()[:100]
    assert [first.classify(t) for t in texts] == [second.classify(t) for t in texts] == [ref.classify(t) for t in texts]
