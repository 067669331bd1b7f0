"""The whole DAG once with `objective: t5_span` on a user's own crawl and labelled file (tests/integration/user_case.py,
the causal run's data; the bundled sample's T5 run is `lmforge run --objective t5_span --preset tiny`), and what
reads that run.

T5's span corruption through every stage: a unigram tokenizer with sentinels, t5_span shards, a T5
(T5ForConditionalGeneration), fine-tuned as a classifier (T5ForSequenceClassification: the decoder's state at the
closing </s>), distilled into half of each stack, compressed to int8 (head pruning refused for it, with the reason),
the evaluation report on the span-corruption loss beside the unigram control of the train targets, and the card with
each model's quality beside its controls and cost.
"""
from __future__ import annotations

import json

import pytest

from tests.integration.family_run import check_report_and_card, check_stages, user_case_run

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def t5(prefect_api, tmp_path_factory):
    with user_case_run(tmp_path_factory.mktemp("t5-run"), "t5", "t5_span", card={"cost_repeats": 1}) as r:  # no probing: tested on BERT
        yield r


def test_a_t5_span_run_trains_a_t5_end_to_end(t5):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    run = t5.run
    check_stages(run, t5.result, "unigram", "t5_span")
    teacher = AutoModelForSeq2SeqLM.from_pretrained(run / "pretrain" / "hf")
    assert type(teacher).__name__ == "T5ForConditionalGeneration"
    tok = AutoTokenizer.from_pretrained(run / "pretrain" / "hf")
    ids = tok("The weather is <extra_id_0> today", return_tensors="pt").input_ids
    assert tok.convert_tokens_to_ids("<extra_id_0>") in ids[0].tolist()  # the sentinel is one token
    with torch.no_grad():
        assert teacher.generate(ids, max_new_tokens=4, do_sample=False).shape[1] >= 2
    student = json.loads((run / "distill" / "hf" / "config.json").read_text())
    assert student["architectures"] == ["T5ForConditionalGeneration"]
    assert (student["num_layers"], student["num_decoder_layers"]) == ((teacher.config.num_layers + 1) // 2,
                                                                       (teacher.config.num_decoder_layers + 1) // 2)
    clf = pipeline("text-classification", model=str(run / "finetune" / "hf"))
    assert type(clf.model).__name__ == "T5ForSequenceClassification"
    assert clf("What a wonderful day")[0]["label"] in clf.model.config.label2id


def test_its_report_and_card_score_t5_beside_its_controls(t5):
    check_report_and_card(t5.run, "seq2seq")
    card = json.loads((t5.run / "card" / "report.json").read_text())["models"]
    # teacher and student prompted with the task, the label word the span after the first sentinel
    for lm in card[:2]:
        f = lm["quality"]["few_shot"]
        assert f["applies"] and 0 <= f["accuracy"] <= 1 and f["test_examples"] > 0, f
        assert f["closing"] == "<extra_id_0></s>"
        assert f["majority"] == pytest.approx(card[2]["quality"]["task"]["controls"]["majority"], abs=1e-3)
    assert "few_shot" not in card[2]["quality"]
    assert "as the decoder's target after the sentinel" in (t5.run / "card" / "report.md").read_text()
