"""Pure cores of the corpus stage: readers, decoding, C4 rules, language id, dedup helpers."""
from __future__ import annotations

import codecs
import gzip
import io
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from pipelines.corpus.clean import DROPPED, KEPT, QUARANTINED, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.dedup import (
    band_keys,
    detection_probability,
    estimated_jaccard,
    exact_key,
    lsh_params,
    shingles,
    signatures,
)
from pipelines.corpus.readers import read_file
from pipelines.corpus.steps.c4 import C4Config, clean_line, clean_page
from pipelines.corpus.steps.gopher_quality import GopherQualityConfig
from pipelines.corpus.text import _ODD_SPACES, Decoded, DecodeError, decode_html, identify_language, normalize_text
from schemas.records import Quarantined, RawDocument

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

# Real prose: the opening of the Debian Social Contract and of Tolstoy's "Anna Karenina" (Russian).
EN = ("Debian will remain 100% free. We provide the guidelines that we use to determine if a work is free. "
      "We will support our users who develop and run non-free works on Debian. We will give back to the free "
      "software community. We will not hide problems. We will keep our entire bug report database open for public "
      "view at all times. Reports that people file online will promptly become visible to others.")
RU = ("Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему. "
      "Все смешалось в доме Облонских. Жена узнала, что муж был в связи с бывшею в их доме француженкою-гувернанткой, "
      "и объявила мужу, что не может жить с ним в одном доме.")


def warc_bytes(records: list[tuple[str, bytes, str]]) -> bytes:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    for url, body, ctype in records:
        http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http))
    return buf.getvalue()


def html(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body><main><p>{body}</p></main></body></html>".encode()


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.2], ids=["cut-in-payload", "cut-mid-member", "cut-in-headers"])
def test_warc_reader_yields_documents_and_quarantines_truncated_member(tmp_path, keep):
    first = warc_bytes([("https://a.invalid/1", html(EN), "text/html; charset=utf-8")])
    data = warc_bytes([("https://a.invalid/1", html(EN), "text/html; charset=utf-8"),
                       ("https://a.invalid/2", html(EN * 20), "text/html")])
    second_len = len(data) - len(first)
    path = tmp_path / "x.warc.gz"
    path.write_bytes(data[: len(first) + int(second_len * keep)])  # cut into the second record's gzip member
    recs = list(read_file(str(path)))
    assert isinstance(recs[0], RawDocument) and recs[0].url == "https://a.invalid/1" and recs[0].charset == "utf-8"
    assert isinstance(recs[1], Quarantined) and recs[1].reason.startswith("truncated")
    assert recs[1].offset > 0 and len(recs) == 2


def test_malformed_warc_record_is_quarantined_and_earlier_records_kept(tmp_path):
    import gzip as gz

    first = warc_bytes([("https://a.invalid/1", html(EN), "text/html; charset=utf-8")])
    second = gz.decompress(warc_bytes([("https://a.invalid/2", html(EN), "text/html")]))
    broken = second.replace(b"WARC/1.", b"XXXX/9.", 1)  # the version line of the second record's header
    path = tmp_path / "m.warc.gz"
    path.write_bytes(first + gz.compress(broken))
    recs = list(read_file(str(path)))
    assert isinstance(recs[0], RawDocument) and recs[0].url == "https://a.invalid/1"
    assert isinstance(recs[1], Quarantined) and recs[1].reason == "malformed_warc" and recs[1].offset == len(first)


def test_zero_byte_and_unknown_files_are_quarantined(tmp_path):
    (tmp_path / "empty.warc.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("hello")
    assert [r.reason for r in read_file(str(tmp_path / "empty.warc.gz"))] == ["empty_file"]
    assert [r.reason for r in read_file(str(tmp_path / "notes.txt"))] == ["unsupported_file"]


def test_jsonl_reader_preserves_ids_and_quarantines_bad_lines(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    lines = [json.dumps({"id": "doc-7", "url": "u", "text": EN}), "{not json", json.dumps({"id": "x"}), ""]
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    recs = list(read_file(str(path)))
    assert recs[0].id == "doc-7" and recs[0].text == EN
    assert [(r.reason, r.offset) for r in recs[1:]] == [("invalid_json", 2), ("missing_text", 3)]


def test_decode_prefers_declared_charsets_then_utf8_then_detection():
    koi8 = RU.encode("koi8-r")
    assert decode_html(koi8, "koi8-r") == Decoded(RU, "koi8-r", "http")
    meta = decode_html(b'<meta charset="windows-1251">' + RU.encode("cp1251"), None)
    assert meta.text.endswith(RU) and (meta.charset, meta.method) == ("cp1251", "meta")
    assert decode_html(RU.encode(), None) == Decoded(RU, "utf-8", "default")
    assert decode_html(codecs.BOM_UTF8 + RU.encode(), "koi8-r") == Decoded(RU, "utf-8", "bom")  # the BOM wins, as in browsers
    # Undeclared non-UTF-8: detected.
    assert decode_html(koi8, None) == Decoded(RU, "koi8-r", "detected", "no charset declared and not valid UTF-8 at byte 0")
    # A declaration that does not decode (or names no codec) is recorded and detection decides.
    wrong = decode_html(RU.encode(), "x-unknown-charset")
    assert (wrong.text, wrong.method, wrong.rejected) == (RU, "detected", "http charset 'x-unknown-charset' is unknown")
    wrong = decode_html(koi8, "utf-8")
    assert (wrong.text, wrong.charset, wrong.method) == (RU, "koi8-r", "detected") and "http charset 'utf-8' fails" in wrong.rejected
    # iso-8859-1 is decoded as windows-1252 (WHATWG): 0x93/0x94 are curly quotes, not C1 controls.
    assert decode_html(b"\x93free\x94", "ISO-8859-1").text == "\u201cfree\u201d"


def test_decode_quarantines_bytes_no_web_encoding_explains():
    # Real binary bytes: the start of a gzip member of a sample WARC file.
    data = (SAMPLES / "crawl" / "broken-000.warc.gz").read_bytes()[:3000]
    with pytest.raises(DecodeError, match="not valid UTF-8 .* finds no web encoding"):
        decode_html(data, None)


def test_c4_line_rules():
    cfg = C4Config()
    assert clean_line("We will support our users who develop free works.", cfg)
    assert clean_line("Too short line.", cfg) is None
    assert clean_line("This line has no terminal punctuation at all here", cfg) is None
    assert clean_line("Please enable JavaScript to view this site properly.", cfg) is None
    assert clean_line("Read our privacy policy before you use this site.", cfg) is None
    assert clean_line("Wait for it and then see what happens next...", cfg) is None
    assert clean_line("Debian is a free operating system [1] for your computer.", cfg) == \
        "Debian is a free operating system  for your computer."


def test_c4_page_rules():
    cfg = C4Config(min_chars=50)
    assert clean_page(EN, cfg)[0] is not None
    assert clean_page("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " + EN, cfg) == (None, "c4_lorem_ipsum")
    assert clean_page(EN + "\nThe call int main() { return 0; } is valid C.", cfg) == (None, "c4_curly_bracket")
    # off: the page stays, the code line (no terminal punctuation) goes
    code_page = EN + "\nint main() { return 0; }"
    kept = clean_page(code_page, C4Config(min_chars=50, curly_bracket=False))[0]
    assert kept is not None and "{" not in kept
    assert clean_page("One sentence only, with enough words in it.", cfg) == (None, "c4_too_few_sentences")
    assert clean_page("menu\nhome\nabout", cfg) == (None, "c4_no_lines_left")


def _normalize_reference(text: str) -> str:
    """normalize_text as the split/strip/join it is defined by (its slow path, for every text)."""
    import re
    import unicodedata

    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub("[ \t\u00a0\u2000-\u200b\u3000]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(ln.strip() for ln in text.split("\n"))).strip("\n")


def test_normalize_fast_path_equals_the_definition_on_real_pages():
    """Pages with only single spaces and newlines take four replaces instead of split/strip/join;
    the result must be the same on every sample-crawl page, raw and once normalised, and on edges."""
    from pipelines.corpus.text import html_to_text

    texts = []
    for path in sorted((SAMPLES / "crawl").glob("*.warc.gz")):
        for rec in read_file(str(path)):
            if isinstance(rec, RawDocument) and rec.html:
                try:
                    texts.append(html_to_text(decode_html(rec.html, rec.charset).text))
                except DecodeError:
                    continue
    assert len(texts) > 1000
    edges = [" a", "a ", " ", "\n \n", "a \n b", "a\n \n\n \nb", "x\u200by", "x\x0cy", "x\x1c\ny", "\u3000a", "a\u2028b",
             "a\x85b", " \n a \n ", "a\r\n b", "e\u0301 x", ""]
    fast = 0
    for t in [*texts, *[_normalize_reference(t) + " \n" for t in texts], *edges]:
        assert normalize_text(t) == _normalize_reference(t), repr(t[:80])
        t = unicodedata.normalize("NFC", t)
        fast += "  " not in t and not any(c in t for c in _ODD_SPACES)
    assert fast > len(texts)  # the fast path did run
    # every character str.strip strips (but "\n" and " "), and U+200B, sends a text down the slow path
    assert set(_ODD_SPACES) == {chr(c) for c in range(0x110000) if chr(c).isspace()} - {" ", "\n"} | {"\u200b"}


def test_normalize_and_language_id():
    # Spaces fold, lines are trimmed, and any run of blank lines becomes one paragraph break.
    assert normalize_text("  a\u00a0 b \r\n\r\n\n c \n d\n \n\t\n") == "a b\n\nc\nd"
    assert normalize_text("\n\n x \n\n\n\ny\n") == "x\n\ny"
    assert identify_language(EN)[0] == "en"
    lang, p = identify_language(RU)
    assert lang == "ru" and p > 0.9


def test_process_document_paths():
    cfg = CorpusConfig(input=["x"], output="y", c4=C4Config(min_chars=50))
    ok = RawDocument("1", "u", "f", 0, html=html(EN.replace(". ", ".</p><p>")), charset="utf-8")
    status, rec = process_document(ok, cfg)
    assert status == KEPT and rec["language"] == "en" and "free software community" in rec["text"]
    assert process_document(RawDocument("2", "u", "f", 0, html=b"\x89PNG", content_type="image/png"), cfg)[0] == DROPPED
    undeclared = RawDocument("3", "u", "f", 0, html=html(RU.replace(". ", ".</p><p>")).decode().encode("koi8-r"))
    short_ok = CorpusConfig(input=["x"], output="y", c4=C4Config(min_chars=50), gopher_quality=GopherQualityConfig(min_words=30))
    status, rec = process_document(undeclared, short_ok)  # 45 words: under Gopher's 50
    assert status == KEPT and rec["language"] == "ru" and "Облонских" in rec["text"]
    binary = RawDocument("5", "u", "f", 0, html=(SAMPLES / "crawl" / "broken-000.warc.gz").read_bytes()[:3000])
    status, q = process_document(binary, cfg)
    assert status == QUARANTINED and q.reason == "undecodable" and "no web encoding" in q.detail
    status, (_, reason, _) = process_document(RawDocument("4", "u", "f", 0, html=html(RU)), CorpusConfig(input=["x"], output="y", languages=["en"], c4=C4Config(min_chars=50)))
    assert (status, reason) == (DROPPED, "language_not_kept")
    status, (_, reason, language) = process_document(RawDocument("6", "u", "f", 0, html=html(RU)), cfg)  # auto: every language
    assert (status, reason, language) == (DROPPED, "gopher_word_count", "ru")  # passes the step; the page's language
    status, (_, reason, language) = process_document(RawDocument("7", "u", "f", 0, text=" "), cfg)  # stays on the row
    assert (status, reason, language) == (DROPPED, "empty_text", None)


def test_exact_key_folds_case_spacing_and_punctuation():
    assert exact_key("Hello,  World!") == exact_key("hello world")
    assert exact_key("hello world") != exact_key("hello there world")


def test_minhash_finds_near_duplicates_and_separates_different_texts():
    a = EN + " We will keep our priorities on the users."
    b = EN + " We will keep our priorities on our users."
    sig = signatures([a, b, RU], num_perm=128, n=5)
    assert sig.shape == (3, 128)
    true_j = len(set(shingles(a)) & set(shingles(b))) / len(set(shingles(a)) | set(shingles(b)))
    assert abs(estimated_jaccard(sig[0], sig[1]) - true_j) < 0.15
    assert estimated_jaccard(sig[0], sig[2]) < 0.1
    bands, rows = lsh_params(0.8, 128)
    assert bands * rows <= 128 and detection_probability(0.8, bands, rows) > 0.9
    keys_a, keys_c = band_keys(sig[0], bands, rows), band_keys(sig[2], bands, rows)
    assert len(keys_a) == bands and not set(keys_a) & set(keys_c)
    assert np.array_equal(signatures([a], 128, 5), signatures([a], 128, 5))


def test_every_filter_family_can_be_switched_off_for_dedup_only_runs():
    from pipelines.corpus.steps.c4 import C4Config as C4
    from pipelines.corpus.steps.fineweb import FineWebConfig
    from pipelines.corpus.steps.gopher_quality import GopherQualityConfig
    from pipelines.corpus.steps.gopher_repetition import GopherRepetitionConfig

    cfg = CorpusConfig(input=["-"], output="-", language_id=False, c4=C4(enabled=False),
                       gopher_repetition=GopherRepetitionConfig(enabled=False),
                       gopher_quality=GopherQualityConfig(enabled=False), fineweb=FineWebConfig(enabled=False))
    short = RawDocument(id="t", url="", source="s", offset=0, text="Все смешалось в доме Облонских")  # fails C4 and Gopher
    status, rec = process_document(short, cfg)
    assert status == KEPT and rec["language"] == "und" and rec["text"] == short.text
    assert process_document(short, CorpusConfig(input=["-"], output="-"))[0] == DROPPED


def test_a_page_over_the_cleaning_budget_is_quarantined_as_too_slow(monkeypatch):
    """Issue 50: a page whose cleaning goes over `document_seconds` is quarantined with its size and the step it was
    in, counted like every quarantine; the next page gets a budget of its own, and 0 switches the budget off. The
    clock is this test's (each reading one second later), so the outcome does not depend on the machine."""
    from pipelines.corpus import budget
    from tests.fixtures import vader_texts

    prose = "\n\n".join(vader_texts("nytEditorialSnippets", 60))
    doc = RawDocument("c", "http://example.com/c", "f", 7, text=prose)
    cfg = CorpusConfig(input=["x"], output="o", document_seconds=2.5, language_id=False)
    assert process_document(doc, cfg)[0] == KEPT  # the real clock: well under the budget
    now = iter(range(10**6))
    monkeypatch.setattr(budget.time, "monotonic", lambda: next(now))
    status, q = process_document(doc, cfg)
    assert status == QUARANTINED and isinstance(q, Quarantined) and q.reason == "too_slow", (status, q)
    assert (q.source, q.offset, q.id) == ("f", 7, "c") and f"{len(normalize_text(prose))} characters" in q.detail
    assert "document_seconds 2.5 in step " in q.detail
    assert getattr(budget._state, "deadline", None) is None  # no budget left running after the document
    off = CorpusConfig(input=["x"], output="o", document_seconds=0, language_id=False)
    assert process_document(doc, off)[0] == KEPT
    with pytest.raises(ValueError, match="document_seconds must be >= 0"):
        CorpusConfig(input=["x"], output="o", document_seconds=-1)


def test_the_word_splitter_reads_the_budget_inside_a_long_step(monkeypatch):
    """A page of crafted affixes in no periodic order (`<[(<{>...x`: one affix a character) is stopped inside the step
    that splits it, not after it: the splitter ticks the budget every CYCLE_EVERY passes of a long chunk (every
    RUN_LOOK prefixes once its suffixes are done; a run of one-character prefixes is one scan, and one tick), every
    pass of its last few dozen characters and every new chunk."""
    import random

    from pipelines.corpus import budget
    from pipelines.corpus.words import EnglishWords, english

    rnd = random.Random(0)
    page = " ".join("".join(rnd.choice("<>([{") for _ in range(900)) + f"x{rnd.randrange(10**9)}" for _ in range(50))
    fresh = EnglishWords.__new__(EnglishWords)
    fresh.__dict__.update(english().__dict__)
    fresh._cache, fresh._last = {}, (None, [])
    ticks = []
    monkeypatch.setattr(budget, "tick", lambda: ticks.append(1))
    fresh.tokens(page)
    assert len(ticks) >= 50 * 3  # a chunk's own, its prefix run's and those of spaCy's loop for the last characters
    monkeypatch.undo()
    budget.start(1e-9)
    try:
        with pytest.raises(budget.TooSlow):
            fresh._cache = {}
            fresh._last = (None, [])
            fresh.tokens(page)
    finally:
        budget.stop()
