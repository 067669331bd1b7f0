"""bench corpus's keep/drop comparison with datatrove (bench/corpus/agreement.py), without datatrove:
the confusion counts, the chain and lmforge's side of it."""
from __future__ import annotations

from bench.corpus.agreement import (
    CHAIN,
    FAMILIES,
    MATCHING,
    SHIPPED,
    Confusion,
    chain,
    explain,
    lmforge_config,
    lmforge_family,
    render,
)


def test_confusion_counts_and_classes():
    c = Confusion()
    for page_id, ours, theirs in [("a", None, None), ("b", "c4:x", "c4:y"), ("c", None, "gq:alpha"), ("d", None, "gq:alpha"),
                                  ("e", "c4:curly", None)]:
        c.add(page_id, ours, theirs)
    assert (c.n, c.both_keep, c.both_drop, c.only_lmforge_keeps, c.only_datatrove_keeps) == (5, 1, 1, 2, 1)
    assert c.agreement == 2 / 5
    d = c.as_dict()
    assert d["classes"][0] == {"lmforge": "keep", "datatrove": "gq:alpha", "pages": 2, "example": "c"}
    shipped = Confusion()
    shipped.add("f", None, "fineweb:line_punct_ratio")
    text = render("pages", {MATCHING: {**{f: Confusion() for f in FAMILIES}, CHAIN: c},
                            SHIPPED: {**{f: Confusion() for f in FAMILIES}, CHAIN: shipped}})
    assert "| chain | 5 | 40.0% | 1 | 1 | 2 | 1 | 0.0% |" in text
    # Every class is listed with its example and cause; an unknown class says it is not explained.
    assert "| matching | chain | keep | gq:alpha | 2 | `c` | **not explained** |" in text
    assert "| shipped | chain | keep | fineweb:line_punct_ratio | 1 | `f` | as fineweb's" in text


def test_explained_classes():
    assert "min_chars" in explain("c4", "too_short", "keep")
    assert "blank line" in explain("chain", "keep", "gopher_repetition:top_2_gram")
    assert explain("chain", "keep", "gopher_quality:gopher_below_alpha_threshold") == "**not explained**"


def test_chain_stops_at_the_first_family_that_drops_and_passes_the_cleaned_text_on():
    seen = []

    def decide(family, text):
        seen.append((family, text))
        if family == "c4":
            return None, text.upper()
        return ("too_loud" if family == "gopher_quality" else None), text

    assert chain(decide, "page") == "gopher_quality:too_loud"
    assert seen == [("c4", "page"), ("gopher_repetition", "PAGE"), ("gopher_quality", "PAGE")]


def test_lmforge_side_runs_the_paper_variant():
    cfg = lmforge_config()
    assert cfg.c4.variant == "paper" and cfg.c4.min_sentences == 5
    line = "Debian is a free operating system for your computer and many other devices."
    assert lmforge_family("c4", "\n".join([line] * 4), cfg)[0] == "c4_too_few_sentences"
    reason, text = lmforge_family("c4", "\n".join([line] * 5) + "\nmenu", cfg)
    assert reason is None and text == "\n".join([line] * 5)
    assert chain(lambda f, t: lmforge_family(f, t, cfg), "\n".join([line] * 5)).startswith("gopher_repetition:")


def test_goal_is_judged_per_page_set():
    from bench.corpus.agreement import judge

    def results(pairs):
        out = {MATCHING: {f: Confusion() for f in (*FAMILIES, CHAIN)}, SHIPPED: {f: Confusion() for f in (*FAMILIES, CHAIN)}}
        for i, (ours, theirs) in enumerate(pairs):
            out[MATCHING][CHAIN].add(str(i), ours, theirs)
            out[SHIPPED][CHAIN].add(str(i), ours, theirs)
        return out

    agree = results([(None, None)] * 99 + [(None, "gopher_repetition:top_2_gram")])  # 99%, explained
    bad = results([(None, None)] * 97 + [(None, "gopher_quality:gopher_short_doc")] * 3)  # 97%, unexplained
    text = judge({"a": agree, "b": bad})
    assert "- a: matching: chain 99.0%, disagreements in unexplained classes 0; shipped: chain 99.0%, unexplained 0 -> met" in text
    assert "- b: matching: chain 97.0%, disagreements in unexplained classes 3;" in text and "unexplained 3 -> NOT MET" in text
    assert "**NOT MET** on 2 page set(s)." in text
    assert "**MET**" in judge({"a": agree})
