"""The whole DAG once with `objective: causal`, on a user's own crawl and labelled file, and what reads that run.

The same user case as test_dag_e2e's shared run (an English JSONL crawl with planted tweets, a labelled CSV with its
own column names, the tiny preset), with the objective that trains a decoder: byte-level BPE, causal shards, a
Llama-style decoder (LlamaForCausalLM), fine-tuned as a classifier on its last token, distilled DistilGPT2's way
into half its blocks, compressed to int8 (head pruning is refused for decoders, with the reason, not failed), the
evaluation report on next-token loss and the card with each model's quality beside its controls and cost.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.integration.user_case import user_case

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def causal(prefect_api, tmp_path_factory):
    from flows.dag import lmforge_dag

    work = tmp_path_factory.mktemp("causal-run")
    params, facts = user_case(work)
    params = {**params, "runs_dir": str(work / "runs")}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setenv("LMFORGE_DATA_ROOT", f"{ROOT}:{work}")
        result = lmforge_dag(run_name="decoder", preset="tiny", objective="causal", **params)
        yield SimpleNamespace(run=work / "runs" / "decoder", result=result, facts=facts)


def test_a_causal_run_trains_a_llama_decoder_end_to_end(causal):
    from transformers import pipeline

    from schemas.manifest import read_manifest, verify_outputs

    run, result = causal.run, causal.result
    assert result["pruned"] is None and all(result[k] for k in ("corpus", "tokenizer", "shards", "pretrain", "finetune",
                                                                 "distill", "student_finetune", "int8", "eval", "card"))
    for stage in ("tokenizer", "shards", "pretrain", "finetune", "distill", "eval", "card"):
        verify_outputs(run / stage)
    assert read_manifest(run / "tokenizer")["config"]["model"] == "byte_bpe"  # the objective's tokenizer
    assert read_manifest(run / "shards")["extra"]["objective"] == "causal"

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
    run = causal.run
    report = json.loads((run / "eval" / "report.json").read_text())
    assert report["causal"] and report["figure"] == "next-token loss"
    assert 0 < report["teacher"]["mlm_loss"] and report["student"]["params"] < report["teacher"]["params"]
    assert report["unigram_control"] > 0  # token frequencies alone, on the same next tokens
    assert set(report["finetune"]["test"]) == {"pretrained", "scratch", "majority", "tfidf_lr"}
    md = (run / "eval" / "report.md").read_text()
    assert "held-out next-token loss" in md and "masked-token" not in md

    assert "the pruned model: head pruning is for BERT-style encoders" in (run / "card" / "report.md").read_text()
    card = json.loads((run / "card" / "report.json").read_text())["models"]
    assert [e["name"] for e in card] == ["teacher", "student", "fine-tuned", "student fine-tuned", "int8"]
    assert [e["kind"] for e in card] == ["causal_lm", "causal_lm", "classifier", "classifier", "classifier"]
    lm = card[0]["quality"]
    assert lm["figure"].startswith("held-out next-token") and lm["perplexity"] > 1 and lm["unigram_control"] > 0
    task = card[2]["quality"]["task"]
    assert set(task["controls"]) >= {"majority", "tfidf_lr", "scratch"}
    assert all(e["cost"]["encoder_only"]["inputs_per_second_median"] > 0 and e["cost"]["disk_bytes"] > 0 for e in card)
