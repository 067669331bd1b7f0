"""The corpus ablation started from the Prefect UI, in a real browser: `python -m flows.deploy.ablate_ui`.

Deploys as infra/README.md documents it (flows/deploy/ops.py: a server on 127.0.0.1 with its own PREFECT_HOME, the work
pool, every deployment, a process worker), then drives headless Chromium (Debian's, through playwright) to the
`lmforge-ablate/ablate` deployment's run form, screenshots it, and submits it as the deployment gives it (the
docs/ABLATIONS.md's small ablation: three arms of the bundled sample at the tiny preset, three seeds), or with a form field
changed (`--field name=value`, typed into the form as a user would). It waits for the run, then screenshots the
run's page (its arm subflows) and the ablation's artifacts (table and plot) into docs/ui/ablate-*.png and prints
the run's wall time. Needs `apt-get install chromium` and the `playwright` package (make setup installs it).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from flows.deploy.ops import ROOT, api, artifacts, deploy, prefect_server, wait_run, worker

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def browser_path() -> str:
    found = next((shutil.which(b) for b in CHROMIUM if shutil.which(b)), None)
    if not found:
        raise RuntimeError("no Chromium: apt-get install chromium (Debian) to drive the Prefect UI")
    return found


def submit_form(page, ui: str, api_url: str, deployment_id: str, out: Path, fields: dict[str, str]) -> str:
    """Open the deployment's custom-run form, type `fields`, screenshot, Submit; return the new flow run's id."""
    page.goto(f"{ui}/deployments/deployment/{deployment_id}/run", wait_until="networkidle")
    try:
        page.get_by_role("button", name="Submit").wait_for(timeout=90_000)
    except Exception:
        page.screenshot(path=str(out / "ablate-run-form-error.png"), full_page=True)
        raise
    for label, value in fields.items():
        box = page.get_by_label(label, exact=True)
        box.fill(value)
    page.screenshot(path=str(out / "ablate-run-form.png"), full_page=True)
    page.get_by_role("button", name="Submit").click()
    for _ in range(60):  # the UI goes to the deployment's Runs tab; the new run is the deployment's only one
        runs = api(api_url, "/flow_runs/filter", {"deployments": {"id": {"any_": [deployment_id]}}, "limit": 1})
        if runs:
            return runs[0]["id"]
        time.sleep(1)
    page.screenshot(path=str(out / "ablate-run-form-error.png"), full_page=True)
    raise RuntimeError("Submit created no flow run of the ablate deployment within 60 s")


def ablate_ui_check(out: Path, work: Path, fields: dict[str, str], timeout: float) -> float:
    from playwright.sync_api import sync_playwright

    shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    with prefect_server(work / "prefect-home") as env:
        env = {**env, "LMFORGE_DATA_ROOT": f"{ROOT}:{work}"}
        rest = deploy(env)
        url = env["PREFECT_API_URL"]
        ui = url.removesuffix("/api")
        dep = api(url, "/deployments/name/lmforge-ablate/ablate")
        with worker(env, next(line for line in rest if " worker start" in line), work / "worker.log"), \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path(), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            t0 = time.time()
            run_id = submit_form(page, ui, url, dep["id"], out, fields)
            print(f"ablate-ui: submitted run {run_id} from the form; waiting (timeout {timeout:.0f}s)", flush=True)
            run = wait_run(url, run_id, timeout)
            wall = time.time() - t0
            page.goto(f"{ui}/runs/flow-run/{run_id}", wait_until="networkidle")
            page.wait_for_timeout(4000)
            page.screenshot(path=str(out / "ablate-flow-run.png"))
            keys = {a["key"]: a["id"] for a in artifacts(url, run_id) if a.get("key")}
            for key, id_ in sorted(keys.items()):
                if "ablation" in key:
                    page.goto(f"{ui}/artifacts/artifact/{id_}", wait_until="networkidle")
                    page.wait_for_timeout(3000)
                    page.screenshot(path=str(out / f"ablate-artifact-{key.split('ablation-')[-1]}.png"), full_page=True)
            browser.close()
        print(f"ablate-ui: run {run['name']} ended {run['state']['type']} after {wall:.0f}s; artifacts: "
              f"{', '.join(sorted(keys)) or 'none'}; screenshots in {out}", flush=True)
        if run["state"]["type"] != "COMPLETED":
            raise RuntimeError(f"the ablate deployment's run ended {run['state']['type']}; see {work / 'worker.log'}")
        return wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.deploy.ablate_ui", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/ui", help="where the screenshots go (default: %(default)s)")
    ap.add_argument("--work", default="runs/ablate-ui", help="server home and worker log (default: %(default)s)")
    ap.add_argument("--field", action="append", default=[], metavar="LABEL=VALUE",
                    help="type VALUE into the form's text field LABEL before Submit (e.g. name=ui-ablation)")
    ap.add_argument("--timeout", type=float, default=2400, help="seconds to wait for the run (default: %(default)s)")
    a = ap.parse_args(argv)
    fields = dict(f.split("=", 1) for f in a.field)
    ablate_ui_check(Path(a.out), Path(a.work).resolve(), fields, a.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
