"""infra/README.md's deployment, as a user runs it: a real `prefect server` on 127.0.0.1 with its own
PREFECT_HOME, the README's work-pool and deploy commands, a process worker started outside the
checkout, the demo deployment run with partial parameters on a user's own crawl and labelled file (checked as a
user's run must be: tests/integration/user_case.py), and a failed refresh reported to a webhook."""
from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path

import pytest

from tests.integration.user_case import check_user_run, user_case

ROOT = Path(__file__).resolve().parents[2]


class Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Hook.received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.mark.slow
def test_documented_deployment_runs_and_a_failed_refresh_is_reported(tmp_path):
    from flows import ops

    lines = ops.readme_commands()
    assert any("work-pool create lmforge-process" in line for line in lines)
    assert any("deploy --prefect-file infra/prefect/prefect.yaml --all" in line for line in lines)
    with ops.prefect_server(tmp_path / "prefect-home") as env:
        env = {**env, "LMFORGE_DATA_ROOT": f"{ROOT}:{tmp_path}"}
        env.pop("LMFORGE_HOME", None)
        rest = ops.deploy(env)
        url = env["PREFECT_API_URL"]
        deployments = {d["name"]: d for d in ops.api(url, "/deployments/filter", {})}
        assert set(deployments) == {"demo", "train", "weekly-refresh", "ablate"}
        # the form's schema carries the model's bounds, so the server refuses a run the flow would refuse
        nproc = deployments["demo"]["parameter_openapi_schema"]["properties"]["nproc"]
        assert (nproc["minimum"], nproc["maximum"]) == (1, 64)
        with pytest.raises(urllib.error.HTTPError, match="409"):
            ops.api(url, f"/deployments/{deployments['demo']['id']}/create_flow_run", {"parameters": {"nproc": -1}})
        for bad in ({"parallel_arms": 0}, {"arms": ["baseline", "no-such-arm"]}, {"tasks": ["imdb"]}):  # the ablation's form
            with pytest.raises(urllib.error.HTTPError, match="409"):
                ops.api(url, f"/deployments/{deployments['ablate']['id']}/create_flow_run", {"parameters": bad})
        worker_line = next(line for line in rest if " worker start" in line)
        run_line = next(line for line in rest if " deployment run" in line)
        assert "--param preset=tiny" in run_line

        server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
        r = subprocess.run([sys.executable, "-m", "lmforge.cli", "alerts", "--webhook", hook, "--allow-private-urls"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr

        with ops.worker(env, worker_line, tmp_path / "worker.log"):
            # partial parameters: the deployment's run_name and preset stay unless given. The data is a user's
            # (tests/integration/user_case.py): an English JSONL crawl and a labelled CSV with its own column names
            # and no split column, some of its test items planted in the crawl
            params, facts = user_case(tmp_path)
            run = ops.run_deployment(env, run_line, {"runs_dir": str(tmp_path / "runs"), **params})
            log = (tmp_path / "worker.log").read_text()
            assert run["state"]["type"] == "COMPLETED", log[-5000:]
            assert re.fullmatch(r"demo-\d{4}-\d{2}-\d{2}T\d{4}", run["name"]), run["name"]
            assert run["parameters"]["preset"] == "tiny" and run["parameters"]["run_name"] == "demo"
            published = ops.artifacts(url, run["id"])
            keys = {a["key"] for a in published if a.get("key")}
            # each opens from the run page: a browser refuses a file:// link from the UI's page
            assert not [a["key"] for a in published if "file://" in json.dumps(a["data"])]
            assert {"demo-corpus-counts", "demo-corpus-report", "demo-outputs", "demo-lineage", "demo-eval-report",
                    "demo-eval-table", "demo-card", "demo-card-table", "demo-card-quality-cost"} <= keys, keys
            tasks = ops.api(url, "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}})
            assert {t["name"].rsplit("-", 1)[0] for t in tasks} >= {"corpus", "tokenizer", "shards", "pretrain",
                                                                   "labeled-file", "finetune", "distill", "evaluate"}
            check_user_run(tmp_path / "runs" / "demo", facts)  # the user's file checked against the crawl, the card

            # a refresh whose crawl root does not exist fails; the automation posts to the webhook
            refresh = next(d for d in ops.api(url, "/deployments/filter", {}) if d["name"] == "weekly-refresh")
            failed = ops.api(url, f"/deployments/{refresh['id']}/create_flow_run",
                             {"parameters": {"crawl_root": str(tmp_path / "no-such-crawl"), "preset": "tiny",
                                             "runs_dir": str(tmp_path / "runs"),
                                             "dedup_index": str(tmp_path / "state" / "index")}})
            ended = ops.wait_run(url, failed["id"], timeout=300)
            assert ended["state"]["type"] == "FAILED"
            deadline = time.time() + 120
            while not Hook.received and time.time() < deadline:
                time.sleep(1)
        server.shutdown()
    assert Hook.received, "the automation did not call the webhook"
    assert Hook.received[0]["state"] == "Failed" and Hook.received[0]["flow_run"] == ended["name"]
