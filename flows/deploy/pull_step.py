"""Prefect pull step for lmforge's deployments (infra/prefect/prefect.yaml).

The worker runs a flow in the lmforge checkout: `LMFORGE_HOME` when the worker's environment sets
it, else the checkout this Python imports lmforge from (the editable install `make setup` makes).
Anything that is not an lmforge checkout fails here, naming the directory and the variable, instead
of the flow failing later on a missing `flows/dag.py` in a temporary directory.

It also refuses a run that could have changed how it runs (docs/SECURITY.md, section 5): one that set
`command`, `env` or `working_dir` as a job variable, or any run on a work pool that offers them (a pool
created before infra/README.md's template, or with Prefect's default one). Such a pool fails every run
with one line saying how to recreate it, so it can not stay open unnoticed. A run's `command` replaces
the flow process itself, so no check inside it can stop that run: only the pool's template does.
"""
from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "LMFORGE_HOME"


OPEN = ("command", "env", "working_dir")
"""Job variables of Prefect's process pool that change how a run runs: infra/prefect/process-pool.json offers none."""


def refuse_open_pool(flow_run_id: str | None = None) -> None:
    """Raise one line if this flow run set a job variable of OPEN, or its work pool offers one. Without a flow run
    (`PREFECT__FLOW_RUN_ID` unset: not started by a worker) there is nothing to check."""
    run_id = flow_run_id or os.environ.get("PREFECT__FLOW_RUN_ID", "")
    if not run_id:
        return
    from uuid import UUID

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(run_id))
        sets = sorted({key.split(".")[0] for key in (run.job_variables or {})} & set(OPEN))
        if sets:
            raise RuntimeError(f"lmforge deployment: flow run {run.name} sets the job variable(s) {', '.join(sets)}, "
                               "which lmforge's pool offers no run: start it without them (docs/SECURITY.md)")
        if not run.work_pool_name:
            return
        pool = client.read_work_pool(run.work_pool_name)
    offered = [k for k in OPEN if k in (pool.base_job_template or {}).get("variables", {}).get("properties", {})]
    if offered:
        raise RuntimeError(
            f"lmforge deployment: work pool {pool.name!r} lets every run set {', '.join(offered)} (Prefect's default "
            f"template): recreate it with `prefect work-pool create {pool.name} --type process --base-job-template "
            "infra/prefect/process-pool.json --overwrite` (infra/README.md)")


def lmforge_home(directory: str = "") -> dict[str, str]:
    """Change to the lmforge checkout and return it (`{{ lmforge-home.directory }}` in later steps), after
    refuse_open_pool."""
    refuse_open_pool()
    chosen = directory or os.environ.get(HOME_ENV, "")
    home = Path(chosen or Path(__file__).resolve().parents[2]).expanduser().resolve()
    where = f"{HOME_ENV}={chosen}" if chosen else "the checkout this worker's Python imports lmforge from"
    if not (home / "flows" / "dag.py").is_file():
        raise RuntimeError(f"lmforge deployment: {home} ({where}) is not an lmforge checkout (no flows/dag.py). "
                           f"Set {HOME_ENV} in the worker's environment to the checkout, e.g. "
                           f"`{HOME_ENV}=/srv/lmforge prefect worker start --pool lmforge-process`.")
    os.chdir(home)
    print(f"lmforge deployment: working directory {home} ({where})", flush=True)
    return {"directory": str(home)}
