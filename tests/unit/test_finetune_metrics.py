"""Fine-tune metrics against values computed by hand, label alignment for tokens, the metrics schema."""
from __future__ import annotations

import math

import pytest

from schemas.finetune import Score
from training.finetuning.encode import align_tags, first_subwords
from training.finetuning.metrics import classification_metrics, regression_metrics, token_metrics


def test_classification_metrics_by_hand():
    gold, pred = [0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]
    m = classification_metrics(gold, pred, 3)
    assert m["accuracy"] == pytest.approx(4 / 6)
    # per-class F1: class 0 P=1/2 R=1/2 -> 0.5; class 1 P=2/3 R=1 -> 0.8; class 2 P=1 R=1/2 -> 2/3
    assert m["macro_f1"] == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    # Gorodkin's R_K: (c*s - sum p_k t_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2)), c=4, s=6, p=(2,3,1), t=(2,2,2)
    assert m["mcc"] == pytest.approx((4 * 6 - (4 + 6 + 2)) / math.sqrt((36 - 14) * (36 - 12)))


def test_macro_f1_counts_a_class_never_predicted_as_zero():
    m = classification_metrics([0, 1, 2], [0, 1, 1], 3)
    assert m["macro_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)  # class 1: P=1/2 R=1 -> 2/3


def test_regression_metrics_by_hand():
    m = regression_metrics([1, 2, 3, 4], [1, 3, 2, 4])
    # deviations (-1.5,-.5,.5,1.5) and (-1.5,.5,-.5,1.5): sum of products 4, sums of squares 5 -> 0.8
    assert m["pearson"] == pytest.approx(0.8) and m["spearman"] == pytest.approx(0.8)
    assert m["mse"] == pytest.approx(0.5)
    const = regression_metrics([1, 2, 3], [2, 2, 2])
    assert const["pearson"] == 0.0 and const["mse"] == pytest.approx(2 / 3)


def test_entity_f1_by_hand_and_conlleval_start_rule():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "B-ORG"]]
    m = token_metrics(gold, pred, bio=True)
    # gold entities PER, LOC, ORG; predicted PER, ORG, ORG; 2 right -> P = R = F1 = 2/3
    assert m["entity_f1"] == pytest.approx(2 / 3) and m["entity_precision"] == pytest.approx(2 / 3)
    assert m["token_accuracy"] == pytest.approx(5 / 6)
    # conlleval (seqeval's default): an I- tag after O starts an entity, so these are the same span
    assert token_metrics([["I-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]], bio=True)["entity_f1"] == 1.0
    # a span one word short is wrong as a whole
    assert token_metrics([["B-PER", "I-PER"]], [["B-PER", "O"]], bio=True)["entity_f1"] == 0.0
    # BIOES
    assert token_metrics([["S-LOC", "B-PER", "E-PER"]], [["S-LOC", "B-PER", "E-PER"]], bio=True)["entity_f1"] == 1.0
    pos = token_metrics([["DET", "NOUN"]], [["DET", "VERB"]], bio=False)
    assert pos == {"token_accuracy": 0.5}


def test_align_tags_first_subword_only():
    # [CLS] Peter Black ##burn runs [SEP]
    word_ids = [None, 0, 1, 1, 2, None]
    assert align_tags(word_ids, [3, 4, 0]) == [-100, 3, 4, -100, 0, -100]
    assert first_subwords(word_ids) == {0: 1, 1: 2, 2: 4}
    # a word cut off by truncation has no position
    assert first_subwords([None, 0, 0, None]) == {0: 1}


def test_align_tags_with_a_real_tokenizer(tmp_path):
    from tests.fixtures import tiny_bert_dir
    from training.finetuning.dataset import Example, TaskData
    from training.finetuning.encode import encode

    model_dir = tiny_bert_dir(tmp_path)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    ex = Example("a", "x:1", tokens=("Unbelievably", "good", "."), tags=("B-X", "O", "O"))
    data = TaskData("tokens", [ex], [ex], [ex], ["B-X", "O"])
    enc = encode(data, "train", tok, max_length=64)
    wid = enc.word_ids[0]
    labelled = [(w, lab) for w, lab in zip(wid, enc.labels[0]) if lab != -100]
    assert [lab for _, lab in labelled] == [0, 1, 1] and [w for w, _ in labelled] == [0, 1, 2]
    assert len(wid) > 5  # "Unbelievably" is several sub-words, only the first labelled
    short = encode(data, "train", tok, max_length=4)
    assert short.counts["train_words_without_prediction"] >= 1


def test_score_mean_and_sample_sd():
    s = Score.of({"1": 0.8, "2": 0.9, "3": 1.0})
    assert s.mean == pytest.approx(0.9) and s.sd == pytest.approx(0.1)
    assert Score.of({"null": 0.5}).sd == 0.0 and Score.of({"1": None}).mean is None


def test_the_tokenizers_fit_is_counted_per_split_and_a_poor_fit_warns(tmp_path):
    from transformers import AutoTokenizer

    from tests.fixtures import tiny_bert_dir
    from training.finetuning.dataset import Example, TaskData
    from training.finetuning.encode import encode, fit_line

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir(tmp_path))
    ex = Example("a", "x:1", tokens=("Unbelievably", "good", "."), tags=("B-X", "O", "O"))
    counts = encode(TaskData("tokens", [ex], [ex], [ex], ["B-X", "O"]), "test", tok, max_length=64).counts
    plain = tok(["Unbelievably", "good", "."], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    assert counts["test_words"] == 3 and counts["test_tokens"] == len(plain) > 3  # no [CLS] or [SEP] counted
    text = Example("b", "x:2", text="good ☃☃☃ news", label="pos")
    counts = encode(TaskData("classification", [text], [text], [text], ["pos"]), "test", tok, max_length=64).counts
    assert counts["test_words"] == 3 and counts["test_unknown_tokens"] >= 1  # the snowmen are not in its vocabulary
    line, warning = fit_line(counts)
    assert line.endswith("unknown tokens on the test text") and "tokens per word" in line
    assert warning.startswith("the tokenizer fits the test text poorly") and "of its tokens are unknown" in warning
    assert fit_line({"test_tokens": 130, "test_words": 100, "test_unknown_tokens": 0}) == (
        "1.30 tokens per word, 0.0% unknown tokens on the test text", None)
    assert fit_line({"test_examples": 5}) == ("", None)  # a fine-tune from before the counts: nothing said
