"""The whole DAG, as the Prefect flow, on tests/data/tiny (real pages, tiny sizes)."""
from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("corpus", "tokenizer", "shards", "pretrain", "labeled", "finetune", "distill", "eval")


# Credentials a user's worker holds: one in its environment, one in the Secret block the run names (under a
# name that does not look like a credential, so only the block's LMFORGE_SECRET_VARS can mask it)
PLANTED_ENV, PLANTED_BLOCK = "planted-env-secret-7Qx2", "planted-block-secret-9Zk4"


@pytest.mark.slow
def test_dag_end_to_end(tmp_path, monkeypatch, capfd):
    from prefect.blocks.system import Secret

    from flows.dag import lmforge_dag
    from schemas.manifest import read_manifest, verify_outputs
    from tests.fixtures import files_holding

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", f"{ROOT}:{tmp_path}")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", PLANTED_ENV)
    for name in ("LMFORGE_SECRET_VARS", "LMFORGE_TEST_STORE"):  # set by the flow; restored after the test
        monkeypatch.setenv(name, "")
    Secret(value={"LMFORGE_TEST_STORE": PLANTED_BLOCK}).save("lmforge-test-store", overwrite=True)
    crawl = sorted(glob.glob(str(ROOT / "tests/data/tiny/*.warc.gz")) + glob.glob(str(ROOT / "tests/data/tiny/*.wet")))
    result = lmforge_dag(run_name="e2e", runs_dir=str(tmp_path), crawl=crawl, preset="tiny", labeled="vader",
                         credentials_block="lmforge-test-store")
    assert os.environ["LMFORGE_TEST_STORE"] == PLANTED_BLOCK  # the block reached the environment the stages inherit
    run = tmp_path / "e2e"
    assert set(result) == set(STAGES) | {"tokenizer", "student_finetune", "int8", "pruned", "card"} and all(result.values())
    for stage in STAGES:
        stage_dir = Path(result[stage])
        assert stage_dir == run / ("labeled/vader" if stage == "labeled" else stage)
        m = read_manifest(stage_dir)
        assert m["stage"] == ("evaluate" if stage == "eval" else stage)
        verify_outputs(stage_dir)

    c = read_manifest(run / "corpus")["counts"]
    assert c["in"] == c["kept"] + sum(c["dropped"].values()) + c["duplicates"] + c["quarantined"]
    assert c["quarantined_by_reason"].get("truncated_record", 0) + c["quarantined_by_reason"].get("truncated_gzip", 0) == 1
    assert c["quarantined_by_reason"].get("undecodable", 0) == 0  # the charset-less KOI8-R page is detected
    assert c["duplicates_by_kind"].get("exact", 0) >= 1 and c["duplicates_by_kind"].get("near", 0) >= 1
    assert c["kept_by_language"].get("en", 0) > 0 and c["kept_by_language"].get("ru", 0) > 0

    # The shards stage's inputs pin the corpus and tokenizer manifests it read.
    sm = read_manifest(run / "shards")
    pinned = {Path(i["path"]).name: i["manifest_sha256"] for i in sm["inputs"]}
    assert pinned["corpus"] and pinned["tokenizer"]

    import datasets
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

    ds = datasets.Dataset.from_file(str(run / "shards" / sm["extra"]["splits"]["train"][0]))
    assert len(ds) > 0 and len(ds[0]["input_ids"]) == sm["extra"]["seq_len"]
    teacher = AutoModelForMaskedLM.from_pretrained(run / "pretrain" / "hf")
    student = AutoModelForMaskedLM.from_pretrained(run / "distill" / "hf")
    assert student.config.num_hidden_layers < teacher.config.num_hidden_layers
    AutoModelForSequenceClassification.from_pretrained(run / "finetune" / "hf")
    AutoTokenizer.from_pretrained(run / "pretrain" / "hf")

    report = json.loads((run / "eval" / "report.json").read_text())
    ft = report["finetune"]["test"]
    assert set(ft) == {"pretrained", "scratch", "majority", "tfidf_lr"}
    assert all(0.0 <= v <= 1.0 for v in ft.values()) and 0.0 < ft["majority"] < 1.0
    for who in ("teacher", "student"):
        assert report[who]["params"] > 0 and report[who]["mlm_loss"] > 0
    assert report["student"]["params"] < report["teacher"]["params"]
    md = (run / "eval" / "report.md").read_text()
    assert "| teacher |" in md and "| scratch |" in md and "| tfidf_lr |" in md

    # A second run with a changed fine-tune option reruns the fine-tune and what reads it (evaluate,
    # the compressed models, the card), nothing upstream.
    # the card: teacher, student, fine-tuned, the student fine-tuned, int8 and pruned, quality and cost together
    card = json.loads((run / "card" / "report.json").read_text())["models"]
    assert [Path(e["path"]).parent.name for e in card[:4]] == ["pretrain", "distill", "finetune", "student-finetune"]
    assert [e["name"] for e in card] == ["teacher", "student", "fine-tuned", "student fine-tuned", "int8", "pruned 25%"]
    assert [e["kind"] for e in card] == ["masked_lm", "masked_lm", "classifier", "classifier", "classifier", "classifier"]
    assert all(e["quality"]["task"]["test_examples"] == 300 for e in card[2:])
    # each task score stands next to the fine-tune's controls on the same split (the student's: its teacher's run's)
    assert all(set(e["quality"]["task"]["controls"]) == {"scratch", "majority", "tfidf_lr"} for e in card[2:])
    assert card[0]["quality"]["applies"] and card[4]["cost"]["disk_bytes"] < card[2]["cost"]["disk_bytes"]
    assert card[3]["cost"]["parameters"]["without_embeddings"] < card[2]["cost"]["parameters"]["without_embeddings"]
    # the student's and the int8 model's scores are shares of the fine-tuned teacher's
    assert {Path(card[i]["quality"]["task"]["reference"]).resolve() for i in (3, 4, 5)} == {(run / "finetune/hf").resolve()}
    assert "Task score as a share of the model it was compressed or distilled from" in (run / "card/report.md").read_text()
    sft = read_manifest(run / "student-finetune")
    assert sft["config"]["teacher"] == str(run / "finetune" / "hf") and sft["config"]["init"] == ["pretrained"]

    ALL = (*STAGES, "student-finetune", "int8", "pruned", "card")
    before = {s: read_manifest(run / ("labeled/vader" if s == "labeled" else s))["created_unix"] for s in ALL}
    lmforge_dag(run_name="e2e", runs_dir=str(tmp_path), crawl=crawl, preset="tiny", labeled="vader",
                overrides={"finetune": {"seeds": [2]}})
    after = {s: read_manifest(run / ("labeled/vader" if s == "labeled" else s))["created_unix"] for s in ALL}
    assert {s for s in ALL if after[s] != before[s]} == {"finetune", "student-finetune", "eval", "int8", "pruned", "card"}
    # the same parameters again: nothing reruns
    lmforge_dag(run_name="e2e", runs_dir=str(tmp_path), crawl=crawl, preset="tiny", labeled="vader",
                overrides={"finetune": {"seeds": [2]}})
    again = {s: read_manifest(run / ("labeled/vader" if s == "labeled" else s))["created_unix"] for s in ALL}
    assert again == after
    logs = {p.name for p in (run / "logs").glob("*.log")}
    assert {"corpus.log", "pretrain.log", "finetune.log"} <= logs

    # no credential in any file the runs wrote (every stage's outputs, manifests and logs) or the console
    out, err = capfd.readouterr()
    for secret in (PLANTED_ENV, PLANTED_BLOCK):
        assert not files_holding(secret, tmp_path, texts={"stdout": out, "stderr": err}), secret
