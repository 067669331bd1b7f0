"""A local Prefect deployment end to end, as infra/README.md documents it: a `prefect server` on
127.0.0.1 with its own PREFECT_HOME, the work pool and the deployments created by the README's own
commands, a process worker, and (`ui-check`) screenshots of the UI taken with headless Chromium.

    make ui-check       # = python -m flows.deploy.ops ui-check --out docs/ui

The slow test tests/integration/test_dag_e2e.py drives the same helpers against the test session's server.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # flows/deploy/ops.py -> the checkout
README = ROOT / "infra" / "README.md"
MARK = "<!-- deploy-commands"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_commands() -> list[str]:
    """The command lines of infra/README.md's deployment block (the fenced block after the marker)."""
    text = README.read_text()
    start = text.index(MARK)
    block = text[text.index("```", start) + 3:]
    block = block[block.index("\n") + 1:block.index("```")]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def command(line: str) -> list[str]:
    """A README line as argv: `.venv/bin/X` is this Python's environment's X."""
    argv = shlex.split(line)
    if argv[0].startswith(".venv/bin/"):
        argv[0] = str(Path(sys.executable).parent / argv[0].removeprefix(".venv/bin/"))
    return argv


RETRY_STATUS = (429, 502, 503)
"""Answers Prefect's own client retries (PREFECT_CLIENT_RETRY_EXTRA_CODES aside): the server sends 503 for an error a
client may retry, such as SQLite's `database is locked` while a worker and a flow write at once; nothing was written."""


def api(url: str, path: str, body: dict | None = None, retries: int = 5) -> Any:
    """One call to Prefect's REST API (GET, or POST with `body`); 429/502/503 retried `retries` times after
    Retry-After or 1, 2, 4... s (at most 10), as Prefect's client does. Any other HTTP error is raised at once."""
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(retries + 1):
        req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code not in RETRY_STATUS or attempt == retries:
                raise
            after = e.headers.get("Retry-After", "")
            e.close()
            time.sleep(min(10.0, float(after) if after.isdigit() else 2.0 ** attempt))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def prefect_server(home: Path, port: int | None = None, timeout: float = 90,
                   server_env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """Start `prefect server start --host 127.0.0.1` with PREFECT_HOME=home; yield the environment for
    clients (PREFECT_API_URL set); stop the server and everything it started on exit. `server_env`: settings for
    the server process alone (not in the clients' environment)."""
    port = port or free_port()
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_URL": f"http://127.0.0.1:{port}", "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api"}
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env={**env, **(server_env or {})}, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                api(url, "/health")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"prefect server did not start; see {home / 'server.log'}") from None
                time.sleep(1)
        yield {**env, "PREFECT_API_URL": url}
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen, grace: float = 20) -> None:
    """Stop a process started with start_new_session and its whole group (workers, uvicorn)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()


def deploy(env: dict[str, str]) -> list[str]:
    """Run the README's work-pool and deploy commands; return the worker and run lines for the caller."""
    rest = []
    for line in readme_commands():
        if line.startswith(("make ui", "export ")):
            continue  # the server is ours; PREFECT_API_URL is in env
        if " worker start" in line or " deployment run" in line:
            rest.append(line)
            continue
        r = subprocess.run(command(line), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"{line}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return rest


@contextlib.contextmanager
def worker(env: dict[str, str], line: str, log_path: Path) -> Iterator[subprocess.Popen]:
    log = open(log_path, "w")
    proc = subprocess.Popen(command(line), cwd="/", env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        stop(proc)
        log.close()


def run_deployment(env: dict[str, str], line: str, params: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    """The README's `prefect deployment run` line with more `--param`s; wait for the run to end; return it."""
    argv = command(line)
    for k, v in params.items():
        argv += ["--param", f"{k}={json.dumps(v) if not isinstance(v, str) else v}"]
    r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", r.stdout).group(1)
    return wait_run(env["PREFECT_API_URL"], run_id, timeout)


def wait_run(url: str, run_id: str, timeout: float = 900) -> dict[str, Any]:
    deadline = time.time() + timeout
    while True:
        run = api(url, f"/flow_runs/{run_id}")
        if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return run
        if time.time() > deadline:
            raise TimeoutError(f"flow run {run_id} still {run['state']['type']} after {timeout:.0f}s")
        time.sleep(3)


def artifacts(url: str, run_id: str) -> list[dict[str, Any]]:
    return api(url, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})


def screenshot(page: str, out: Path, wait_ms: int = 12000, size: str = "1600,1000") -> Path:
    """Headless Chromium's picture of a UI page (the UI is a single-page app: give it time to load)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not browser:
        raise RuntimeError("no Chromium: apt-get install chromium (Debian) to take UI screenshots")
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={size}", f"--virtual-time-budget={wait_ms}", f"--screenshot={out}", page],
                   check=True, capture_output=True, timeout=120)
    return out


def ui_check(out: Path, work: Path) -> list[Path]:
    """Deploy as documented, run the demo deployment at preset tiny on the test crawl, and screenshot the
    deployments page, the run form, the finished run's graph and its artifacts."""
    shutil.rmtree(work, ignore_errors=True)
    runs = work / "runs"
    with prefect_server(work / "prefect-home") as env:
        env = {**env, "LMFORGE_DATA_ROOT": f"{ROOT}:{work}"}
        rest = deploy(env)
        worker_line = next(line for line in rest if " worker start" in line)
        run_line = next(line for line in rest if " deployment run" in line)
        with worker(env, worker_line, work / "worker.log"):
            run = run_deployment(env, run_line, {"runs_dir": str(runs), "crawl": [str(ROOT / "tests/data/tiny")]})
        ui = env["PREFECT_API_URL"].removesuffix("/api")
        dep = api(env["PREFECT_API_URL"], f"/deployments/{run['deployment_id']}")
        shots = [screenshot(f"{ui}/deployments", out / "deployments.png"),
                 screenshot(f"{ui}/deployments/deployment/{dep['id']}/run", out / "run-form.png"),
                 screenshot(f"{ui}/runs/flow-run/{run['id']}", out / "flow-run.png")]
        by_key = {a["key"]: a["id"] for a in artifacts(env["PREFECT_API_URL"], run["id"]) if a.get("key")}
        for key in ("demo-corpus-counts", "demo-eval-report", "demo-lineage", "demo-card-table", "demo-card-quality-cost"):
            shots.append(screenshot(f"{ui}/artifacts/artifact/{by_key[key]}", out / f"artifact-{key[5:]}.png"))
        print(f"ui-check: run {run['name']} ended {run['state']['type']}; screenshots: {', '.join(map(str, shots))}")
        if run["state"]["type"] != "COMPLETED":
            raise RuntimeError(f"the demo deployment's run ended {run['state']['type']}; see {work / 'worker.log'}")
        return shots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.deploy.ops", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("ui-check", help="deploy as infra/README.md says, run the demo at preset tiny, screenshot the UI")
    u.add_argument("--out", default="docs/ui", help="where the screenshots go (default: %(default)s)")
    u.add_argument("--work", default="runs/ui-check", help="server home, worker log and runs (default: %(default)s)")
    a = ap.parse_args(argv)
    ui_check(Path(a.out), Path(a.work).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
