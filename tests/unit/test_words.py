"""Words and sentences as spaCy counts them (pipelines/corpus/words.py), on real text.

The pinned token lists are spaCy 3.8's (`spacy.blank("en")`) on real lines: FOLDOC entries (Debian
dict-foldoc), GIMP and LibreOffice help and the Debian installation guide. The cross-checks run spaCy itself
(a dev dependency, pinned to the version the rules were exported from) over every page of the tiny
WARC, so a change in the exported rules or in the algorithm that shifts one token fails here.
"""
from __future__ import annotations

import pytest

from pipelines.corpus.steps.c4 import C4Config, clean_lines, clean_page, sentences
from pipelines.corpus.words import english, sentence_count, tokens
from tests.fixtures import tiny_pages

# Real lines: FOLDOC (Debian dict-foldoc, GFDL 1.1+) ".login", "acronym", "abort"; GIMP help;
# LibreOffice help; the Debian installation guide. Token lists as spaCy 3.8.18 makes them.
LOGIN = (".login is like .cshrc but is only run for a login shell whereas .cshrc is executed by every new shell, "
         "including sub-shells, e.g. a shell started from some other program.")
PINNED = [
    # An abbreviation is one token: "e.g." and "i.e." end no sentence. A hyphen between letters splits.
    (LOGIN, [".login", "is", "like", ".cshrc", "but", "is", "only", "run", "for", "a", "login", "shell", "whereas", ".cshrc",
             "is", "executed", "by", "every", "new", "shell", ",", "including", "sub", "-", "shells", ",", "e.g.", "a", "shell",
             "started", "from", "some", "other", "program", "."]),
    ("A TLA is a meta-acronym, i.e. an acronym about acronyms.",
     ["A", "TLA", "is", "a", "meta", "-", "acronym", ",", "i.e.", "an", "acronym", "about", "acronyms", "."]),
    # Tokenizer exceptions: contractions split, "cannot" is two tokens.
    ("Generates a cellular texture. Results don't depend on the image you opened.",
     ["Generates", "a", "cellular", "texture", ".", "Results", "do", "n't", "depend", "on", "the", "image", "you", "opened", "."]),
    ("You cannot change the name of or delete a predefined LibreOffice Draw layer.",
     ["You", "can", "not", "change", "the", "name", "of", "or", "delete", "a", "predefined", "LibreOffice", "Draw", "layer", "."]),
    # Paths split at "/" after the first part; options, key chords and URLs stay whole.
    ("To configure networking, edit /etc/network/interfaces, /etc/resolv.conf, /etc/hostname and /etc/hosts.",
     ["To", "configure", "networking", ",", "edit", "/etc", "/", "network", "/", "interfaces", ",", "/etc", "/", "resolv.conf",
      ",", "/etc", "/", "hostname", "and", "/etc", "/", "hosts", "."]),
    ("If the target architecture is different than the host, you should add the --foreign option.",
     ["If", "the", "target", "architecture", "is", "different", "than", "the", "host", ",", "you", "should", "add", "the",
      "--foreign", "option", "."]),
    ("Use Ctrl+Shift+S to save the opened image with a different name.",
     ["Use", "Ctrl+Shift+S", "to", "save", "the", "opened", "image", "with", "a", "different", "name", "."]),
    ("Go to https://gitlab.gnome.org/GNOME/gimp/issues, and select New issue.",
     ["Go", "to", "https://gitlab.gnome.org/GNOME/gimp/issues", ",", "and", "select", "New", "issue", "."]),
]


@pytest.mark.parametrize("text, expected", PINNED)
def test_tokens_pinned_on_real_lines(text, expected):
    assert tokens(text) == expected


@pytest.mark.parametrize("line, n", [
    # FOLDOC ".login": two spaces between sentences (a whitespace token), "e.g." inside.
    ("A file executed by a Unix shell when the user first logs in.  " + LOGIN + "  .login was first introduced with C Shell "
     "but has been adopted by most other shells since, though in some cases it is called \".profile\".", 3),
    # FOLDOC "abort": quotes after the end marks.
    ("To terminate a program or process abnormally and usually suddenly, with or without diagnostic information.  "
     "\"My program aborted\", \"I aborted the transmission\".  The noun form in computing is \"abort\", not "
     "\"abortion\", e.g. \"We've had three aborts over the last two days\".", 3),
    ("Starts in a safe mode, i.e. starts temporarily with a fresh user profile and helps to restore a broken configuration.", 1),
    ("GIMP version 1.0 was released on June 5, 1998. Finally, GIMP was considered stable enough to warrant a worldwide "
     "announcement and professional use.", 2),
    ("Choose Format - Character.", 1),
    ("", 0),
])
def test_sentence_count(line, n):
    assert sentence_count(line) == n


def test_c4_counts_sentences_without_abbreviations():
    # FOLDOC "Laning and Zierler": the initials "J.H." and "N." are tokens of their own and end no
    # sentence, so its 2 kept lines hold 4 sentences, below the paper variant's 5: datatrove's
    # C4QualityFilter drops it for too_few_sentences. lmforge's earlier regex counted 6 and kept it.
    entry = ("Possibly the first true working algebraic compiler.  Written by J.H. Laning Jr and N. Zierler in 1953-1954 to "
             "run on MIT's Whirlwind computer.\n[Sammet 1969, pp. 131-132].\n[Did the language have a name?]")
    lines = clean_lines(entry, C4Config(variant="paper"))
    assert len(lines) == 2 and [sentences([ln]) for ln in lines] == [2, 2]
    assert clean_page(entry, C4Config(variant="paper", min_chars=0)) == (None, "c4_too_few_sentences")


def test_token_cache_is_bounded_and_transparent(monkeypatch):
    import pipelines.corpus.words as w

    en = english()
    line = PINNED[4][0]
    monkeypatch.setattr(w, "CACHE_CHUNKS", 3)
    en._cache.clear()
    en._last = (None, [])
    assert en.tokens(line) == PINNED[4][1]
    assert len(en._cache) <= 3


def test_symbols_are_datatrove_punctuation():
    en = english()
    assert en.is_symbol(",") and en.is_symbol("...") and en.is_symbol("«") and not en.is_symbol("1.2.0")
    assert en.word_stats(tokens("GIMP 1.2.0, released.")) == (3, 4 + 5 + 8, 2)


def real_pages() -> list[str]:
    return tiny_pages()


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


def test_letters_alone_are_one_token_as_the_affix_rules_say():
    """EnglishWords.chunk_tokens takes an alphabetic chunk as its own token without the affix loop;
    the loop agrees for every alphabetic code point, alone and between letters."""
    import sys

    en = english()
    for ch in (chr(i) for i in range(sys.maxunicode + 1)):
        if not ch.isalpha():
            continue
        for chunk in (ch, f"a{ch}b"):
            if chunk not in en.specials:
                assert en._match_specials(en._chunk(chunk, True)) == [chunk], chunk


def reference_affixes(words, s: str, specials: bool) -> tuple[list[str], str, list[str]]:
    """spaCy's `_split_affixes` as written there (tokenizer.pyx): one prefix and one suffix a pass, each searched on
    the rest of the chunk again. Quadratic in a chunk of affixes; the oracle for words.py's linear-time loop."""
    prefixes, suffixes, last = [], [], -1
    while s and len(s) != last:
        if specials and s in words.specials:
            break
        last = len(s)
        m = words._prefix(s)
        pre = m.end() - m.start() if m else 0
        if pre and s[pre:] and specials and s[pre:] in words.specials:
            prefixes.append(s[:pre])
            s = s[pre:]
            break
        m = words._suffix(s[pre:])
        suf = m.end() - m.start() if m else 0
        if suf and s[:-suf] and specials and s[:-suf] in words.specials:
            suffixes.append(s[-suf:])
            s = s[:-suf]
            break
        if pre and suf and pre + suf <= len(s):
            prefixes.append(s[:pre])
            suffixes.append(s[-suf:])
            s = s[pre:-suf]
        elif pre:
            prefixes.append(s[:pre])
            s = s[pre:]
        elif suf:
            suffixes.append(s[-suf:])
            s = s[:-suf]
    return prefixes, s, suffixes


def crafted_chunks(seed: int, n: int) -> list[str]:
    """Chunks of affixes, special cases and letters, many of them periodic runs (`((((x`, `x.).).)`) or runs of a few
    pieces repeated (`<>(<>(x`)."""
    import random

    rnd = random.Random(seed)
    pieces = [*"()[]{}<>\"'.,;:!?-+$%&*/\\#@~_`…“”‘’«»", "..", "...", "US$", "C$", "km", "kg", "'s", "n't", "e.g.",
              "U.S.", "Mr.", "°F", "°C.", "$5", "5%", "1st", "A.", "x", "ab", "12", "é", "中", "—", "--",
              "http://a.b/c", "a@b.c", ":)", "<3", "''"]
    specials = sorted(english().specials)
    out = []
    for _ in range(n):
        parts = [rnd.choice(pieces) if rnd.random() < 0.85 else rnd.choice(specials)
                 for _ in range(rnd.choice([1, 2, 3, 5, 8, 15, 30]))]
        if rnd.random() < 0.4:
            parts = [rnd.choice(pieces)] * rnd.randint(1, 60) + parts + [rnd.choice(pieces)] * rnd.randint(0, 60)
        elif rnd.random() < 0.5:  # cycles of passes: `<>(<>(...x...)><)><`
            parts = (rnd.sample(pieces, rnd.randint(2, 4)) * rnd.randint(1, 40) + parts
                     + rnd.sample(pieces, rnd.randint(1, 4)) * rnd.randint(0, 40))
        chunk = "".join("".join(parts).split())
        if chunk:
            out.append(chunk)
    for _ in range(n // 20):  # long chunks of affixes in no order on both sides, one character or a few each
        side = [rnd.choice(pieces[:40]) for _ in range(rnd.randint(30, 300))]
        other = [rnd.choice(pieces[:40]) for _ in range(rnd.randint(0, 300))]
        out.append("".join("".join(side).split()) + rnd.choice(["x", "ab", "12", "e.g.", ""]) + "".join("".join(other).split()))
    return out


def test_the_linear_affix_loop_splits_as_spacys_quadratic_one():
    """words.py strips affixes over positions, skipping runs of identical passes (issue 50: `((((...x` words cost
    minutes a page); every split must stay spaCy's. 8,000 crafted chunks, with and without special cases, and the
    chunks of the tiny WARC's real pages."""
    from pipelines.corpus.words import EnglishWords

    words = EnglishWords.__new__(EnglishWords)  # the rules without __init__'s own use of _chunk
    words.__dict__.update(english().__dict__)
    real = sorted({c for page in tiny_pages() for c in page.split()})
    for chunk in [*crafted_chunks(0, 8000), *real]:
        for specials in (True, False):
            prefixes, rest, suffixes = reference_affixes(words, chunk, specials)
            got = words._chunk(chunk, specials)
            middle = got[len(prefixes):len(got) - len(suffixes)]
            assert got[:len(prefixes)] == prefixes and got[len(got) - len(suffixes):] == suffixes[::-1], chunk
            assert "".join(middle) == rest or (specials and tuple(middle) == words.specials.get(rest)), chunk


def test_a_run_of_affixes_is_stripped_in_few_passes():
    """A 990-character `((((...x` chunk, as C4's word cap lets through: its prefix is searched a few times, not 990
    (each search spaCy's way reads the whole rest of the chunk: 0.35 s for the chunk, minutes for a page of them);
    so is one of a cycle of affixes (`<>(<>(...x`, `x.).)...`)."""
    from pipelines.corpus.words import EnglishWords

    words = EnglishWords.__new__(EnglishWords)
    words.__dict__.update(english().__dict__)
    aff = words._affixes
    calls = []
    real = aff._prefix_at
    words._affixes._prefix_at = lambda *a: calls.append(a[1]) or real(*a)
    try:
        for mult in (1, 100):  # a few dozen searches, growing with the log of the length at most
            for chunk in ("(" * 989 * mult + "x7", "7x" + ")" * 989 * mult, "(" * 495 * mult + "x" + ")" * 495 * mult,
                          "'" * 990 * mult + "x", "<>(" * 330 * mult + "x", "x" + ".)" * 495 * mult,
                          "<>(" * 165 * mult + "x" + ".)" * 247 * mult, "[{<" * 200 * mult + "ab" + "'s)" * 100 * mult):
                calls.clear()
                toks = words._chunk(chunk, True)
                assert "".join(toks) == chunk and len(calls) < 150, (chunk[:5], mult, len(calls))
    finally:
        words._affixes._prefix_at = real


def test_a_rule_the_linear_loop_cannot_bound_is_refused():
    from pipelines.corpus.affixes import Affixes

    with pytest.raises(ValueError, match="unbounded and not a run of one character"):
        Affixes(r"^\(|^[a-z]+\(", r"\)$")
    with pytest.raises(ValueError, match="not anchored"):
        Affixes(r"^\(|\[", r"\)$")
    with pytest.raises(ValueError, match="does not end at"):
        Affixes(r"^\(", r"\)$|\]")
    assert Affixes(r"^\(|^\.\.+", r"\)$|\.\.+$")._suffix_runs == "."


def test_one_character_affixes_and_the_rules_by_last_character_are_spacys():
    """The shortcuts words.py takes without a search: a character in Affixes.single_prefix is the whole prefix of any
    text it starts (single_suffix: the whole suffix of any text it ends), and the suffix search over only the
    alternatives that can end in the slice's last character finds what the whole expression finds."""
    import random

    from pipelines.corpus.words import EnglishWords

    words = EnglishWords.__new__(EnglishWords)
    words.__dict__.update(english().__dict__)
    aff = words._affixes
    assert {"(", "<", "[", "{", "$"} <= aff.single_prefix and "." not in aff.single_prefix
    assert {")", "]", ",", ";"} <= aff.single_suffix and "." not in aff.single_suffix
    rnd = random.Random(3)
    tails = ["x", "..", "...", "US$", "$5", "(", "7", "e.g.", "+1", "-", "'s"]
    for c in aff.single_prefix:
        for tail in rnd.sample(tails, 4):
            m = words._prefix(c + tail)
            assert m and m.group() == c, (c, tail)
    for c in aff.single_suffix:
        for head in rnd.sample(["x", "5", "..", "U.S", ")", "°C", "ab'", "A"], 4):
            m = words._suffix(head + c)
            assert m and m.group() == c, (head, c)
    chars = list("abcXYZ0123456789.,;:!?()[]{}<>'\"$%&*+-/#@~_`…°’«»") + ["km", "'s", "US$", "°C", "n't"]
    for _ in range(20000):
        s = "".join(rnd.choice(chars) for _ in range(rnd.randint(1, 20)))
        lo, hi = rnd.randint(0, len(s) - 1), len(s)
        lo = min(lo, hi - 1)
        m = words._suffix(s[lo:hi])
        assert aff.suffix_len(s, lo, hi) == (m.end() - m.start() if m else 0), (s, lo)
