"""The tokenizer stage: each model family trains on real text in milliseconds, saves, loads with
AutoTokenizer and keeps its special-token contract; byte_bpe round-trips any string; the
training sample is bounded and deterministic."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.tokenizer import (
    BERT,
    MODELS,
    ROBERTA,
    SPECIALS,
    T5,
    TokenizerConfig,
    choose_sample,
    corpus_files,
    run,
    sample_texts,
    save,
    special_ids,
    train,
)
from schemas.manifest import Manifest, read_manifest, sha256_file, verify_outputs, write_manifest

VADER = Path(__file__).resolve().parents[2] / "samples" / "labeled" / "vader"

# Real Russian prose (public domain): Anna Karenina and Crime and Punishment open the training
# text; Eugene Onegin is held out.
RU = ("Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему. "
      "Все смешалось в доме Облонских. Жена узнала, что муж был в связи с бывшею в их доме француженкою-гувернанткой, "
      "и объявила мужу, что не может жить с ним в одном доме.")
RU_2 = ("В начале июля, в чрезвычайно жаркое время, под вечер, один молодой человек вышел из своей каморки, "
        "которую нанимал от жильцов в С-м переулке, на улицу и медленно, как бы в нерешимости, отправился к К-ну мосту.")
RU_HELD_OUT = "Мой дядя самых честных правил, когда не в шутку занемог, он уважать себя заставил и лучше выдумать не мог."


def vader_sentences(name: str, n: int, skip: int = 0) -> list[str]:
    """Sentences of a VADER ground-truth file (`id <tab> score <tab> text`), human-written and rated."""
    lines = (VADER / f"{name}_GroundTruth.txt").read_text(encoding="utf-8").splitlines()
    return [ln.split("\t", 2)[2] for ln in lines[skip:skip + n]]


TEXTS = vader_sentences("tweets", 300) + vader_sentences("movieReviewSnippets", 200) + [RU, RU_2] * 5
EN_HELD_OUT = vader_sentences("tweets", 1, skip=2000)[0]
VOCAB = {"wordpiece": 400, "bpe": 400, "byte_bpe": 500, "unigram": 500}  # small: trains in milliseconds


@pytest.fixture(scope="module")
def trained() -> dict:
    return {m: train(TEXTS, m, VOCAB[m], min_frequency=2, extra_ids=100) for m in MODELS}


def load(tok, model: str, tmp_path: Path):
    from transformers import AutoTokenizer

    save(tok, tmp_path / model, model, model_max_length=128)
    return AutoTokenizer.from_pretrained(str(tmp_path / model))


@pytest.mark.parametrize("model", MODELS)
def test_each_model_trains_saves_and_loads_with_its_specials(model, trained, tmp_path):
    tok = trained[model]
    hf = load(tok, model, tmp_path)
    spec = SPECIALS[model]
    for i, t in enumerate(spec.tokens):  # the family's specials take ids 0.. in its order
        assert tok.token_to_id(t) == i and hf.convert_tokens_to_ids(t) == i
    for role, t in spec.roles.items():
        assert getattr(hf, role) == t and getattr(hf, f"{role}_id") == spec.tokens.index(t), role
    assert hf.model_max_length == 128 and len(hf) == tok.get_vocab_size() <= VOCAB[model]
    ids = hf("The movie was good.")["input_ids"]
    if spec is BERT:
        assert (ids[0], ids[-1]) == (hf.cls_token_id, hf.sep_token_id)
    elif spec is ROBERTA:
        assert (ids[0], ids[-1]) == (hf.bos_token_id, hf.eos_token_id) == (0, 2)
    else:  # T5: no bos, </s> closes the text
        assert ids[-1] == hf.eos_token_id == 1 and ids[0] not in (hf.pad_token_id, hf.unk_token_id)
    inner = ids[1:-1] if spec is not T5 else ids[:-1]
    assert inner and hf.unk_token_id not in inner and not set(inner) & set(range(len(spec.tokens)))
    assert special_ids(hf) == special_ids(tok) == special_ids(tok.get_vocab())


def test_special_ids_per_family(trained):
    bert, roberta, t5 = (special_ids(trained[m]) for m in ("wordpiece", "byte_bpe", "unigram"))
    assert bert == {"family": "bert", "pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4, "bos": None, "eos": None,
                    "sentinels": []}
    assert roberta == {"family": "roberta", "bos": 0, "cls": 0, "pad": 1, "eos": 2, "sep": 2, "unk": 3, "mask": 4,
                       "sentinels": []}
    assert special_ids(trained["bpe"]) == roberta
    assert {k: t5[k] for k in ("family", "pad", "eos", "sep", "unk", "mask", "cls", "bos")} == {
        "family": "t5", "pad": 0, "eos": 1, "sep": 1, "unk": 2, "mask": None, "cls": None, "bos": None}
    with pytest.raises(ValueError, match="not an lmforge tokenizer"):
        special_ids({"hello": 0, "[PAD]": 1})


@pytest.mark.parametrize("text", [
    EN_HELD_OUT,
    RU_HELD_OUT,
    "Ёлка и йогурт: «ёж» — ЙЦУКЕН.",
    "Emoji 👍🏽 and a family 👨‍👩‍👧, a flag 🇷🇺 and 中文 never seen in training.",
    "  tabs\tand\u00a0no-break\u2009thin  spaces,\r\nCRLF and trailing   \n",
    "decomposed e\u0301 vs composed é, zero width\u200bjoiner, <s> and <mask> as text",
    "",
])
def test_byte_bpe_round_trips_exactly(text, trained, tmp_path):
    tok = trained["byte_bpe"]
    hf = load(tok, "byte_bpe", tmp_path)
    ids = hf(text, add_special_tokens=False)["input_ids"]
    assert hf.unk_token_id not in ids  # every byte has a token, so nothing is unknown
    assert tok.decode(tok.encode(text, add_special_tokens=False).ids, skip_special_tokens=False) == text
    if "<s>" not in text:  # literal special-token text is matched as the token, which skip_special_tokens drops
        assert hf.decode(hf(text)["input_ids"], skip_special_tokens=True) == text


@pytest.mark.parametrize("model", ["bpe", "unigram"])
def test_metaspace_models_decode_seen_text(model, trained):
    tok = trained[model]
    for text in (RU, TEXTS[0]):
        assert tok.decode(tok.encode(text).ids) == text


def test_unigram_has_t5_sentinels(trained, tmp_path):
    tok = trained["unigram"]
    hf = load(tok, "unigram", tmp_path)
    sentinels = special_ids(hf)["sentinels"]
    top = tok.get_vocab_size() - 1
    assert len(sentinels) == 100 and sentinels == list(range(top, top - 100, -1))  # T5: <extra_id_0> is the last id
    assert hf.convert_ids_to_tokens(sentinels[:2]) == ["<extra_id_0>", "<extra_id_1>"]
    assert set(hf.extra_special_tokens) == {f"<extra_id_{i}>" for i in range(100)}
    ids = hf("The plot <extra_id_0> the end <extra_id_1>")["input_ids"]
    assert sentinels[0] in ids and sentinels[1] in ids and ids[-1] == hf.eos_token_id
    cfg = json.loads((tmp_path / "unigram" / "tokenizer_config.json").read_text())
    assert cfg["eos_token"] == "</s>" and cfg["pad_token"] == "<pad>" and "<extra_id_99>" in json.dumps(cfg)


@pytest.mark.parametrize("model", MODELS)
def test_training_twice_gives_identical_bytes(model, tmp_path):
    for run_dir in ("a", "b"):
        save(train(TEXTS, model, VOCAB[model]), tmp_path / run_dir, model)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_choose_sample_is_bounded_deterministic_and_order_free():
    ids = [f"doc-{i}" for i in range(1000)]
    s = choose_sample(ids, 50)
    assert len(s) == 50 and s <= set(ids)
    assert choose_sample(reversed(ids), 50) == s == choose_sample(iter(ids), 50)  # a one-pass stream is enough
    assert choose_sample(ids, 50, seed=1) != s
    assert choose_sample(ids, 60) > s  # bottom-n: a bigger sample contains the smaller one
    assert choose_sample(ids[:10], 50) == set(ids[:10])
    assert 15 < sum(int(i.split("-")[1]) < 500 for i in s) < 35  # spread over the stream, not its head


def write_corpus(root: Path) -> Path:
    """A finished corpus stage: data/en and data/ru Parquet files with real sentences, and a manifest."""
    en = TEXTS[:500]
    ru = [RU, RU_2] * 30
    for lang, texts in (("en", en), ("ru", ru)):
        (root / "data" / lang).mkdir(parents=True)
        table = pa.table({"id": [f"{lang}-{i:04d}" for i in range(len(texts))], "text": texts,
                          "language": [lang] * len(texts)})
        pq.write_table(table, root / "data" / lang / "part-00000-of-00001.parquet", row_group_size=64)
    write_manifest(root, Manifest(stage="corpus", config={}))
    return root


def test_sample_texts_streams_a_fixed_sample_across_files(tmp_path):
    files = corpus_files(write_corpus(tmp_path / "corpus"))
    sample = sample_texts(files, 100)
    first = list(sample())
    assert len(first) == 100 and first == list(sample()) == list(sample_texts(files, 100)())  # re-readable, fixed
    assert sum(t in (RU, RU_2) for t in first) > 0  # Russian files come last; the old first-N sample missed them
    assert len(list(sample_texts(files, 0)())) == 560
    kept = list(sample_texts(files, 100, keep=lambda i: i.startswith("ru-"))())
    assert len(kept) == 60 and set(kept) == {RU, RU_2}


def test_train_needs_texts_it_can_read_twice():
    with pytest.raises(TypeError, match="read them twice"):
        train(iter(TEXTS), "wordpiece", 400)


def test_config_is_validated():
    assert TokenizerConfig(corpus="c", output="o").model == "wordpiece"  # the default is unchanged
    with pytest.raises(ValueError, match="not one of"):
        TokenizerConfig(corpus="c", output="o", model="sentencepiece")
    with pytest.raises(ValueError, match="at least 361"):
        TokenizerConfig(corpus="c", output="o", model="byte_bpe", vocab_size=300)
    with pytest.raises(ValueError, match="at least 203"):
        TokenizerConfig(corpus="c", output="o", model="unigram", vocab_size=200)
    with pytest.raises(ValueError, match="sample"):
        TokenizerConfig(corpus="c", output="o", sample=-1)


def test_run_records_model_specials_and_checksum(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    out = run(TokenizerConfig(corpus=str(corpus), output=str(tmp_path / "tok"), model="unigram", vocab_size=500,
                              sample=200, seed=3))
    m = read_manifest(out)
    verify_outputs(out)
    assert m["counts"]["documents"] == 200 and m["extra"]["sample"] == {"documents": 200, "requested": 200, "seed": 3}
    assert m["extra"]["model"] == "unigram" and m["extra"]["vocab_size"] == m["counts"]["vocab_size"]
    assert m["extra"]["special_tokens"] == {"<pad>": 0, "</s>": 1, "<unk>": 2}
    assert m["extra"]["special_ids"]["eos"] == 1 and m["extra"]["sentinels"]["count"] == 100
    assert m["extra"]["sentinels"]["extra_id_0"] == m["counts"]["vocab_size"] - 1
    assert m["extra"]["tokenizer_json_sha256"] == sha256_file(out / "tokenizer.json")
    assert {o["path"] for o in m["outputs"]} == {"tokenizer.json", "tokenizer_config.json"}
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary directory left behind


def test_bench_helpers_measure_fertility_and_round_trips(trained, tmp_path):
    """The pure parts of bench.data.tokenizer (its main() trains on a whole corpus run, so it is not run here)."""
    from bench.data.tokenizer import held_out, load_held_out, measure

    files = corpus_files(write_corpus(tmp_path / "corpus"))
    texts = load_held_out(files, per_mille=200, cap=50)
    assert set(texts) == {"en", "ru"} and 0 < len(texts["en"]) <= 50 and texts["ru"]
    share = sum(held_out(f"doc-{i}", 200) for i in range(5000)) / 5000
    assert 0.18 < share < 0.22 and not any(held_out(f"doc-{i}", 0) for i in range(100))
    byte = measure(trained["byte_bpe"], [EN_HELD_OUT, RU_HELD_OUT])
    assert byte["exact_round_trip"] == 1.0 and byte["unk_share"] == 0.0
    assert byte["words"] == len(EN_HELD_OUT.split()) + len(RU_HELD_OUT.split()) and 1.0 < byte["fertility"] < 10
    wp = measure(trained["wordpiece"], [RU_HELD_OUT])
    assert wp["exact_round_trip"] == 0.0  # WordPiece's decoder puts spaces around punctuation
