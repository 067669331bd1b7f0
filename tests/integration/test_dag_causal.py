"""The whole DAG once with `objective: causal`, on a user's own crawl and labelled file, and what reads that run.

The same user case as test_dag_e2e's shared run (an English JSONL crawl with planted tweets, a labelled CSV with its
own column names, the tiny preset), with the objective that trains a decoder: byte-level BPE, causal shards, a
Llama-style decoder (LlamaForCausalLM), fine-tuned as a classifier on its last token, distilled DistilGPT2's way
into half its blocks, compressed to int8 (head pruning is refused for decoders, with the reason, not failed), the
evaluation report on next-token loss and the card with each model's quality beside its controls and cost.
"""
from __future__ import annotations

import json

import pytest

from tests.integration.family_run import check_report_and_card, check_stages, user_case_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def causal(prefect_api, tmp_path_factory):
    with user_case_run(tmp_path_factory.mktemp("causal-run"), "decoder", "causal") as r:
        yield r


def test_a_causal_run_trains_a_llama_decoder_end_to_end(causal):
    from transformers import pipeline

    run = causal.run
    check_stages(run, causal.result, "byte_bpe", "causal")
    gen = pipeline("text-generation", model=str(run / "pretrain" / "hf"))
    assert type(gen.model).__name__ == "LlamaForCausalLM"
    assert gen("The weather", max_new_tokens=4, do_sample=False)[0]["generated_text"].startswith("The weather")
    student = json.loads((run / "distill" / "hf" / "config.json").read_text())
    assert student["architectures"] == ["LlamaForCausalLM"]
    assert student["num_hidden_layers"] < gen.model.config.num_hidden_layers
    clf = pipeline("text-classification", model=str(run / "finetune" / "hf"))
    assert type(clf.model).__name__ == "LlamaForSequenceClassification"
    assert clf("What a wonderful day")[0]["label"] in clf.model.config.label2id


def test_its_report_and_card_score_decoders_beside_their_controls(causal):
    report = check_report_and_card(causal.run, "causal_lm")
    assert report["causal"] and "masked-token" not in (causal.run / "eval" / "report.md").read_text()
    card = json.loads((causal.run / "card" / "report.json").read_text())["models"]
    assert card[0]["quality"]["perplexity"] > 1
    # the decoders prompted with the task (few-shot, no fine-tune) beside the majority class, the prompt written down
    for lm in card[:2]:
        f = lm["quality"]["few_shot"]
        assert f["applies"] and 0 <= f["accuracy"] <= 1 and f["test_examples"] > 0 and f["shots"] == 3
        assert f["majority"] == pytest.approx(card[2]["quality"]["task"]["controls"]["majority"], abs=1e-3)
    assert "few_shot" not in card[2]["quality"]  # a classifier is scored by its head
    assert "Few-shot prompt" in (causal.run / "card" / "report.md").read_text()
