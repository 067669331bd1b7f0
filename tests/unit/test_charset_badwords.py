"""Charset detection on chardet's real legacy-encoding pages, and the C4 bad-words page rule.

Pages come from samples/crawl/encodings-000.warc.gz (21 pages from chardet 5.2.0's test suite;
samples/manifest.tsv records each page's true charset) and tests/data/tiny. Bad-words cases are
real sentences: GIMP help, the installation guide, the KJV Bible, newspaper4k's news pages,
and one line of fortunes-ru (licences in samples/licenses).
"""
from __future__ import annotations

import argparse
import codecs
import re
from pathlib import Path

import pytest

from common.config import add_config_args, config_from_args
from pipelines.corpus.clean import DROPPED, KEPT, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.readers import read_file
from pipelines.corpus.steps.c4 import C4Config, bad_words_regex, has_bad_words
from pipelines.corpus.text import decode_html, detect_charset
from schemas.records import RawDocument

ROOT = Path(__file__).resolve().parents[2]
ENCODINGS = ROOT / "samples" / "crawl" / "encodings-000.warc.gz"
TINY = ROOT / "tests" / "data" / "tiny" / "tiny.warc.gz"
URL = "https://chardet-tests.invalid/"


@pytest.fixture(scope="module")
def legacy() -> dict[str, tuple[RawDocument, str]]:
    """path under chardet's tests/ -> (record, true Python codec from samples/manifest.tsv)."""
    truth = {}
    for line in (ROOT / "samples" / "manifest.tsv").read_text().splitlines():
        f = line.split("\t")
        if f[0] == ENCODINGS.name:
            truth[f[1]] = re.search(r"\(true charset: (\S+)\)", f[-1]).group(1)
    docs = {d.url[len(URL):]: (d, truth[d.url]) for d in read_file(str(ENCODINGS)) if isinstance(d, RawDocument)}
    assert len(docs) == 21
    return docs


# A real phrase of each page, in its script (samples/crawl: the chardet pages).
KNOWN_WORDS = [
    ("KOI8-R/_ude_1.txt", "В гимназии он не был в числе первых учеников"),
    ("windows-1251-russian/_ude_1.txt", "В гимназии он не был в числе первых учеников"),
    ("IBM866/_ude_1.txt", "В гимназии он не был в числе первых учеников"),
    ("MacCyrillic/_ude_1.txt", "В гимназии он не был в числе первых учеников"),
    ("iso-8859-5-russian/_chromium_ISO-8859-5_with_no_encoding_specified.html", "РИА Новости"),
    ("windows-1251-russian/_chromium_windows-1251_with_no_encoding_specified.html", "РИА Новости"),
    ("KOI8-R/_chromium_KOI8-R_with_no_encoding_specified.html", "РИА Новости"),
    ("windows-1252/_mozilla_bug421271_text.html", "not bad for a £2 bet"),
    ("iso-8859-1/_ude_2.txt", "dépend à la fois de la durée"),
    ("iso-8859-7-greek/_ude_1.txt", "διαδικτυακός"),
    ("iso-8859-9-turkish/wikitop_tr_ISO-8859-9.txt", "Türkiye'nin en kalabalık"),
    ("windows-1250-polish/_ude_1.txt", "Naukowcy zauważyli"),
    ("windows-1255-hebrew/_ude_he2.txt", "העברית היא שפה"),
    ("windows-1256-arabic/_chromium_windows-1256_with_no_encoding_specified.html", "كتائب الشهيد"),
    ("SHIFT_JIS/_ude_2.txt", "コンソール アプリケーション"),
    ("SHIFT_JIS/_chromium_Shift-JIS_with_no_encoding_specified.html", "衆院議院運営委員会"),
    ("EUC-JP/_ude_1.txt", "コンソール アプリケーション"),
    ("EUC-KR/_ude_euc2.txt", "북조선 사람들은"),
    ("Big5/_ude_1.txt", "維基大典"),
    ("GB2312/_mozilla_bug171813_text.html", "搜狐在线"),
]


@pytest.mark.parametrize("path, words", KNOWN_WORDS, ids=[p.split("/")[0] for p, _ in KNOWN_WORDS])
def test_undeclared_legacy_pages_decode_to_readable_text(legacy, path, words):
    # The HTTP charset is withheld: every page is read as an undeclared page would be.
    doc, _ = legacy[path]
    got = decode_html(doc.html, None)
    assert words in got.text and got.method == "detected", (path, got.charset)


def test_detection_accuracy_on_all_chardet_pages(legacy):
    """Detection alone (every declaration ignored) against the true charset, over all 21 pages.

    Exact: the decoded text equals the true charset's text. 19/21 with charset-normalizer 3.5.2:
    the Czech ISO-8859-2 page comes out as windows-1250 (31 of 2,154 characters wrong: ž->ľ,
    š->ą, ť->»), and one Shift_JIS page as cp932, the superset browsers use for Shift_JIS, which
    maps one byte pair to U+FF0D instead of U+2212 (a minus sign).
    """
    exact = {p for p, (d, true) in legacy.items() if decode_html(d.html, None).text == d.html.decode(true)}
    missed = sorted(set(legacy) - exact)
    print(f"charset detection: {len(exact)}/{len(legacy)} pages decode exactly as with their true charset; missed {missed}")
    assert len(exact) >= 19, missed
    czech = legacy["iso-8859-2-czech/_ude_1.txt"][0]
    assert detect_charset(czech.html) == "cp1250"  # the known miss; with its header it decodes right
    assert decode_html(czech.html, czech.charset).text.startswith("Už týdny cloumá českou veřejností")
    # With the headers the WARC carries, every page decodes exactly.
    assert all(decode_html(d.html, d.charset).text == d.html.decode(true) for d, true in legacy.values())


def test_the_two_undeclared_records_are_decoded_not_quarantined(legacy):
    for path, codec in (("KOI8-R/_chromium_KOI8-R_with_no_encoding_specified.html", "koi8-r"),
                        ("windows-1252/_mozilla_bug421271_text.html", "cp1252")):
        doc, _ = legacy[path]
        assert doc.charset is None
        got = decode_html(doc.html, doc.charset)
        assert (got.charset, got.method) == (codec, "detected")
        assert got.rejected.startswith("no charset declared and not valid UTF-8")
        assert process_document(doc, CorpusConfig(input=["x"], output="y"))[0] != "quarantined"


def test_a_wrong_declaration_falls_back_to_detection(legacy):
    # The KOI8-R page sent as UTF-8: strict UTF-8 fails, the failure is recorded, detection reads it.
    doc, _ = legacy["KOI8-R/_ude_1.txt"]
    got = decode_html(doc.html, "utf-8")
    assert (got.charset, got.method) == ("koi8-r", "detected")
    assert got.rejected.startswith("http charset 'utf-8' fails at byte ")
    assert "В гимназии" in got.text
    # A BOM outranks the header, as in browsers.
    assert decode_html(codecs.BOM_UTF8 + got.text.encode(), "koi8-r").text == got.text


# ---------------------------------------------------------------------------------------------
# C4 bad words
# ---------------------------------------------------------------------------------------------

def test_bad_words_lists_ship_with_their_source():
    data = ROOT / "pipelines" / "corpus" / "data" / "badwords"
    assert {"en.txt", "ru.txt", "SOURCE.md", "LICENSE"} <= {f.name for f in data.iterdir()}
    assert "naughty-words` 1.2.0" in (data / "SOURCE.md").read_text()
    assert "Attribution 4.0 International" in (data / "LICENSE").read_text()
    assert len((data / "en.txt").read_text().splitlines()) == 403
    assert bad_words_regex("en") is bad_words_regex("en")  # compiled once per process
    assert bad_words_regex("fr").search("tabarnak")  # only in fr-CA-u-sd-caqc.txt, which joins fr.txt
    assert bad_words_regex("xx") is None and not has_bad_words("anything at all", "xx")


def test_bad_words_match_whole_words_and_phrases_after_lowercasing():
    # GIMP help, "How to Report a Bug": "classic" holds "ass" but is not the word.
    assert not has_bad_words("The classic totally useless bug report is, GIMP crashes.", "en")
    assert has_bad_words("The classic totally useless bug report is, GIMP crashes. This program sucks.", "en")
    # Matthew 21:2 (KJV): C4's rule is blunt, and drops scripture with the rest.
    assert has_bad_words("Go into the village over against you, and straightway ye shall find an ass tied, "
                         "and a colt with her: loose them, and bring them unto me.", "en")
    # A listed word inside a path is still flanked by non-word characters (installation guide, fstab).
    assert has_bad_words("/dev/xxx / ext3 defaults 0 1", "en")
    # fortunes-ru 1.52 (file 2002.11, Евгений Кащеев): "голый" is listed, the inflected "голым" is not.
    assert not has_bad_words("Равенство! Голым народом", "ru")
    assert has_bad_words("Равенство! Голым народом должен править голый король.", "ru")
    # A listed phrase (fortunes-ru 2002.08), matched across its space and at the start of the text.
    assert has_bad_words("Какая разница, сколько людей видело летающие тарелки, если этого не может быть.", "ru")
    assert not has_bad_words("Все счастливые семьи похожи друг на друга.", "ru")  # Tolstoy
    # The Russian list is not applied to English and vice versa.
    assert not has_bad_words("Равенство! Голым народом должен править голый король.", "en")


def test_languages_without_spaces_match_substrings():
    # China Daily, via newspaper4k's test pages: 建设性 ("constructive") contains 性, which the zh
    # list holds; TFDS matches ja/th/zh anywhere, so this sentence counts as a bad-words hit.
    sentence = "阿克拉姆认为，媒体应该发挥更具建设性的作用。"
    assert has_bad_words(sentence, "zh")
    assert bad_words_regex("zh").search(sentence).group(0) == "性"


def tiny_page(suffix: str) -> RawDocument:
    (doc,) = [d for d in read_file(str(TINY)) if isinstance(d, RawDocument) and d.url.endswith(suffix)]
    return doc


def test_bad_words_rule_runs_after_language_id_in_process_document():
    doc = tiny_page("gimp-help-en.docs.invalid/gimp-bug-report.html")  # "This program sucks."
    cfg = CorpusConfig(input=["x"], output="y")
    assert process_document(doc, cfg) == (DROPPED, (doc, "c4_bad_words", "en"))
    status, rec = process_document(doc, CorpusConfig(input=["x"], output="y", c4=C4Config(bad_words=False)))
    assert status == KEPT and "This program sucks." in rec["text"]
    # A language not kept is dropped as such before the list is consulted.
    assert process_document(doc, CorpusConfig(input=["x"], output="y", languages=["ru"]))[1][1] == "language_not_kept"


def test_bad_words_is_a_flag():
    p = argparse.ArgumentParser()
    add_config_args(p, CorpusConfig)
    c = config_from_args(CorpusConfig, p.parse_args(["--input", "x", "--output", "y", "--no-c4-bad-words"]))
    assert c.c4.bad_words is False and C4Config().bad_words and C4Config(variant="paper").bad_words


def test_the_trie_expression_decides_as_the_flat_alternation():
    """base.trie_regex is the flat alternation's language: around every entry of five languages' lists
    (whole, cut short, run on into other letters), both expressions find the same pages."""
    import random
    import re
    import unicodedata
    from importlib import resources

    from pipelines.corpus.steps.base import trie_regex

    rng = random.Random(0)
    for lang in ("en", "ru", "de", "fr", "ja"):
        words = set()
        for f in resources.files("pipelines.corpus").joinpath("data").joinpath("badwords").iterdir():
            if f.name.endswith(".txt") and f.name[:-4].split("-")[0] == lang:
                words.update(unicodedata.normalize("NFC", w.strip()).lower() for w in f.read_text(encoding="utf-8").splitlines() if w.strip())
        flat = re.compile(rf"(?:\W|^)({'|'.join(map(re.escape, sorted(words)))})(?:\W|$)")
        trie = re.compile(rf"(?:\W|^)({trie_regex(words)})(?:\W|$)")
        anywhere = re.compile(trie_regex(words, any_prefix=True))
        for w in sorted(words):
            for text in (w, f"a {w}.", f"{w}s", f"x{w}", w[:-1], f"{w} hole", f"{w[:-1]} {w}x"):
                text = f"{rng.choice(['', ' ', '.'])}{text}{rng.choice(['', ' ', 'x'])}"
                assert (flat.search(text) is None) == (trie.search(text) is None), (lang, text)
                assert (anywhere.search(text) is None) == all(x not in text for x in words), (lang, text)
