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
