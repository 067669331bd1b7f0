"""Test session settings, and what the whole session pays for once (docs/TESTING.md).

- Every pytest process (each xdist worker) has a PREFECT_HOME of its own, made here before anything imports
  Prefect: two workers never share one SQLite database.
- `prefect_api`: one `prefect server` per test process, started by the first test that asks for it, exported as
  PREFECT_API_URL to the flows run in this process and to every subprocess (`lmforge run`, `lmforge ablate`), which
  would otherwise each start Prefect's ephemeral server (tests/session.py).
- Scheduling under `pytest -n 2` (make test): the tests of a module stay on one worker (their module-scoped
  fixtures are paid once), modules are handed out slowest first from tests/durations.json, and the tests that time
  themselves or hold a port share one serial group.
- The end of every run prints its total and the time per test file; `--durations-json PATH` writes them.
- OMP_WAIT_POLICY=PASSIVE for every process the tests start (idle OpenMP threads sleep: the suite oversubscribes
  its 2 cores by design).

Prefect's temporary server logs "Stopping temporary server" at interpreter exit, after pytest
has closed its captured streams, which prints a logging traceback; warnings and errors still show.
"""
import os
from pathlib import Path

import pytest

from tests import session

session.isolate_prefect_home()
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# OpenMP threads that wait for work sleep instead of spinning. The suite runs two workers whose tests start
# 2-thread torch processes side by side on 2 cores; spinning threads burned the CPU the others needed: the two
# concurrent whole DAGs of test_dag_user_data took 224 s with OpenMP's default, 171 s with PASSIVE (docs/TESTING.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")  # tasks called outside a flow in unit tests


def pytest_addoption(parser):
    parser.addoption("--durations-json", default=None, metavar="PATH",
                     help="write each test's and each file's seconds (setup + call + teardown) to PATH as JSON")


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):  # its hook exists only where pytest-xdist is installed
        config.pluginmanager.register(session.Scheduling(), "lmforge-scheduling")


def pytest_collection_modifyitems(config, items):
    session.schedule(items)


def pytest_runtest_logreport(report):
    session.TIMES.add(report)


def pytest_terminal_summary(terminalreporter, config):
    session.TIMES.summary(terminalreporter, config.getoption("--durations-json"))


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One Prefect server for this test process: its API URL in the environment of every flow and subprocess."""
    with session.prefect_server(tmp_path_factory.mktemp("prefect-server")) as url:
        yield url


@pytest.fixture
def checkout_root(tmp_path, monkeypatch):
    """The checkout as the working directory, with it and tmp_path as the data root (flows/data_root.py): what a
    worker started in the checkout allows a run from the Prefect UI to name."""
    checkout = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", f"{checkout}:{tmp_path}")
    return tmp_path
