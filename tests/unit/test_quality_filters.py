"""Quality filters on real pages: C4 (tfds and paper), Gopher repetition, Gopher quality, FineWeb.

Pages are the Debian documentation pages in tests/data/tiny/tiny.warc.gz (GIMP, LibreOffice,
installation guide, Debian handbook); repetitive and boilerplate cases repeat real lines.
Boundary tests set a threshold to the value measured on the text (kept) and to the next float
past it (dropped), so `>` versus `>=` is pinned down.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import pytest

from common.config import add_config_args, config_from_args
from pipelines.corpus.clean import DROPPED, KEPT, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.readers import read_file
from pipelines.corpus.steps.c4 import C4Config, clean_line, clean_lines, clean_page
from pipelines.corpus.steps.fineweb import FineWebConfig, fineweb_quality
from pipelines.corpus.steps.gopher_quality import GopherQualityConfig, gopher_quality
from pipelines.corpus.steps.gopher_repetition import (
    GopherRepetitionConfig,
    _dup_ngram_chars,
    dup_ngram_chars,
    gopher_repetition,
    top_ngram_chars,
)
from pipelines.corpus.text import DecodeError, decode_html, html_to_text, normalize_text
from pipelines.corpus.words import english, tokens
from schemas.records import RawDocument

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny" / "tiny.warc.gz"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
KERNEL = "en-US/sect.kernel-role-and-tasks.html"  # Debian handbook: long, clean English prose
CONTRIB = "en-US/sect.contributing.html"  # Debian handbook: one short paragraph
RU_GUIDE = "installation-guide-amd64.docs.invalid/ru/ch03s04.html"  # installation guide, Russian
RU_GIMP = "gimp-help-ru.docs.invalid/gimp-view-padding-color.html"  # GIMP help, Russian, no English words
AGENDA = "text/shared/autopi/01040200.html"  # LibreOffice: "Specifies the ... of the meeting." x 5
MARKS = "text/shared/01/formatting_mark.html"  # LibreOffice: near-identical sentences
SMATH = "text/smath/01/03091507.html"  # LibreOffice Math: a table of one- and two-word commands
CRYPT = "installation-guide-amd64.docs.invalid/en/ch07s02.html"  # installation guide: prose with "# mount ..." root-shell lines

# GIMP help, "GIMP history" (samples/crawl/debian-docs-*): 51 words, 11 of them numbers.
GIMP_HISTORY = ("GIMP version 1.0 was released on June 5, 1998. Finally, GIMP was considered stable enough to warrant "
                "a worldwide announcement and professional use.\nGIMP version 1.2.0 was released on December 25, 2000. "
                "Compared to the version 1.0, it included mostly fixes and improvements of the user interface.")
# GIMP help: File-menu entries as the index page lists them.
GIMP_FILE_MENU = ["2.2. New…", "2.5. Open as Layers…", "2.6. Open Location…", "2.9. Save as…", "2.10. Save a Copy…",
                  "2.13. Export As…", "2.14. Create Template…"]
# Real GIMP help lines that end in an ellipsis (a menu path).
GIMP_MENU_LINES = ["You can find this filter in the image menu through FiltersRenderPatternBayer Matrix…",
                   "You can find this filter in the image menu through FiltersBlurPixelize…",
                   "You can find this filter through FiltersMapTile Seamless…",
                   "You can find this filter through FiltersDistortsWhirl and Pinch…"]


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    """url -> normalised extracted text, for every decodable page of the tiny WARC."""
    out = {}
    for d in read_file(str(TINY)):
        if isinstance(d, RawDocument) and d.html:
            try:
                out[d.url] = normalize_text(html_to_text(decode_html(d.html, d.charset).text))
            except DecodeError:
                pass
    return out


def page(pages: dict[str, str], suffix: str, c4: bool = True) -> str:
    (text,) = [t for u, t in pages.items() if u.endswith(suffix)]
    return clean_page(text, C4Config())[0] if c4 else text


def lines_of(text: str) -> list[str]:
    """The non-blank lines (blank lines are paragraph breaks)."""
    return [ln for ln in text.split("\n") if ln]


def words_of(text: str) -> list[str]:
    """Every token, punctuation included, as the rules count them (spaCy's English tokenizer)."""
    return tokens(text)


def real_words_of(text: str) -> list[str]:
    """The tokens that are not all punctuation: Gopher's word count and mean word length."""
    return [w for w in tokens(text) if not english().is_symbol(w)]


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


# ---------------------------------------------------------------------------------------------
# C4: the TFDS and paper variants
# ---------------------------------------------------------------------------------------------

def test_c4_variants_have_their_published_numbers_and_overrides():
    assert (C4Config().variant, C4Config().min_words_per_line, C4Config().min_sentences) == ("tfds", 5, 3)
    paper = C4Config(variant="paper")
    assert (paper.min_words_per_line, paper.min_sentences) == (3, 5)
    assert C4Config(variant="paper", min_sentences=4).min_sentences == 4
    with pytest.raises(ValueError, match="variant"):
        C4Config(variant="c4_en")


def test_c4_paper_needs_five_sentences_where_tfds_needs_three(pages):
    # The Debian handbook's "Contributing" paragraph, one sentence per line.
    sentences = page(pages, CONTRIB).split("\n")[0].replace(". ", ".\n").split("\n")
    four, five = "\n".join(sentences[:4]), "\n".join(sentences[:5])
    tfds, paper = C4Config(min_chars=0), C4Config(variant="paper", min_chars=0)
    assert clean_page(four, tfds) == (four, None)
    assert clean_page(four, paper) == (None, "c4_too_few_sentences")
    assert clean_page(five, paper) == (five, None)


def test_c4_paper_keeps_three_and_four_word_lines_that_tfds_drops():
    tfds, paper = C4Config(), C4Config(variant="paper")
    for line in ("Increasing radius increases blur.", "Image is darker."):  # GIMP help, Median Blur: 4 and 3 words
        assert clean_line(line, paper) == line and clean_line(line, tfds) is None
    line = "We will not hide problems."  # 5 words: both keep it
    assert clean_line(line, paper) == clean_line(line, tfds) == line
    assert clean_line("Median Blur.", paper) is None  # 2 words: too short for both


def test_c4_keeps_paragraph_breaks_among_kept_lines(pages):
    a, b, c = lines_of(page(pages, KERNEL))[:3]
    # Blank lines at the ends go, runs of them become one, and a paragraph whose every line is
    # dropped ("B.4.1. Driving the Hardware", no terminal punctuation) leaves a single break.
    text = f"\n\n{a}\n\nB.4.1. Driving the Hardware\n\n\n{b}\n{c}\n\nmenu\n\n"
    assert clean_lines(text, C4Config()) == [a, "", b, c]
    assert clean_page(text, C4Config(min_chars=0)) == (f"{a}\n\n{b}\n{c}", None)
    # Extracted pages keep their <p> and heading blocks as paragraphs through normalisation and C4.
    assert page(pages, KERNEL).count("\n\n") >= 3 and "\n\n\n" not in page(pages, KERNEL)


# ---------------------------------------------------------------------------------------------
# Gopher repetition
# ---------------------------------------------------------------------------------------------

def rep_only(**kw) -> GopherRepetitionConfig:
    """Every repetition rule at 1.0 (cannot fire) except the ones given."""
    base = dict(max_dup_line_frac=1.0, max_dup_line_char_frac=1.0, max_dup_para_frac=1.0, max_dup_para_char_frac=1.0,
                top_ngram_max_frac=[1.0, 1.0, 1.0], dup_ngram_max_frac=[1.0] * 6)
    return GopherRepetitionConfig(**{**base, **kw})


def test_ngram_counts_follow_datatrove():
    words = "the cat sat the cat sat".split()
    # Most frequent 2-gram "the cat" (tied with "cat sat"; the first seen wins): 7 chars x 2.
    assert top_ngram_chars(words, 2) == 14
    # Scan: "the cat" repeats at word 3 -> 6 chars (spaces excluded), jump 2 words: the
    # overlapping repeat "cat sat" at word 4 is not counted again.
    assert dup_ngram_chars(words, 2) == 6
    assert dup_ngram_chars(words, 3) == len("thecatsat")
    assert dup_ngram_chars(words, 4) == 0 and top_ngram_chars(words, 7) == 0


def test_ngram_counts_equal_datatrove_loops_on_shuffled_real_words(pages):
    """The numpy n-gram keys and the repeat-position scan against a transcription of datatrove's
    find_top_duplicate / find_all_duplicate loops, on token lists drawn from a real page's words
    (few distinct words, so n-grams repeat and overlap in every way)."""
    import random
    from collections import Counter

    from pipelines.corpus.steps.gopher_repetition import NGramKeys

    def dt_top(words, n):
        grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
        if not grams:
            return 0
        gram, count = Counter(grams).most_common(1)[0]
        return len(gram) * count

    def dt_dup(words, n):
        unique, chars, i = set(), 0, 0
        while i < len(words) - n + 1:
            gram = tuple(words[i:i + n])  # datatrove joins with ""; tokens here cannot collide that way
            if gram in unique:
                chars += sum(map(len, gram))
                i += n
            else:
                unique.add(gram)
                i += 1
        return chars

    vocab = words_of(page(pages, KERNEL))
    rng = random.Random(16)
    for _ in range(600):
        pool = rng.sample(vocab, rng.choice([1, 2, 3, 5, 12]))
        words = [rng.choice(pool) for _ in range(rng.randint(0, 70))]
        keys = NGramKeys(words)
        for n in rng.sample(range(1, 12), 11):  # any order: the keys restart when n goes down
            assert top_ngram_chars(words, n, keys) == dt_top(words, n), (words, n)
            exact = dt_dup(words, n)
            assert dup_ngram_chars(words, n, keys) == exact, (words, n)
            limit = rng.choice([0, exact // 2, exact, exact + 1])  # the rule's threshold: the scan may stop past it
            got = _dup_ngram_chars(words, n, keys, limit) or 0
            assert (got > limit) == (exact > limit) and got <= exact, (words, n, limit)


def test_gopher_repetition_keeps_real_prose(pages):
    for suffix in (KERNEL, CONTRIB, RU_GUIDE, CRYPT):
        assert gopher_repetition(page(pages, suffix), GopherRepetitionConfig()) is None, suffix


# The rule that fires is the one datatrove's GopherRepetitionFilter names on the same page (checked
# with datatrove 0.10.1: top_2_gram, top_4_gram, duplicated_5_n_grams twice): n-grams are of spaCy
# tokens, punctuation included.
@pytest.mark.parametrize("suffix, reason", [(AGENDA, "gopher_rep_top_2gram"),
                                            ("installation-guide-amd64.docs.invalid/en/ch01.html", "gopher_rep_top_4gram"),
                                            (MARKS, "gopher_rep_dup_5gram"),
                                            ("gimp-help-ru.docs.invalid/tone-mapping-tutorial.html", "gopher_rep_dup_5gram")])
def test_gopher_repetition_drops_repetitive_real_pages(pages, suffix, reason):
    assert gopher_repetition(page(pages, suffix), GopherRepetitionConfig()) == reason


def test_gopher_duplicate_lines_and_paragraphs(pages):
    lines = lines_of(page(pages, KERNEL))[:10]
    # 3 of 10 lines repeat: 0.30 is allowed, 4 of 11 (0.36) is not.
    three = "\n".join(lines[:7] + lines[:3])
    assert gopher_repetition(three, rep_only(max_dup_line_frac=0.3)) is None
    assert gopher_repetition("\n".join(lines[:7] + lines[:4]), rep_only(max_dup_line_frac=0.3)) == "gopher_rep_dup_line_frac"
    # Characters in repeated lines, at the boundary.
    frac = sum(map(len, lines[:3])) / len(three)
    assert gopher_repetition(three, rep_only(max_dup_line_char_frac=frac)) is None
    assert gopher_repetition(three, rep_only(max_dup_line_char_frac=below(frac))) == "gopher_rep_dup_line_char_frac"
    # Paragraphs are split on blank lines.
    paras = "\n\n".join(lines[:7] + lines[:3])
    assert gopher_repetition(paras, rep_only(max_dup_para_frac=0.3)) is None
    assert gopher_repetition(paras, rep_only(max_dup_para_frac=below(0.3))) == "gopher_rep_dup_para_frac"
    frac = sum(map(len, lines[:3])) / len(paras)
    assert gopher_repetition(paras, rep_only(max_dup_para_char_frac=frac)) is None
    assert gopher_repetition(paras, rep_only(max_dup_para_char_frac=below(frac))) == "gopher_rep_dup_para_char_frac"


@pytest.mark.parametrize("kind, n", [("top", 2), ("top", 3), ("top", 4), *[("dup", n) for n in range(5, 11)]])
def test_gopher_ngram_rules_at_their_thresholds(pages, kind, n):
    # A real page whose first line appears again at the end (a repeated 20-word sentence).
    lines = lines_of(page(pages, KERNEL))
    text = "\n".join(lines[:6] + lines[:1])
    words = words_of(text)
    chars = top_ngram_chars(words, n) if kind == "top" else dup_ngram_chars(words, n)
    frac = chars / len(text)
    assert frac > 0
    sizes, key = ((2, 3, 4), "top_ngram_max_frac") if kind == "top" else (tuple(range(5, 11)), "dup_ngram_max_frac")
    at = [frac if s == n else 1.0 for s in sizes]
    past = [below(frac) if s == n else 1.0 for s in sizes]
    assert gopher_repetition(text, rep_only(**{key: at})) is None
    assert gopher_repetition(text, rep_only(**{key: past})) == f"gopher_rep_{kind}_{n}gram"


def test_gopher_repetition_is_linear_in_document_length(pages):
    # ~100,000 words (the Gopher max) with every rule evaluated: quadratic code would take minutes.
    text = "\n".join([page(pages, KERNEL)] * 85)
    assert len(words_of(text)) > 90_000
    t = time.perf_counter()
    assert gopher_repetition(text, rep_only()) is None
    assert time.perf_counter() - t < 5.0


# ---------------------------------------------------------------------------------------------
# Gopher quality
# ---------------------------------------------------------------------------------------------

def test_gopher_quality_keeps_real_prose(pages):
    q = GopherQualityConfig()
    for suffix in (KERNEL, CONTRIB, CRYPT):
        assert gopher_quality(page(pages, suffix), q, "en") is None, suffix
    assert gopher_quality(page(pages, RU_GUIDE), q, "ru") is None


def test_gopher_word_count_bounds(pages):
    words = real_words_of(page(pages, KERNEL))
    q = GopherQualityConfig()
    assert gopher_quality(" ".join(words[:50]) + ".", q, "en") is None
    assert gopher_quality(" ".join(words[:49]) + ".", q, "en") == "gopher_word_count"
    assert gopher_quality(" ".join(words[:51]) + ".", GopherQualityConfig(max_words=50), "en") == "gopher_word_count"
    assert gopher_quality(" ".join(words[:50]) + ".", GopherQualityConfig(max_words=50), "en") is None


def test_gopher_mean_word_length_bounds(pages):
    text = page(pages, KERNEL)
    words = real_words_of(text)
    mean = sum(map(len, words)) / len(words)
    assert 3 < mean < 10
    for lo, hi, reason in ((mean, 10, None), (above(mean), 10, "gopher_mean_word_length"),
                           (3, mean, None), (3, below(mean), "gopher_mean_word_length")):
        cfg = GopherQualityConfig(min_mean_word_length=lo, max_mean_word_length=hi)
        assert gopher_quality(text, cfg, "en") == reason


def test_gopher_symbol_ratios(pages):
    # Root-shell lines from the installation guide, repeated until '#' is > 10% of the words.
    prose = page(pages, CONTRIB)
    shell = "\n".join([prose] + ["# /etc/init.d/cryptdisks start", "# mount /mount_point"] * 12)
    assert gopher_quality(shell, GopherQualityConfig(), "en") == "gopher_hash_ratio"
    ratio = shell.count("#") / len(words_of(shell))  # over every token: "#" and "/" count, as in datatrove
    # The shell lines' "#" and "/" tokens have no letter; only the hash rule is probed here.
    assert gopher_quality(shell, GopherQualityConfig(max_symbol_word_ratio=ratio, min_alpha_words_frac=0.0), "en") is None
    assert gopher_quality(shell, GopherQualityConfig(max_symbol_word_ratio=below(ratio), min_alpha_words_frac=0.0),
                          "en") == "gopher_hash_ratio"
    menu = "\n".join([prose] + GIMP_FILE_MENU * 3)  # 21 ellipses in 191 tokens ("2.2", ".", "New", "…", ...)
    ratio = menu.count("…") / len(words_of(menu))
    assert ratio > 0.1
    assert gopher_quality(menu, GopherQualityConfig(), "en") == "gopher_ellipsis_ratio"
    # The menu's section numbers are words without letters; only the ellipsis rule is probed here.
    at = GopherQualityConfig(max_symbol_word_ratio=ratio, max_ellipsis_lines_frac=1.0, min_alpha_words_frac=0.0)
    assert gopher_quality(menu, at, "en") is None
    past = GopherQualityConfig(max_symbol_word_ratio=below(ratio), max_ellipsis_lines_frac=1.0, min_alpha_words_frac=0.0)
    assert gopher_quality(menu, past, "en") == "gopher_ellipsis_ratio"


def test_gopher_bullet_and_ellipsis_lines(pages):
    lines = lines_of(page(pages, KERNEL))[:10]
    # As resiliparse renders <li> with list_bullets=True: 9 of 10 bulleted is allowed, 10 is not.
    nine = "\n".join(["• " + ln for ln in lines[:9]] + lines[9:])
    assert gopher_quality(nine, GopherQualityConfig(), "en") is None
    assert gopher_quality("\n".join("• " + ln for ln in lines), GopherQualityConfig(), "en") == "gopher_bullet_lines"
    assert gopher_quality("\n".join("- " + ln for ln in lines), GopherQualityConfig(), "en") == "gopher_bullet_lines"
    # 3 of 10 lines ending in an ellipsis is allowed (0.30), 4 of 11 is not.
    three = "\n".join(lines[:7] + GIMP_MENU_LINES[:3])
    assert gopher_quality(three, GopherQualityConfig(), "en") is None
    four = "\n".join(lines[:7] + GIMP_MENU_LINES)
    assert gopher_quality(four, GopherQualityConfig(), "en") == "gopher_ellipsis_lines"


def test_gopher_alpha_words_on_a_page_of_version_numbers():
    # 47 words (datatrove: gopher_short_doc), so the word minimum is lowered to reach the alpha rule.
    assert gopher_quality(GIMP_HISTORY, GopherQualityConfig(), "en") == "gopher_word_count"
    assert len(real_words_of(GIMP_HISTORY)) == 47
    words = words_of(GIMP_HISTORY)  # every token: numbers and punctuation have no letter
    frac = sum(any(c.isalpha() for c in w) for w in words) / len(words)
    assert frac < 0.8 and "1.2.0" in words and "," in words
    q = dict(min_words=40)
    assert gopher_quality(GIMP_HISTORY, GopherQualityConfig(**q), "en") == "gopher_alpha_words"
    assert gopher_quality(GIMP_HISTORY, GopherQualityConfig(**q, min_alpha_words_frac=frac), "en") is None
    assert gopher_quality(GIMP_HISTORY, GopherQualityConfig(**q, min_alpha_words_frac=above(frac)), "en") == "gopher_alpha_words"


def test_gopher_alpha_ratio_counts_punctuation_tokens(pages):
    # datatrove's ratio: tokens with a letter over every token, punctuation included. Clean Russian
    # GIMP prose (guillemets, commas, a figure number) is then below 0.8, and dropped by both.
    ru = page(pages, RU_GIMP)
    words = words_of(ru)
    frac = sum(any(c.isalpha() for c in w) for w in words) / len(words)
    assert 0.78 < frac < 0.8 and "«" in words and "16.62" in words
    assert gopher_quality(ru, GopherQualityConfig(), "ru") == "gopher_alpha_words"
    assert gopher_quality(ru, GopherQualityConfig(min_alpha_words_frac=frac), "ru") is None


# FOLDOC "SCSI ID" (Debian dict-foldoc, GFDL 1.1+): short English prose with numbers.
SCSI_ID = ("The unique address of a SCSI device.  SCSI IDs range from 0 to 7 for 8-bit SCSI systems, 0 to 15 for 16-bit "
           "and 0 to 31 for 32-bit systems.  The SCSI adapter is usually assigned ID 7.  A device's SCSI ID is often set by "
           "switches on the device.")


def test_gopher_alpha_ratio_on_short_technical_prose():
    # The class that made 1,203 FOLDOC texts disagree with datatrove (kept here, gopher_below_alpha_threshold
    # there): its ratio counts every spaCy token, so numbers, "-" and "." pull this entry under 0.8.
    # lmforge now follows it; --gopher-quality-min-alpha-words-frac lowers the bar.
    words = words_of(SCSI_ID)
    frac = sum(any(c.isalpha() for c in w) for w in words) / len(words)
    assert len(real_words_of(SCSI_ID)) >= 50 and frac < 0.8 and {"8", "-", "bit", "'s"} <= set(words)
    assert gopher_quality(SCSI_ID, GopherQualityConfig(), "en") == "gopher_alpha_words"
    assert gopher_quality(SCSI_ID, GopherQualityConfig(min_alpha_words_frac=frac), "en") is None


def test_gopher_stop_words_apply_to_english_only(pages):
    ru = page(pages, RU_GIMP)
    q = GopherQualityConfig(min_alpha_words_frac=0.75)  # past the alpha rule (see above)
    assert gopher_quality(ru, q, "en") == "gopher_stop_words"  # no English stop words in it
    assert gopher_quality(ru, q, "ru") is None
    en = page(pages, CONTRIB)
    # "At least two of the following words" (Gopher A.1.1): distinct words, as datatrove counts them.
    k = len({"the", "be", "to", "of", "and", "that", "have", "with"} & set(words_of(en)))
    assert sum(w in {"the", "be", "to", "of", "and", "that", "have", "with"} for w in words_of(en)) > k  # repeats count once
    assert gopher_quality(en, GopherQualityConfig(min_stop_words=k), "en") is None
    assert gopher_quality(en, GopherQualityConfig(min_stop_words=k + 1), "en") == "gopher_stop_words"


# ---------------------------------------------------------------------------------------------
# FineWeb
# ---------------------------------------------------------------------------------------------

def fw_only(**kw) -> FineWebConfig:
    base = dict(min_line_punct_frac=0.0, max_short_line_frac=1.0, max_char_dup_frac=1.0, max_newline_word_ratio=1e9)
    return FineWebConfig(**{**base, **kw})


def test_fineweb_keeps_real_prose(pages):
    for suffix in (KERNEL, CONTRIB, RU_GUIDE, CRYPT):
        assert fineweb_quality(page(pages, suffix), FineWebConfig()) is None, suffix


def test_fineweb_line_punctuation(pages):
    raw = [ln for t in pages.values() for ln in t.split("\n")]
    headings = [ln for ln in dict.fromkeys(raw) if len(ln) > 30 and not ln.endswith(tuple(".'\"!?"))][:22]
    sentences = [ln for ln in dict.fromkeys(raw) if len(ln) > 30 and ln.endswith(".")][:3]
    text = "\n".join(headings + sentences)  # 3 of 25 lines end in punctuation: 0.12, the threshold
    assert fineweb_quality(text, FineWebConfig()) is None
    assert fineweb_quality(text, fw_only(min_line_punct_frac=above(0.12))) == "fineweb_line_punct_ratio"
    assert fineweb_quality("\n".join(headings + sentences[:2]), FineWebConfig()) == "fineweb_line_punct_ratio"


def test_fineweb_short_lines(pages):
    lines = lines_of(page(pages, KERNEL))[:2]
    short = ["Date", "Time", "Title", "Location"]  # LibreOffice Agenda Wizard headings
    assert fineweb_quality("\n".join(lines + short[:4]), FineWebConfig()) is None  # 4/6 = 0.667 <= 0.67
    assert fineweb_quality("\n".join(lines[:1] + short[:3]), FineWebConfig()) == "fineweb_short_line_ratio"  # 0.75


def test_fineweb_duplicated_line_characters(pages):
    lines = lines_of(page(pages, KERNEL))
    text = "\n".join(lines + lines[:1])
    frac = len(lines[0]) / len(text.replace("\n", ""))
    assert frac > 0.01 and fineweb_quality(text, FineWebConfig()) == "fineweb_char_dup_ratio"
    assert fineweb_quality(text, FineWebConfig(max_char_dup_frac=frac)) is None
    assert fineweb_quality(text, FineWebConfig(max_char_dup_frac=below(frac))) == "fineweb_char_dup_ratio"


def test_fineweb_newline_ratio(pages):
    text = page(pages, SMATH, c4=False)
    ratio = (len(lines_of(text)) - 1) / len(words_of(text))  # line breaks; blank lines do not count
    assert text.count("\n\n") > 10
    assert ratio > 0.3 and fineweb_quality(text, fw_only(max_newline_word_ratio=0.3)) == "fineweb_newline_ratio"
    assert fineweb_quality(text, fw_only(max_newline_word_ratio=ratio)) is None
    assert fineweb_quality(text, fw_only(max_newline_word_ratio=below(ratio))) == "fineweb_newline_ratio"


# ---------------------------------------------------------------------------------------------
# process_document: order, switches, config
# ---------------------------------------------------------------------------------------------

def cfg(**kw) -> CorpusConfig:
    return CorpusConfig(input=["x"], output="y", **kw)


def doc(text: str) -> RawDocument:
    return RawDocument("d", "https://a.invalid/d", "f", 0, text=text, content_type="text/plain")


OFF = dict(c4=C4Config(enabled=False), gopher_repetition=GopherRepetitionConfig(enabled=False),
           gopher_quality=GopherQualityConfig(enabled=False), fineweb=FineWebConfig(enabled=False))


def test_filters_run_in_the_documented_order(pages):
    # Handbook prose followed by repeated root-shell lines: C4 removes the shell lines (no
    # terminal punctuation), so with C4 on the page is kept. With C4 off, the page fails
    # Gopher repetition, Gopher quality and FineWeb; switching each off reveals the next.
    text = "\n".join([page(pages, CONTRIB)] + ["# /etc/init.d/cryptdisks start", "# mount /mount_point"] * 12)
    assert process_document(doc(text), cfg())[0] == KEPT
    kw: dict = {"c4": C4Config(enabled=False)}
    for name, off, reason in [("gopher_repetition", GopherRepetitionConfig(enabled=False), "gopher_rep_dup_line_frac"),
                              ("gopher_quality", GopherQualityConfig(enabled=False), "gopher_hash_ratio"),
                              ("fineweb", FineWebConfig(enabled=False), "fineweb_line_punct_ratio")]:
        assert process_document(doc(text), cfg(**kw))[:2] == (DROPPED, (doc(text), reason, "en"))
        kw[name] = off
    assert process_document(doc(text), cfg(**kw))[0] == KEPT
    # C4's page rules come first: a curly bracket drops the page whatever the later rules say.
    assert process_document(doc(text + "\nThe call int main() { return 0; } is valid C."), cfg())[1][1] == "c4_curly_bracket"


def test_with_every_filter_off_text_passes_normalised_only():
    # The LibreOffice Agenda Wizard page's opening, with the spacing an extractor leaves.
    raw = "  Agenda Wizard - General Information \n\nSpecifies the date, time, title, and location of the meeting.\n Date\n"
    status, rec = process_document(doc(raw), cfg(**OFF))
    assert status == KEPT and rec["text"] == normalize_text(raw) and rec["language"] == "en"
    assert process_document(doc(raw), cfg())[0] == DROPPED


def test_a_real_page_with_repeated_paragraphs_is_dropped_by_the_paragraph_rule():
    # LibreOffice help, "Inserting Objects From the Gallery": three procedures that each repeat
    # the paragraphs "Open the Gallery by ... Tools - Gallery." and "Select an object by a single
    # click.", so 4 of its 13 paragraphs (0.31 > 0.30) repeat an earlier one.
    url = "https://libreoffice-help-en-us.docs.invalid/text/shared/guide/gallery_insert.html"
    (d,) = [d for d in read_file(str(SAMPLES / "crawl" / "debian-docs-000.warc.gz"))
            if isinstance(d, RawDocument) and d.url == url]
    assert process_document(d, cfg()) == (DROPPED, (d, "gopher_rep_dup_para_frac", "en"))
    # The paragraph rule alone (every other repetition rule off) drops it too ...
    only_para = rep_only(max_dup_para_frac=0.3)
    assert process_document(d, cfg(gopher_repetition=only_para)) == (DROPPED, (d, "gopher_rep_dup_para_frac", "en"))
    # ... and cannot fire on the same text run together into one paragraph, as it was before
    # normalize_text kept blank lines.
    # (FineWeb's duplicated-line rule would drop it too, so it is off here.)
    status, rec = process_document(d, cfg(gopher_repetition=GopherRepetitionConfig(enabled=False),
                                          fineweb=FineWebConfig(enabled=False)))
    assert status == KEPT
    text = rec["text"]
    assert text.count("\n\n") == 12
    assert gopher_repetition(text.replace("\n\n", "\n"), only_para) is None


def test_real_pages_through_process_document(pages):
    for suffix, lang in ((KERNEL, "en"), (RU_GUIDE, "ru")):
        status, rec = process_document(doc(page(pages, suffix, c4=False)), cfg())
        assert (status, rec["language"]) == (KEPT, lang)  # Russian: the English stop-word rule is skipped
    # Russian GIMP help: alphabetic tokens are 79% of its tokens (test_gopher_alpha_ratio_counts_punctuation_tokens)
    status, (_, reason, _) = process_document(doc(page(pages, RU_GIMP, c4=False)), cfg())
    assert (status, reason) == (DROPPED, "gopher_alpha_words")


def test_every_filter_is_a_flag_and_a_json_key(tmp_path):
    p = argparse.ArgumentParser()
    add_config_args(p, CorpusConfig)
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"input": ["x"], "output": "y", "fineweb": {"enabled": False, "max_char_dup_frac": 0.1}}))
    ns = p.parse_args(["--config", str(f), "--c4-variant", "paper", "--no-gopher-quality-enabled",
                       "--gopher-repetition-top-ngram-max-frac", "0.3", "0.2", "0.1"])
    c = config_from_args(CorpusConfig, ns)
    assert (c.c4.variant, c.c4.min_words_per_line, c.c4.min_sentences) == ("paper", 3, 5)
    assert not c.gopher_quality.enabled and c.gopher_repetition.enabled and c.gopher_repetition.top_ngram_max_frac == [0.3, 0.2, 0.1]
    assert (c.fineweb.enabled, c.fineweb.max_char_dup_frac) == (False, 0.1)
    with pytest.raises(ValueError, match="same length"):
        GopherRepetitionConfig(top_ngram_max_frac=[0.2])
    with pytest.raises(ValueError, match="fraction"):
        FineWebConfig(max_char_dup_frac=1.5)


# ---------------------------------------------------------------------------------------------
# Agreement with the references (issue 16): classes of disagreement with datatrove, resolved
# ---------------------------------------------------------------------------------------------

# LibreOffice Calc help, SKEWP (samples/crawl): an example line with no terminal punctuation.
SKEWP = "SKEWP(A1:A6) returns 0.2329985562, when the range A1:A6 contains {2;3;1;6;8;5}"


@pytest.mark.parametrize("variant", ["tfds", "paper"])
def test_c4_curly_bracket_drops_the_page_only_from_a_surviving_line(pages, variant):
    """TFDS c4_utils and datatrove check "{" (and "lorem ipsum") on lines that passed the line rules
    before it; a "{" in a line the rules drop leaves the page (was: any "{" dropped the page)."""
    prose = lines_of(page(pages, KERNEL))[:6]
    cfg = C4Config(variant=variant, min_chars=0)
    text = "\n".join([prose[0], SKEWP, *prose[1:]])
    assert clean_line(SKEWP, cfg) is None  # no end mark
    kept, reason = clean_page(text, cfg)
    assert reason is None and "{" not in kept and kept.split("\n")[0] == prose[0]
    assert clean_page("\n".join([prose[0], SKEWP + " here.", *prose[1:]]), cfg) == (None, "c4_curly_bracket")
    # A "{" on a line the javascript rule drops first does not reach the page rule (TFDS's order).
    assert clean_page("\n".join([*prose, "Enable JavaScript to see {this} page as it is meant to be."]), cfg)[1] is None
    assert clean_page("\n".join([*prose, "Lorem ipsum dolor sit amet, consectetur adipiscing elit"]), cfg)[1] is None
    assert clean_page("\n".join([*prose, "Lorem ipsum dolor sit amet, consectetur adipiscing elit."]), cfg) == (None, "c4_lorem_ipsum")


@pytest.mark.parametrize("variant", ["tfds", "paper"])
def test_c4_lines_ending_in_a_unicode_ellipsis_are_not_kept(variant):
    """"…" is not an end mark in TFDS or datatrove (it was one here, and the GIMP menu lines that
    survived then made Gopher's ellipsis-lines rule drop pages datatrove kept)."""
    cfg = C4Config(variant=variant, min_words_per_line=1)
    for line in [*GIMP_MENU_LINES, *GIMP_FILE_MENU]:
        assert clean_line(line, cfg) is None
        assert clean_line(line[:-1] + ".", cfg) == line[:-1] + "."


def test_c4_paper_end_marks_add_the_single_quote(pages):
    """The paper's "end quotation mark" includes the single quote, as datatrove reads it; TFDS has . ? ! " only."""
    line = lines_of(page(pages, KERNEL))[0][:-1] + ", as the handbook puts it.'"
    assert clean_line(line, C4Config(variant="paper")) == line
    assert clean_line(line, C4Config(variant="tfds")) is None


def test_c4_a_kept_line_is_at_least_one_sentence(pages):
    """TFDS and datatrove split each kept line into sentences and a line without a recognised end is one
    sentence; a line ending in '."' counted none here before."""
    from pipelines.corpus.steps.c4 import sentences

    plain = lines_of(page(pages, KERNEL))[:5]
    quoted = [f'The handbook says "{ln}"' for ln in plain]
    assert all(ln.endswith('."') for ln in quoted)
    assert sentences(quoted) == sentences(plain) >= 5  # the quote no longer hides each line's last sentence
    assert sentences(['The handbook says "Debian is a free operating system."']) == 1
    assert clean_page("\n".join(quoted), C4Config(variant="paper", min_chars=0))[1] is None
    assert sentences(["One. Two! Three? Four."]) == 4 and sentences(['He said "Stop." Then he left.']) == 2
