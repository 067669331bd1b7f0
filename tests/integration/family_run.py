"""What every non-BERT whole-DAG run must show, whatever its model family (tests/integration/test_dag_causal.py's
Llama-style decoder, test_dag_t5.py's T5): every stage finished but head pruning (refused for it, with the reason),
the objective's tokenizer and shards, the evaluation report on the family's loss beside its unigram control and the
fine-tune's controls, and the card with each model's kind, quality and cost."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]

@contextlib.contextmanager
def user_case_run(work: Path, run_name: str, objective: str, card: dict | None = None):
    """The whole DAG at the tiny preset with `objective` on the user case (tests/integration/user_case.py) under
    `work`, from the checkout with `work` in the data root; yields (run folder, result, the planted facts) while
    that environment holds. `card`: the card's options in place of the user case's."""
    import pytest

    from flows.dag import lmforge_dag
    from tests.integration.user_case import user_case

    params, facts = user_case(work)
    if card is not None:
        params = {**params, "overrides": {**params["overrides"], "card": card}}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setenv("LMFORGE_DATA_ROOT", f"{ROOT}:{work}")
        result = lmforge_dag(run_name=run_name, runs_dir=str(work / "runs"), preset="tiny", objective=objective, **params)
        yield SimpleNamespace(run=work / "runs" / run_name, result=result, facts=facts)


STAGES = ("corpus", "tokenizer", "shards", "pretrain", "finetune", "distill", "student_finetune", "int8", "eval", "card")


def check_stages(run: Path, result: dict, tokenizer: str, objective: str) -> None:
    from schemas.manifest import read_manifest, verify_outputs

    assert result["pruned"] is None and all(result[k] for k in STAGES)
    for stage in ("tokenizer", "shards", "pretrain", "finetune", "distill", "eval", "card"):
        verify_outputs(run / stage)
    assert read_manifest(run / "tokenizer")["config"]["model"] == tokenizer  # the objective's tokenizer
    assert read_manifest(run / "shards")["extra"]["objective"] == objective


def check_report_and_card(run: Path, kind: str) -> dict:
    """The evaluation report and the card of a run whose pretrained models are of `kind`; returns the report."""
    from training.models.model_kinds import KINDS

    report = json.loads((run / "eval" / "report.json").read_text())
    assert report["kind"] == kind and report["figure"] == KINDS[kind].loss_name
    assert 0 < report["teacher"]["mlm_loss"] and report["student"]["params"] < report["teacher"]["params"]
    assert report["unigram_control"] > 0  # token frequencies alone, on the same tokens
    assert set(report["finetune"]["test"]) == {"pretrained", "scratch", "majority", "tfidf_lr"}
    md = (run / "eval" / "report.md").read_text()
    assert f"held-out {KINDS[kind].loss_name}" in md and f"Held-out {KINDS[kind].scored_tokens}" in md

    assert "the pruned model: head pruning is for BERT-style encoders" in (run / "card" / "report.md").read_text()
    card = json.loads((run / "card" / "report.json").read_text())["models"]
    assert [e["name"] for e in card] == ["teacher", "student", "fine-tuned", "student fine-tuned", "int8"]
    assert [e["kind"] for e in card] == [kind, kind, "classifier", "classifier", "classifier"]
    lm = card[0]["quality"]
    assert lm["figure"] == KINDS[kind].lm_figure and lm["unigram_control"] > 0
    task = card[2]["quality"]["task"]
    assert set(task["controls"]) >= {"majority", "tfidf_lr", "scratch"}
    assert all(e["cost"]["encoder_only"]["inputs_per_second_median"] > 0 and e["cost"]["disk_bytes"] > 0 for e in card)
    return report
