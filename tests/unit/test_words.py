"""Words and sentences as spaCy counts them (pipelines/corpus/words.py), on real text.

The pinned token lists are spaCy 3.8's (`spacy.blank("en")`) on real lines: FOLDOC entries (Debian
dict-foldoc), the Debian handbook and the installation guide. The cross-checks run spaCy itself
(a dev dependency, pinned to the version the rules were exported from) over every page of the tiny
WARC, so a change in the exported rules or in the algorithm that shifts one token fails here.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.corpus.filters import C4Config, clean_lines
from pipelines.corpus.readers import read_file
from pipelines.corpus.text import DecodeError, decode_html, html_to_text, normalize_text
from pipelines.corpus.words import english, sentence_count, tokens
from schemas.records import RawDocument

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny" / "tiny.warc.gz"

PINNED = [
    # FOLDOC "ANSI": an abbreviation ends no token of its own.
    ("(ANSI) The primary organisation for fostering the development of technology standards in the USA, e.g. ASCII.",
     ["(", "ANSI", ")", "The", "primary", "organisation", "for", "fostering", "the", "development", "of", "technology",
      "standards", "in", "the", "USA", ",", "e.g.", "ASCII", "."]),
    # Tokenizer exceptions: contractions split, "cannot" is two tokens.
    ("You don't need it, and you cannot remove it.",
     ["You", "do", "n't", "need", "it", ",", "and", "you", "can", "not", "remove", "it", "."]),
    # Installation guide: paths, options and key names stay whole; a hyphen between letters splits.
    ("Edit /etc/fstab with --convert or press Shift+Arrow in the well-known ISO-8859-1 setup.",
     ["Edit", "/etc", "/", "fstab", "with", "--convert", "or", "press", "Shift+Arrow", "in", "the", "well", "-", "known",
      "ISO-8859", "-", "1", "setup", "."]),
    # A URL is one token; the full stop after it is not part of it.
    ("See http://www.debian.org/releases/stable/ for details.",
     ["See", "http://www.debian.org/releases/stable/", "for", "details", "."]),
    ("N.B. i.e. etc. Mr. Smith and A. B. Smith.",
     ["N.B.", "i.e.", "etc", ".", "Mr.", "Smith", "and", "A.", "B.", "Smith", "."]),
]


@pytest.mark.parametrize("text, expected", PINNED)
def test_tokens_pinned_on_real_lines(text, expected):
    assert tokens(text) == expected


@pytest.mark.parametrize("line, n", [
    ("The primary organisation in the USA, e.g. ASCII. It was founded in 1918.", 2),  # "e.g." ends nothing
    ("GIMP version 1.0 was released on June 5, 1998. Finally, GIMP was considered stable.", 2),
    ("He said \"stop.\" Then he left!  And came back?", 3),  # quote and double space after the end
    ("Choose Format - Character.", 1),
    ("No end mark at all", 1),
    ("", 0),
])
def test_sentence_count(line, n):
    assert sentence_count(line) == n


def test_token_cache_is_bounded_and_transparent(monkeypatch):
    import pipelines.corpus.words as w

    en = english()
    line = PINNED[2][0]
    monkeypatch.setattr(w, "CACHE_CHUNKS", 3)
    en._cache.clear()
    en._last = (None, [])
    assert en.tokens(line) == PINNED[2][1]
    assert len(en._cache) <= 3


def test_symbols_are_datatrove_punctuation():
    en = english()
    assert en.is_symbol(",") and en.is_symbol("...") and en.is_symbol("«") and not en.is_symbol("1.2.0")
    assert en.word_stats(tokens("GIMP 1.2.0, released.")) == (3, 4 + 5 + 8, 2)


def real_pages() -> list[str]:
    out = []
    for d in read_file(str(TINY)):
        if isinstance(d, RawDocument) and d.html:
            try:
                out.append(normalize_text(html_to_text(decode_html(d.html, d.charset).text)))
            except DecodeError:
                continue
    return [t for t in out if t]


def test_tokens_and_sentences_equal_spacy_on_real_pages():
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    pages = real_pages()
    assert len(pages) > 100
    lines = 0
    for text in pages:
        with nlp.memory_zone():
            expected = [t.text.strip() for t in nlp(text) if t.text.strip()]  # datatrove's strip_strings
        assert tokens(text) == expected
        # Sentences of every line C4 keeps (paper variant, the one datatrove implements).
        for line in clean_lines(text, C4Config(variant="paper")):
            if line:
                lines += 1
                assert sentence_count(line) == len([s for s in nlp(line).sents if s.text.strip()]), line
    assert lines > 500


def test_exported_rules_match_the_installed_spacy():
    spacy = pytest.importorskip("spacy")
    import json
    from importlib import resources

    rules = json.loads(resources.files("pipelines.corpus").joinpath("data", "words", "english.json").read_text("utf-8"))
    tok = spacy.blank("en").tokenizer
    assert rules["source"]["spacy"] == spacy.__version__
    assert rules["prefix"] == tok.prefix_search.__self__.pattern
    assert rules["suffix"] == tok.suffix_search.__self__.pattern
    assert rules["infix"] == tok.infix_finditer.__self__.pattern
    assert len(rules["specials"]) == len(tok.rules)
