"""infra's process work pool (issue 50): a run started from the form or `prefect deployment run --job-variable` can set
none of command, env or working_dir. The base job template offers only name, labels and stream_output
(`additionalProperties: false`, so the server refuses the rest: tests/integration/test_dag_e2e.py tries it on a real
server), and its job configuration holds none of the three, so even a value that reached the worker is not applied.
The worker builds a flow run's configuration exactly as here (BaseJobConfiguration.from_template_and_values)."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "prefect" / "process-pool.json"

pytestmark = pytest.mark.usefixtures("prefect_api")  # block and variable references resolve through the API


def configuration(values: dict):
    from prefect.workers.process import ProcessJobConfiguration

    return asyncio.run(ProcessJobConfiguration.from_template_and_values(json.loads(TEMPLATE.read_text()), values))


def test_a_runs_command_env_and_working_dir_are_not_applied(tmp_path):
    hostile = {"env": {"LMFORGE_DATA_ROOT": "/", "PATH": str(tmp_path)}, "env.LMFORGE_DATA_ROOT": "/",
               "command": f"touch {tmp_path / 'pwned'}", "working_dir": "/"}
    cfg = configuration(hostile)
    assert cfg.env == {} and cfg.command is None and cfg.working_dir is None
    # what the pool does offer still works
    cfg = configuration({"name": "n", "labels": {"team": "data"}, "stream_output": False})
    assert (cfg.name, cfg.labels, cfg.stream_output) == ("n", {"team": "data"}, False)


def test_the_templates_variables_are_the_three_and_no_others():
    from prefect.workers.process import ProcessWorker

    variables = json.loads(TEMPLATE.read_text())["variables"]
    assert variables["additionalProperties"] is False and set(variables["properties"]) == {"name", "labels",
                                                                                         "stream_output"}
    # the same definitions as Prefect's own default template for these three (a Prefect upgrade that changes them
    # shows here)
    default = ProcessWorker.get_default_base_job_template()["variables"]["properties"]
    assert variables["properties"] == {k: default[k] for k in ("name", "labels", "stream_output")}
    assert {"command", "env", "working_dir"} <= set(default)  # what the default would have offered


def test_a_run_on_a_pool_that_offers_command_env_or_working_dir_is_refused(monkeypatch):
    """A pool created before infra's template (or with Prefect's default) still offers the three: the deployments'
    pull step (flows.deploy.pull_step.lmforge_home) refuses every run on it, and any run that set one, with one line
    saying how to recreate the pool; a run on infra's pool passes. Real pools, deployments and runs on the session's
    server."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    from flows.deploy import pull_step

    templates = {"issue50-default": ProcessWorker.get_default_base_job_template(),
                 "issue50-lmforge": json.loads(TEMPLATE.read_text())}
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("issue50-pool-check")
        deployments = {}
        for name, template in templates.items():
            client.create_work_pool(WorkPoolCreate(name=name, type="process", base_job_template=template),
                                    overwrite=True)
            deployments[name] = client.create_deployment(flow_id=flow_id, name=name, work_pool_name=name)
        ok = client.create_flow_run_from_deployment(deployments["issue50-lmforge"])
        stale = client.create_flow_run_from_deployment(deployments["issue50-default"])
        hostile = client.create_flow_run_from_deployment(deployments["issue50-default"],
                                                         job_variables={"env": {"LMFORGE_DATA_ROOT": "/"}})
    pull_step.refuse_open_pool(str(ok.id))
    with pytest.raises(RuntimeError, match="pool 'issue50-default' lets every run set command, env, working_dir.*"
                                           "--base-job-template infra/prefect/process-pool.json"):
        pull_step.refuse_open_pool(str(stale.id))
    with pytest.raises(RuntimeError, match="sets the job variable.s. env,"):
        pull_step.refuse_open_pool(str(hostile.id))
    monkeypatch.setenv("PREFECT__FLOW_RUN_ID", str(stale.id))  # as a worker starts the run: the pull step refuses it
    with pytest.raises(RuntimeError, match="lets every run set"):
        pull_step.lmforge_home()
    monkeypatch.delenv("PREFECT__FLOW_RUN_ID")
    pull_step.refuse_open_pool()  # not a worker's run: nothing to check
