"""The word-cache encoder (`pipelines.shards.fast_encode`) gives HF tokenizers' exact ids and word
starts, on the real crawl pages of samples/ (English, Russian, the chardet pages in KOI8-R, cp1251,
Big5, Shift-JIS, ...) and on the characters where Python's Unicode tables and the `tokenizers`
crate's disagree; `rows.DocEncoder` checks it against HF tokenizers and stops on a difference."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.shards.fast_encode import WordCacheEncoder, composition_seconds, nfc_inert, why_not
from pipelines.shards.packing import word_starts
from pipelines.shards.rows import DocEncoder, load_tokenizer

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "crawl"

EDGE = [
    "", "   ", "\n\n", "word", "[SEP] [CLS] [MASK] [PAD] are text here",
    "cafe\u0301 and caf\u00e9, e\u0301\u0301 \u0301leading mark",  # decomposed accents NFC composes
    "\u0439\u043e\u0434 \u0438\u0306\u043e\u0434 \u0451\u0436 \u0435\u0308\u0436",  # Russian й/ё, precomposed and not
    "\u0643\u064e\u062a\u064e\u0628\u064e \u0627\u0644\u0652\u0643\u0650\u062a\u064e\u0627\u0628\u064f",  # Arabic harakat
    "\u1100\u1161\u11a8 \ud55c\uad6d\uc5b4 \u0b92\u0bd7 \u0b95\u0bbe",  # Hangul jamo compose; Tamil vowel sign
    "\u1c1c\u001d mid\u001e\u001fcontrol", "a\x00b \ufffd c", "tab\tnew\nline\rcr\x0bvt\x0cff",
    "nbsp\u00a0here\u2003em\u3000ideo\u200bzero\u200dzwj\u2028ls\u2029ps\u0085nel",
    "\u166d\u111c9 \u061d\u09fd\u0a76\u2e43\u2e52 x\u166dy",  # punctuation in one Unicode version only
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\u4e2d\u6587\uff0c\u6807\u70b9\uff01",
    "emoji \U0001f600\U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467 flag \U0001f1fa\U0001f1e6",
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101 + " " + "\u0439" * 150,  # max_input_chars_per_word = 100
    "$100 + 5% = <b>bold</b> ~tilde~ `code` ^caret^ |pipe| \\back\\ {brace} _under_ @at #hash &amp;",
    "\U00010ead\U00011c00 \U000e0001tag \U0010ffff last",  # astral; unassigned and private use
]


def crawl_texts() -> list[str]:
    """Pages of the sample crawl: every chardet page (21 charsets) and news page, the first 100
    and 150 Debian documentation pages of two files (English and Russian), each as extracted text and, for the first
    few of each file, as decoded HTML too; and the real Common Crawl WET fixture's records."""
    from pipelines.corpus.readers import read_file
    from pipelines.corpus.text import DecodeError, decode_html, html_to_text
    from schemas.records import RawDocument

    texts = []
    for name, pages, with_html in (("encodings-000", 21, 21), ("news-000", 30, 1), ("debian-docs-000", 100, 10),
                                   ("debian-docs-001", 150, 10)):
        docs = [d for d in read_file(str(SAMPLES / f"{name}.warc.gz"), {}) if isinstance(d, RawDocument) and d.html]
        for i, doc in enumerate(docs[:pages]):
            try:
                html = decode_html(doc.html, doc.charset).text
            except DecodeError:
                continue
            texts += [html_to_text(html)] + ([html] if i < with_html else [])
    wet = next(SAMPLES.glob("commoncrawl/*.warc.wet"))
    texts += [d.text for d in read_file(str(wet), {}) if isinstance(d, RawDocument) and d.text]
    return texts


@pytest.fixture(scope="module")
def texts() -> list[str]:
    out = crawl_texts()
    assert len(out) > 300, f"expected the sample crawl's pages, found {len(out)} texts"
    return out


@pytest.fixture(scope="module")
def wordpiece(texts, tmp_path_factory):
    """The tokenizer stage's wordpiece family (NFC + Strip, BertPreTokenizer), trained on half the pages."""
    from pipelines.tokenizer import build

    tok, trainer = build("wordpiece", 3000, min_frequency=2)
    tok.train_from_iterator(texts[::2], trainer)
    path = tmp_path_factory.mktemp("wordpiece") / "tokenizer.json"
    tok.save(str(path))
    return load_tokenizer(path)


def load_tokenizer_from(tok, path: Path):
    tok.save(str(path))
    return load_tokenizer(path)


def hf(tok, texts: list[str]) -> tuple[list[list[int]], list[np.ndarray]]:
    encs = tok.encode_batch(texts, add_special_tokens=False)
    return [e.ids for e in encs], [word_starts(e.word_ids) for e in encs]


def fast(enc: WordCacheEncoder, texts: list[str], chunk: int) -> tuple[list[list[int]], list[np.ndarray]]:
    ids, starts = [], []
    for a in range(0, len(texts), chunk):
        flat, lens, st = enc.encode(texts[a:a + chunk], with_words=True)
        cuts = np.cumsum(lens)[:-1]
        ids += [x.tolist() for x in np.split(flat, cuts)]
        starts += np.split(st, cuts)
        assert flat.dtype == np.int32 and len(lens) == len(texts[a:a + chunk])
    return ids, starts


def assert_same(tok, texts: list[str], chunk: int = 97, want=None) -> WordCacheEncoder:
    enc = WordCacheEncoder(tok)
    want_ids, want_words = want or hf(tok, texts)
    got_ids, got_words = fast(enc, texts, chunk)
    for i, t in enumerate(texts):
        assert got_ids[i] == want_ids[i], f"text {i} ({t[:60]!r}): ids differ"
        assert np.array_equal(got_words[i], want_words[i]), f"text {i} ({t[:60]!r}): word starts differ"
    return enc


@pytest.fixture(scope="module")
def reference(wordpiece, texts):
    """HF tokenizers' ids and word starts of the pages (computed once: the slow side)."""
    return hf(wordpiece, texts)


def test_same_ids_and_word_starts_as_hf_on_the_sample_crawl(wordpiece, texts, reference):
    enc = assert_same(wordpiece, texts, want=reference)
    assert enc.distinct_words > 1000 and enc.distinct_chunks > enc.distinct_words
    assert {c for c in enc.char_class if c > 0x400}, "the sample crawl has non-Latin pages"


def test_same_ids_on_edge_cases_alone_and_mixed_into_pages(wordpiece, texts):
    assert_same(wordpiece, EDGE, chunk=1)
    assert_same(wordpiece, EDGE + texts[-60:] + EDGE[::-1], chunk=7)


def test_a_normalizer_other_than_nfc_goes_through_normalize_str(texts, tmp_path):
    """tests.fixtures's tokenizer lowercases and strips accents (BertNormalizer): still exact."""
    from tests.fixtures import make_tokenizer

    tok = load_tokenizer(make_tokenizer(tmp_path, 800, texts[:100]) / "tokenizer.json")
    enc = assert_same(tok, texts[:60] + EDGE)
    assert not enc.nfc_only


def test_nfc_inert_characters():
    assert nfc_inert(ord("a")) and nfc_inert(0x439) and nfc_inert(0xE9)  # й and é are their own NFC
    assert not nfc_inert(0x301) and not nfc_inert(0x64E)  # combining marks
    assert not nfc_inert(0x1161) and not nfc_inert(0xBD7)  # compose with the letter before, class 0
    assert not nfc_inert(0x212B)  # ANGSTROM SIGN: NFC maps it to Å
    assert not nfc_inert(0x0378)  # unassigned
    assert 0x0306 in composition_seconds() and 0x0BBE in composition_seconds()


METASPACE_EDGE = ["a  b", " a", "a ", "  ", " ", "\u2581", "\u2581a b", "x \u2581y", "a\tb\nc d", "x\u2581\u2581y  z ",
                  " \u2581lead", "trail  ", "\u00a0nbsp \u3000ideo"]


@pytest.mark.parametrize("model,kind", [("unigram", "metaspace"), ("bpe", "metaspace"), ("byte_bpe", "bytelevel")])
def test_other_families_same_ids_and_word_starts(texts, tmp_path, model, kind):
    """unigram (T5) and character BPE: Metaspace (prepend_scheme always) after NFC; byte-level BPE
    (RoBERTa/GPT-2): GPT-2's regex over the raw text, each word as its bytes' characters."""
    from pipelines.tokenizer import build

    tok, trainer = build(model, 4000, min_frequency=2)  # unigram keeps every character of the CJK pages
    tok.train_from_iterator(texts[::6], trainer)
    tok.save(str(tmp_path / "t.json"))
    tok = load_tokenizer(tmp_path / "t.json")
    enc = assert_same(tok, texts + EDGE + METASPACE_EDGE)
    assert enc.kind == kind and (enc.nfc_only or model == "byte_bpe")
    assert_same(tok, METASPACE_EDGE + EDGE, chunk=1)


def test_tokenizers_it_cannot_reproduce_are_refused_with_the_reason(wordpiece, tmp_path):
    from tokenizers.pre_tokenizers import ByteLevel, Metaspace, Whitespace

    from pipelines.tokenizer import build

    byte_bpe, trainer = build("byte_bpe", 300, min_frequency=1)
    byte_bpe.train_from_iterator(["some text to train on"] * 5, trainer)
    assert "encode_special_tokens" in why_not(byte_bpe)  # as built: "<s>" in a text would become the token
    byte_bpe = load_tokenizer_from(byte_bpe, tmp_path / "byte_bpe.json")
    assert why_not(byte_bpe) is None
    prefixed = load_tokenizer_from(byte_bpe, tmp_path / "prefixed.json")
    prefixed.pre_tokenizer = ByteLevel(add_prefix_space=True)
    assert "add_prefix_space" in why_not(prefixed)
    other = load_tokenizer_from(byte_bpe, tmp_path / "other.json")
    other.pre_tokenizer = Whitespace()
    assert "pre-tokenizer is Whitespace" in why_not(other)
    assert WordCacheEncoder.for_tokenizer(other) is None
    with pytest.raises(ValueError, match="cannot reproduce"):
        WordCacheEncoder(other)
    first = load_tokenizer_from(byte_bpe, tmp_path / "first.json")
    first.pre_tokenizer = Metaspace(prepend_scheme="first")
    assert "prepend_scheme='first'" in why_not(first)
    path = tmp_path / "t.json"
    wordpiece.save(str(path))
    added = load_tokenizer(path)
    added.add_tokens(["foo bar"])
    assert "non-special added tokens" in why_not(added)
    quoted = load_tokenizer(path)
    quoted.encode_special_tokens = False
    assert "encode_special_tokens" in why_not(quoted)
    assert DocEncoder(added).cache is None and DocEncoder(added).why_slow


def test_doc_encoder_matches_hf_and_stops_on_a_difference(wordpiece, texts, reference, monkeypatch):
    names = [f"doc-{i}" for i in range(len(texts))]
    enc = DocEncoder(wordpiece, check_every=50)
    fast_ids, fast_words = enc(texts, True, names)
    assert enc.checked == len(range(0, len(texts), 50))
    assert [list(x) for x in fast_ids] == reference[0]
    assert all(np.array_equal(a, b) for a, b in zip(fast_words, reference[1]))
    slow = DocEncoder(wordpiece, fast=False)
    assert slow.why_slow == "fast_encode is off" and [list(x) for x in slow(texts[:40], False)[0]] == reference[0][:40]

    enc = DocEncoder(wordpiece, check_every=5)  # checks texts 0 and 5 of a batch of 6
    real = enc.cache.encode

    def off_by_one(batch, with_words=False):
        flat, lens, starts = real(batch, with_words)
        flat = flat.copy()
        flat[-1] += 1  # the last token of the batch: text 5's
        return flat, lens, starts

    monkeypatch.setattr(enc.cache, "encode", off_by_one)
    batch = [t for t in texts if t.strip()][:6]
    with pytest.raises(RuntimeError, match=r"disagree on document doc-5 \(token .*--no-fast-encode"):
        enc(batch, False, names[:6])
    ids, _ = DocEncoder(wordpiece, check_every=0)(batch, False)  # unchecked: nothing compares
    assert len(ids) == 6


def test_a_full_cache_starts_over_and_stays_exact(wordpiece, texts, reference):
    enc = WordCacheEncoder(wordpiece, max_chunks=500)
    got_ids, got_words = fast(enc, texts, 40)
    assert enc.resets > 3 and enc.distinct_chunks < 500 + 40 * 2000
    assert got_ids == reference[0]
    assert all(np.array_equal(a, b) for a, b in zip(got_words, reference[1]))
