"""N-gram decontamination (pipelines/corpus/decont.py) on real evaluation sets and real pages.

Evaluation sets are prepared offline from what the repo ships: VADER's human-scored sentences
(samples/labeled/vader), the Lee et al. news pairs and the WSJ Treebank excerpt (tests/data/labeled).
Pages are the tiny WARC's (tests/data/tiny). The datatrove cross-checks need the bench extra:
    pip install -c constraints.txt -e '.[bench]'
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.corpus.decont import plant
from pipelines.corpus.decont import (
    DecontConfig,
    EvalItem,
    NGramIndex,
    read_eval_sets,
    simplify,
    tokens_text,
    word_tokens,
)
from pipelines.labeled.registry import prepare
from tests.fixtures import VADER, tiny_pages

DATA = Path(__file__).resolve().parents[1] / "data"
DATATROVE = "datatrove is not installed: pip install -c constraints.txt -e '.[bench]'"
# wsj-0021 (validation) as the Wall Street Journal printed it, i.e. before Treebank split "doesn't".
WSJ_0021 = ("The U.S. is one of the few industrialized nations that doesn't have a higher standard of regulation for the "
            "smooth, needle-like fibers such as crocidolite that are classified as amphobiles")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("labeled")
    return {"vader": prepare("vader", root / "vader", VADER),
            "wsj": prepare("wsj_pos", root / "wsj", DATA / "labeled" / "pattern"),
            "lee": prepare("lee_pairs", root / "lee", DATA / "labeled" / "gensim-4.4.0" / "gensim" / "test" / "test_data")}


@pytest.fixture(scope="module")
def pages() -> list[str]:
    return tiny_pages()


@pytest.fixture(scope="module")
def vader(tasks) -> tuple[list[EvalItem], NGramIndex]:
    cfg = DecontConfig(files=[str(tasks["vader"])])
    items = read_eval_sets(cfg)
    return items, NGramIndex.build(items, cfg)


def test_simplify_pinned():
    cfg = DecontConfig()
    # Outputs of datatrove 0.10.1's simplify_text; "€" is not in its punctuation list, "amd64" has a number.
    assert simplify("Crème brûlée at the Café Müller: €1,000.50 — “best” in 2024!", cfg) == \
        "creme brulee at the cafe muller €0 0 best in 0"
    assert simplify("Le Guide d'installation de Debian GNU/Linux 12 « bookworm », pour l'architecture amd64.", cfg) == \
        "le guide d installation de debian gnu linux 0 bookworm pour l architecture amd0"
    raw = DecontConfig(lowercase=False, remove_punctuation=False, norm_numbers=False, norm_unicode_diacritics=False)
    assert simplify("  Café\t 12,5 ! ", raw) == "Café 12,5 !"
    assert word_tokens("It doesn't need 3.5 GB.", cfg) == ["it", "doesn", "t", "need", "0", "gb"]


def test_reads_prepared_tasks(tasks):
    items = read_eval_sets(DecontConfig(files=[str(p) for p in tasks.values()]))
    by_task = {t: [it for it in items if it.task == t] for t in ("vader", "wsj", "lee")}
    rows = [json.loads(x) for x in (tasks["vader"] / "data.jsonl").read_text().splitlines()]
    assert len(by_task["vader"]) == sum(r["split"] in ("validation", "test") for r in rows) > 4000
    assert {it.split for it in items} == {"validation", "test"}
    assert by_task["vader"][0].item.startswith(("tweets:", "movieReviewSnippets:", "amazonReviewSnippets:", "nyt"))
    wsj = next(it for it in by_task["wsj"] if it.item == "wsj-0021")
    assert "nations that doesn't have a higher standard" in wsj.text  # Treebank "does n't" rejoined
    lee = by_task["lee"][0]  # a pair: both documents, one per line
    assert lee.text.count("\n") == 1 and lee.item.startswith("lee-")
    assert tokens_text(["-LRB-", "Congress", "has", "n't", "acted", "-RRB-", "``", "yet", "''"]) == '( Congress hasn\'t acted ) " yet "'


def test_planted_sentences_are_found_and_clean_pages_are_not(vader, pages):
    items, index = vader
    assert len(pages) > 100 and all(index.match(p) is None for p in pages)
    long = [it for it in items if len(word_tokens(it.text, index.cfg)) >= 20][:25]
    assert len(long) == 25
    for j, it in enumerate(long):
        for way in ("whole", "inside", "changed"):
            m = index.match(plant(pages[j], it.text, way))
            assert m is not None and it.ref in m.items, (way, it)
            assert m.ngram in " ".join(word_tokens(it.text, index.cfg))
    # One n-gram is enough; n - 1 words of an item are not.
    toks = word_tokens(it.text, index.cfg)
    assert index.match(" ".join(toks[3:3 + index.cfg.n_grams])).ngram == " ".join(toks[3:3 + index.cfg.n_grams])
    assert index.match(" ".join(toks[:index.cfg.n_grams - 1])) is None


def test_token_task_matches_the_printed_sentence(tasks, pages):
    cfg = DecontConfig(files=[str(tasks["wsj"])])
    index = NGramIndex.build(read_eval_sets(cfg), cfg)
    m = index.match(plant(pages[0], WSJ_0021, "inside"))
    assert m is not None and [r.item for r in m.items] == ["wsj-0021"]


def test_too_short_items_are_counted(vader):
    items, index = vader
    n = index.cfg.n_grams
    short = sum(len(word_tokens(it.text, index.cfg)) < n for it in items)
    assert index.items_per_task() == {"vader": len(items)}
    assert index.too_short == {"vader": short} and 0 < short < len(items)


def test_save_and_load(vader, pages, tmp_path):
    items, index = vader
    index.save(tmp_path / "vader.npz")
    loaded = NGramIndex.load(tmp_path / "vader.npz", DecontConfig())
    assert loaded.items == index.items and loaded.too_short == index.too_short
    long = next(it for it in items if len(word_tokens(it.text, index.cfg)) >= 15)
    assert loaded.match(plant(pages[1], long.text, "whole")) == index.match(plant(pages[1], long.text, "whole"))
    with pytest.raises(ValueError, match=r"vader\.npz: index built with other options.*n_grams=12 \(asked 8\)"):
        NGramIndex.load(tmp_path / "vader.npz", DecontConfig(n_grams=8))
    (tmp_path / "bad.npz").write_text("not an index")
    with pytest.raises(ValueError, match=r"bad\.npz: not a decontamination index"):
        NGramIndex.load(tmp_path / "bad.npz")


def test_bare_files_csv_and_parquet(tmp_path):
    lines = (VADER / "nytEditorialSnippets_GroundTruth.txt").read_text(encoding="utf-8").splitlines()[:6]
    texts = [ln.split("\t", 2)[2] for ln in lines]
    (tmp_path / "nyt.csv").write_text("split,text\n" + "".join(f'{s},"{t}"\n' for s, t in zip(
        ["test", "train", "validation", "test", "train", "test"], texts)), encoding="utf-8")
    pq.write_table(pa.table({"id": ["a", "b"], "sentence": texts[:2], "split": ["test", "test"]}), tmp_path / "p.parquet")
    items = read_eval_sets(DecontConfig(files=[str(tmp_path / "nyt.csv")], splits=["test"]))
    assert [(it.task, it.item, it.text) for it in items] == [("nyt", "line 2", texts[0]), ("nyt", "line 5", texts[3]),
                                                             ("nyt", "line 7", texts[5])]
    items = read_eval_sets(DecontConfig(files=[str(tmp_path / "p.parquet")], text_column="sentence"))
    assert [(it.task, it.split, it.item) for it in items] == [("p", "test", "a"), ("p", "test", "b")]


@pytest.mark.parametrize("name, content, error", [
    ("missing.jsonl", None, r"cannot read the evaluation set"),
    ("empty.jsonl", "\n", r"no records"),
    ("nosplit.jsonl", '{"id": 1, "text": "A real sentence."}\n', r":line 1: no 'split' column"),
    ("nosplit.csv", "id,text\n1,A real sentence.\n", r":line 2: no 'split' column"),
    ("notext.jsonl", '{"split": "test", "sentence": "A real sentence."}\n', r":line 1: no 'text' text column"),
    ("train.jsonl", '{"split": "train", "text": "A real sentence."}\n', r"no record in splits validation, test \(found: train\)"),
    ("broken.jsonl", '{"split": "test", "text": "A real sentence."}\n{"split": \n', r":line 2: not a JSON object"),
    ("eval.txt", "A real sentence.\n", r"not an evaluation set"),
])
def test_bad_evaluation_files(tmp_path, name, content, error):
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{path}" + ".*" + error):
        read_eval_sets(DecontConfig(files=[str(path)]))


def test_config_checks_itself(tmp_path):
    for bad in ({"n_grams": 0}, {"mode": "remove"}, {"splits": []}):
        with pytest.raises(ValueError, match="decontaminate"):
            DecontConfig(**bad)
    (tmp_path / "x").mkdir()
    with pytest.raises(ValueError, match=r"x/finetune\.json: not a prepared labelled task"):
        read_eval_sets(DecontConfig(files=[str(tmp_path / "x")]))


def test_same_ngrams_and_decisions_as_datatrove(vader, pages, tasks):
    pytest.importorskip("datatrove", reason=DATATROVE)
    from datatrove.pipeline.decont.n_grams import NGramsDecontIndexer
    from datatrove.utils.text import TextNormConfig, simplify_text

    from bench.corpus.decont import datatrove_indexer, decont_agreement

    items, index = vader
    dt = datatrove_indexer(index.cfg)
    others = read_eval_sets(DecontConfig(files=[str(tasks["wsj"]), str(tasks["lee"])]))
    texts = pages + [it.text for it in items[:300]] + [it.text for it in others[:60]]
    for text in texts:
        assert simplify(text, index.cfg) == simplify_text(text)
        toks = word_tokens(text, index.cfg)
        ngrams = [" ".join(toks[k:k + 12]) for k in range(len(toks) - 11)]
        assert NGramsDecontIndexer.compute_hashes(dt, text) == list(map(dt.hash_func, ngrams))
    odd = ["p \u0301 q", "١٢٣٫٤٥ apples on Monday, 3 May", "tab\there\x0bvt\x85nel ", "ÉCOLE Ⅻ ½ ² ﬁ"]
    for c in (DecontConfig(lowercase=False, norm_weekdays=True, norm_monthnames=True), DecontConfig(norm_numbers=False),
              DecontConfig(remove_punctuation=False), DecontConfig(norm_whitespace=False, norm_unicode_diacritics=False)):
        norm = TextNormConfig(**{k: v for k, v in c.norm().items() if k not in ("n_grams", "skip_number_ngrams")})
        assert all(simplify(text, c) == simplify_text(text, norm) for text in odd + pages[:30])
    as_datatrove = DecontConfig(files=index.cfg.files, skip_number_ngrams=False)  # datatrove indexes figures-only n-grams
    report = decont_agreement(pages[:40], items[:400], as_datatrove, max_planted=30)
    assert report["agreement"]["same_decision"] == report["agreement"]["docs"] == 40 + 3 * 30
    assert report["agreement"]["same_ngram"] == report["agreement"]["docs"]
    assert all(r["recall"] == 1.0 for r in report["planted"].values())
    assert report["clean_flagged"] == [] and report["docs_per_s"]["lmforge"] > 0


def test_figures_only_ngrams_are_left_out_unless_asked():
    """A row of figures normalises to '0 0 0 ...', which any table shares (28 clean sample-crawl pages
    matched one Reuters test table that way, bench corpus): lmforge leaves such n-grams out by default."""
    table = EvalItem("reuters", "test", "t1", " ".join(str(1000 + 7 * i) for i in range(20)))
    prose = EvalItem("reuters", "test", "t2", "Net profit rose to 12.5 mln dlrs from 9.1 mln dlrs a year earlier, the company said.")
    page = "Build 2024 1 2 3 4 5 6 7 8 9 10 11 12 13 done. " + prose.text.lower()
    default = NGramIndex.build([table, prose], DecontConfig())
    assert default.too_short == {"reuters": 1}  # the table has nothing left to look for
    m = default.match(page)
    assert m is not None and [r.item for r in m.items] == ["t2"]
    datatrove_way = NGramIndex.build([table, prose], DecontConfig(skip_number_ngrams=False))
    assert [r.item for r in datatrove_way.match(page).items] == ["t1"]  # twelve figures matched first
