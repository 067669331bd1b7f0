"""The whole DAG once, on a user's own data, and everything that reads that one run (docs/TESTING.md, "Shared runs").

The run: the Prefect flow on an English JSONL crawl with planted tweets and a labelled CSV of tweets with its own
column names and no split column (tests/integration/user_case.py), the tiny preset, a credential in the worker's
environment and one in the Secret block the run names. Then, in this order, on the same run folder:
1. its outputs: every stage's manifest and files, the models load with transformers, the evaluation report and the
   card with their controls, the user's file split and checked against the crawl;
2. infra/README.md's deployment on the session's Prefect server: the README's work-pool and deploy commands, the
   form's bounds refused by the server, a process worker started outside the checkout, and the same parameters
   submitted through it: every stage skipped by its flow key, the artifacts published from the run page; a failed
   refresh reported to a webhook;
3. a changed fine-tune option reruns the fine-tune and what reads it, nothing upstream; the same parameters again
   rerun nothing; no credential in any file, log or console line any of these runs wrote.
The corpus's own cases on the tiny WARC/WET slice (a truncated record, a charset-less KOI8-R page, exact and near
duplicates) are test_corpus_beam's; English and Russian kept through a whole run, test_dag_user_data's.
"""
from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures import files_holding
from tests.integration.user_case import SMALL, check_user_run, user_case

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("corpus", "tokenizer", "shards", "pretrain", "labeled", "finetune", "distill", "eval")
ALL = (*STAGES, "student-finetune", "int8", "pruned", "card")
TASK = "tweets"  # the labelled file's stem: runs/demo/labeled/tweets

# Credentials a user's worker holds: one in its environment, one in the Secret block the run names (under a
# name that does not look like a credential, so only the block's LMFORGE_SECRET_VARS can mask it)
PLANTED_ENV, PLANTED_BLOCK = "planted-env-secret-7Qx2", "planted-block-secret-9Zk4"
BLOCK = "lmforge-test-store"

pytestmark = pytest.mark.slow


def captured(request) -> tuple[str, str]:
    """What this process printed since the last read (the flow's lines and its stages' stdout), for the scan."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is None or not capman.is_globally_capturing():
        return "", ""
    out, err = capman.read_global_capture()
    print(out, end="")  # read is consumed: hand it back, so a failure still shows it
    return out, err


def stage_dir(run: Path, stage: str) -> Path:
    return run / (f"labeled/{TASK}" if stage == "labeled" else stage)


def created(run: Path) -> dict[str, float]:
    from schemas.manifest import read_manifest

    return {s: read_manifest(stage_dir(run, s))["created_unix"] for s in ALL}


@pytest.fixture(scope="module")
def shared(prefect_api, tmp_path_factory, request):
    """The run, in this process as `lmforge_dag` (the deployment's flow): the deployment's name (demo) and the
    parameters the deployment test submits again."""
    from prefect.blocks.system import Secret

    from flows.dag import lmforge_dag

    work = tmp_path_factory.mktemp("user-run")
    params, facts = user_case(work)
    params = {**params, "runs_dir": str(work / "runs"), "credentials_block": BLOCK}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setenv("LMFORGE_DATA_ROOT", f"{ROOT}:{work}")
        mp.setenv("AWS_SECRET_ACCESS_KEY", PLANTED_ENV)
        for name in ("LMFORGE_SECRET_VARS", "LMFORGE_TEST_STORE"):  # set by the flow; restored after the module
            mp.setenv(name, "")
        Secret(value={"LMFORGE_TEST_STORE": PLANTED_BLOCK}).save(BLOCK, overwrite=True)
        result = lmforge_dag(run_name="demo", preset="tiny", **params)
        block_reached = os.environ["LMFORGE_TEST_STORE"] == PLANTED_BLOCK  # the environment the stages inherit
        yield SimpleNamespace(work=work, run=work / "runs" / "demo", params=params, facts=facts, result=result,
                              block_reached=block_reached, console=[captured(request)], mp=mp)


def test_the_run_writes_every_stage_and_its_models_load(shared):
    from schemas.manifest import read_manifest, verify_outputs

    run, result = shared.run, shared.result
    assert shared.block_reached
    assert set(result) == set(STAGES) | {"tokenizer", "student_finetune", "int8", "pruned", "card"} and all(result.values())
    for stage in STAGES:
        assert Path(result[stage]) == stage_dir(run, stage)
        m = read_manifest(stage_dir(run, stage))
        assert m["stage"] == ("evaluate" if stage == "eval" else stage)
        verify_outputs(stage_dir(run, stage))
    c = read_manifest(run / "corpus")["counts"]
    assert c["in"] == c["kept"] + sum(c["dropped"].values()) + c["duplicates"] + c["quarantined"]

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
    assert report["unigram_control"] > 0  # the pretraining corpus's token frequencies on the same held-out tokens
    md = (run / "eval" / "report.md").read_text()
    assert "| teacher |" in md and "| scratch |" in md and "| tfidf_lr |" in md

    # the card: teacher, student, fine-tuned, the student fine-tuned, int8 and pruned, quality and cost together
    card = json.loads((run / "card" / "report.json").read_text())["models"]
    assert [Path(e["path"]).parent.name for e in card[:4]] == ["pretrain", "distill", "finetune", "student-finetune"]
    assert [e["name"] for e in card] == ["teacher", "student", "fine-tuned", "student fine-tuned", "int8", "pruned 25%"]
    assert [e["kind"] for e in card] == ["masked_lm", "masked_lm", "classifier", "classifier", "classifier", "classifier"]
    test_examples = json.loads((run / "finetune" / "metrics.json").read_text())["counts"]["test_examples"]
    assert test_examples > 0 and all(e["quality"]["task"]["test_examples"] == test_examples for e in card[2:])
    # each task score stands next to the fine-tune's controls on the same split (the student's: its teacher's run's)
    assert all(set(e["quality"]["task"]["controls"]) == {"scratch", "majority", "tfidf_lr"} for e in card[2:])
    assert card[0]["quality"]["applies"] and card[4]["cost"]["disk_bytes"] < card[2]["cost"]["disk_bytes"]
    assert card[3]["cost"]["parameters"]["without_embeddings"] < card[2]["cost"]["parameters"]["without_embeddings"]
    # the student's and the int8 model's scores are shares of the fine-tuned teacher's
    assert {Path(card[i]["quality"]["task"]["reference"]).resolve() for i in (3, 4, 5)} == {(run / "finetune/hf").resolve()}
    assert "Task score as a share of the model it was compressed or distilled from" in (run / "card/report.md").read_text()
    sft = read_manifest(run / "student-finetune")
    assert sft["config"]["teacher"] == str(run / "finetune" / "hf") and sft["config"]["init"] == ["pretrained"]
    assert {"corpus.log", "pretrain.log", "finetune.log"} <= {p.name for p in (run / "logs").glob("*.log")}

    # the user's labelled file: split, written down, checked against the crawl, its planted test pages dropped
    check_user_run(run, shared.facts)


def test_the_card_opens_with_its_verdict_in_a_browser(shared):
    """report.html in Debian's chromium (playwright drives it): the corpus, the task, the scores and the verdict on
    the first screen, the chart of quality against cost loaded just below it; the screenshot is kept to look at."""
    import shutil

    from flows.deploy.ablate_ui import CHROMIUM, browser_path

    if not any(shutil.which(b) for b in CHROMIUM):
        pytest.skip("no Chromium: apt-get install chromium (as root; .ci/run does)")
    from playwright.sync_api import sync_playwright

    card = shared.run / "card" / "report.html"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(card.resolve().as_uri())
        page.wait_for_load_state("load")
        boxes = {what: page.get_by_text(what, exact=False).first.bounding_box()
                 for what in ("Corpus:", "Task:", "Verdict:", "majority class")}
        chart = page.locator("img[alt=quality_cost]")
        loaded = chart.evaluate("img => img.complete && img.naturalWidth > 0")
        chart_top = chart.bounding_box()["y"]
        page.screenshot(path=str(shared.run / "card" / "browser.png"))
        browser.close()
    assert all(b is not None and b["y"] + b["height"] <= 900 for b in boxes.values()), boxes  # the first screen
    assert loaded and chart_top > boxes["Verdict:"]["y"]
    assert (shared.run / "card" / "browser.png").stat().st_size > 10_000


class Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Hook.received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_the_documented_deployment_runs_the_same_parameters_and_a_failed_refresh_is_reported(shared, prefect_api):
    """infra/README.md's commands against the session's server, a worker outside the checkout, and the shared run's
    parameters submitted through the deployment: the flow, its tasks and artifacts, every stage skipped."""
    from flows.deploy import ops

    lines = ops.readme_commands()
    assert any("work-pool create lmforge-process" in line for line in lines)
    assert any("deploy --prefect-file infra/prefect/prefect.yaml --all" in line for line in lines)
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "LMFORGE_DATA_ROOT": f"{ROOT}:{shared.work}"}
    env.pop("LMFORGE_HOME", None)
    rest = ops.deploy(env)
    url = prefect_api
    deployments = {d["name"]: d for d in ops.api(url, "/deployments/filter", {})}
    assert set(deployments) == {"demo", "train", "weekly-refresh", "ablate"}
    # the form's schema carries the model's bounds, so the server refuses a run the flow would refuse
    nproc = deployments["demo"]["parameter_openapi_schema"]["properties"]["nproc"]
    assert (nproc["minimum"], nproc["maximum"]) == (1, 64)
    for bad in ({"nproc": -1}, {"objective": "gpt"}):
        with pytest.raises(urllib.error.HTTPError, match="409"):
            ops.api(url, f"/deployments/{deployments['demo']['id']}/create_flow_run", {"parameters": bad})
    # every registered objective is a choice of the form's drop-down (each one's whole DAG: test_dag_causal, _t5)
    from schemas.objectives import OBJECTIVES

    assert set(deployments["demo"]["parameter_openapi_schema"]["properties"]["objective"]["enum"]) == {"", *OBJECTIVES}
    for bad in ({"parallel_arms": 0}, {"arms": ["baseline", "no-such-arm"]}, {"tasks": ["imdb"]}):  # the ablation's form
        with pytest.raises(urllib.error.HTTPError, match="409"):
            ops.api(url, f"/deployments/{deployments['ablate']['id']}/create_flow_run", {"parameters": bad})
    # the pool (infra/prefect/process-pool.json) lets no run set how it runs (issue 50): the worker's data root,
    # command and folder stay the worker's (tests/unit/test_work_pool.py: not applied even if one got through)
    for job in ({"env": {"LMFORGE_DATA_ROOT": "/"}}, {"command": "touch /tmp/pwned"}, {"working_dir": "/"}):
        with pytest.raises(urllib.error.HTTPError, match="422"):
            ops.api(url, f"/deployments/{deployments['demo']['id']}/create_flow_run", {"job_variables": job})
    worker_line = next(line for line in rest if " worker start" in line)
    run_line = next(line for line in rest if " deployment run" in line)
    assert "--param preset=tiny" in run_line

    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    r = subprocess.run([sys.executable, "-m", "lmforge.cli", "alerts", "--webhook", hook, "--allow-private-urls"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

    before = created(shared.run)
    with ops.worker(env, worker_line, shared.work / "worker.log"):
        # partial parameters: the deployment's run_name (demo) and preset stay unless given; the rest is the shared
        # run's, so each stage finds its flow key unchanged and is skipped
        run = ops.run_deployment(env, run_line, shared.params)
        log = (shared.work / "worker.log").read_text()
        assert run["state"]["type"] == "COMPLETED", log[-5000:]
        assert re.fullmatch(r"demo-\d{4}-\d{2}-\d{2}T\d{4}", run["name"]), run["name"]
        assert run["parameters"]["preset"] == "tiny" and run["parameters"]["run_name"] == "demo"
        assert created(shared.run) == before, "a stage ran again through the deployment"
        published = ops.artifacts(url, run["id"])
        keys = {a["key"] for a in published if a.get("key")}
        # each opens from the run page: a browser refuses a file:// link from the UI's page
        assert not [a["key"] for a in published if "file://" in json.dumps(a["data"])]
        assert {"demo-corpus-counts", "demo-corpus-report", "demo-outputs", "demo-lineage", "demo-eval-report",
                "demo-eval-table", "demo-card", "demo-card-table", "demo-card-quality-cost"} <= keys, keys
        tasks = ops.api(url, "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}})
        assert {t["name"].rsplit("-", 1)[0] for t in tasks} >= {"corpus", "tokenizer", "shards", "pretrain",
                                                               "labeled-file", "finetune", "distill", "evaluate"}

        # a refresh whose crawl root does not exist fails; the automation posts to the webhook
        refresh = next(d for d in ops.api(url, "/deployments/filter", {}) if d["name"] == "weekly-refresh")
        failed = ops.api(url, f"/deployments/{refresh['id']}/create_flow_run",
                         {"parameters": {"crawl_root": str(shared.work / "no-such-crawl"), "preset": "tiny",
                                         "runs_dir": str(shared.work / "runs"),
                                         "dedup_index": str(shared.work / "state" / "index")}})
        ended = ops.wait_run(url, failed["id"], timeout=300)
        assert ended["state"]["type"] == "FAILED"
        deadline = time.time() + 120
        while not [h for h in Hook.received if h.get("flow_run") == ended["name"]] and time.time() < deadline:
            time.sleep(1)
    server.shutdown()
    posted = [h for h in Hook.received if h.get("flow_run") == ended["name"]]
    assert posted, f"the automation did not call the webhook for {ended['name']}: {Hook.received}"
    assert posted[0]["state"] == "Failed"


def test_a_changed_option_reruns_what_reads_it_and_no_credential_is_written(shared, request, capfd):
    """Last on the shared run: it changes the run folder."""
    from flows.dag import lmforge_dag

    run, p = shared.run, shared.params
    before = created(run)
    # a changed fine-tune option reruns the fine-tune and what reads it (evaluate, the compressed models, the card)
    overrides = {**SMALL, "finetune": {**SMALL["finetune"], "seeds": [2]}}
    lmforge_dag(run_name="demo", preset="tiny", **{**p, "overrides": overrides})
    after = created(run)
    assert {s for s in ALL if after[s] != before[s]} == {"finetune", "student-finetune", "eval", "int8", "pruned", "card"}
    # the same parameters again: nothing reruns
    lmforge_dag(run_name="demo", preset="tiny", **{**p, "overrides": overrides})
    assert created(run) == after

    # no credential in any file the runs wrote (every stage's outputs, manifests and logs, the worker's log) or on
    # the console of any of them
    out, err = capfd.readouterr()
    texts = {"stdout": out, "stderr": err, **{f"first run {k}": v for k, v in zip(("stdout", "stderr"), shared.console[0])}}
    for secret in (PLANTED_ENV, PLANTED_BLOCK):
        assert not files_holding(secret, shared.work, texts=texts), secret
