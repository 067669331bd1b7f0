"""What a test session pays for once, and how its tests are handed to the workers (tests/conftest.py wires these).

Scheduling (`make test` runs `pytest -n 2 --dist loadscope --no-loadscope-reorder`): each test belongs to a group,
its file unless the file is in SERIAL_FILES, and a group runs whole on one worker, so a module's tests and its
module-scoped fixtures stay together (`Scheduling`: xdist's own `--dist loadgroup` sets its groups by rewriting
`item._nodeid`, which pytest 9 no longer reads, so the groups are taken from the node ids here). Groups are handed
out longest first (the longest-processing-time rule: on 2 workers it ends within 4/3 of the best possible split),
from the seconds in tests/durations.json, which a full run writes with `--durations-json` (docs/TESTING.md says how
to refresh it). A file it does not list yet counts 1 s a test.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_TEST_SECONDS = 1.0

SERIAL = "serial"
"""The group of tests that time themselves against a wall clock (a kill within 5 s, a stage's time limit), so that
two of them never run at once. Whole files, so that no module-scoped fixture is paid on two workers."""
SERIAL_FILES = (
    "tests/integration/test_slurm_cluster.py",  # slurmctld and two slurmd on fixed ports, its job's time limits
    "tests/integration/test_corpus_kill_rerun.py",  # kills a run mid-way by the clock
    "tests/unit/test_stage_time_limit.py",  # a stage stopped at its time limit, a grace period
)


def isolate_prefect_home() -> None:
    """A PREFECT_HOME of this process's own (an xdist worker's, or the one pytest process's), removed at exit.
    xdist starts its workers with the controller's environment, so each worker makes its own."""
    who = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if os.environ.get("LMFORGE_TESTS_PREFECT_HOME_OF") == who:
        return
    home = tempfile.mkdtemp(prefix=f"lmforge-tests-prefect-{who}-")
    atexit.register(shutil.rmtree, home, True)
    os.environ["PREFECT_HOME"] = home
    os.environ["LMFORGE_TESTS_PREFECT_HOME_OF"] = who


QUIET_SERVICES = {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in (
    "SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "REPOSSESSOR", "DB_VACUUM", "CLEANUP_RECONCILER")}
"""The session server's background services that no test uses: deployment schedules (the deployment test creates its
runs through the API), late runs, worker heartbeats, pause expiry, concurrency-slot leases, vacuum and cleanup. Each
wakes every few seconds: the server spent 1.85 s of CPU a minute idle with them, 1.22 without (two servers, the
whole session). Events, automations (the deployment test's webhook), task-run records and cancellation stay on."""


@contextlib.contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """`prefect server start` (flows/deploy/ops.py) with its own PREFECT_HOME; its API URL set for this process's flows
    (Prefect's settings, read once at import, are overridden the way prefect.testing's harness does) and in
    os.environ for every subprocess; all restored on exit."""
    import prefect.context
    import prefect.settings

    from flows.deploy import ops

    with ops.prefect_server(home, server_env=QUIET_SERVICES) as env:
        url = env["PREFECT_API_URL"]
        before = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = url
        try:
            with prefect.settings.temporary_settings(updates={prefect.settings.PREFECT_API_URL: url}), \
                    prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
                yield url
        finally:
            if before is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = before


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def group_of(nodeid: str) -> str:
    f = file_of(nodeid)
    return SERIAL if f in SERIAL_FILES else f


def schedule(items: list[pytest.Item]) -> None:
    """Order the groups longest first, the tests of a group in their collection order."""
    known = json.loads(DURATIONS.read_text())["tests"] if DURATIONS.exists() else {}
    total: dict[str, float] = defaultdict(float)
    first: dict[str, int] = {}
    groups = [group_of(item.nodeid) for item in items]
    for i, (item, group) in enumerate(zip(items, groups, strict=True)):
        total[group] += known.get(item.nodeid, UNKNOWN_TEST_SECONDS)
        first.setdefault(group, i)
    order = {id(item): (-total[g], first[g], i) for i, (item, g) in enumerate(zip(items, groups, strict=True))}
    items.sort(key=lambda item: order[id(item)])


class Scheduling:
    """A pytest plugin (registered where pytest-xdist is): xdist's scope scheduler with this module's groups as its
    scopes. With --no-loadscope-reorder it hands the scopes out in collection order, which `schedule` made longest
    first."""

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config, log):
        from xdist.scheduler import LoadScopeScheduling

        class GroupScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return group_of(nodeid)

        return GroupScheduling(config, log)


class Times:
    """Each test's seconds (setup + call + teardown), summed per file at the end of the run."""

    def __init__(self) -> None:
        self.start = time.time()
        self.tests: dict[str, float] = defaultdict(float)

    def add(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] += report.duration

    def summary(self, reporter, path: str | None) -> None:
        if hasattr(reporter.config, "workerinput") or not self.tests:
            return  # an xdist worker: the controller reports
        wall = time.time() - self.start
        files: dict[str, float] = defaultdict(float)
        for nodeid, s in self.tests.items():
            files[file_of(nodeid)] += s
        workers = getattr(reporter.config.option, "numprocesses", None) or 1
        reporter.write_sep("=", f"lmforge: {len(self.tests)} tests in {wall / 60:.1f} min wall on {workers} "
                                f"worker(s); test time summed {sum(files.values()) / 60:.1f} min")
        for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:15]:
            reporter.write_line(f"{s:8.1f} s  {f}")
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps({
                "date": time.strftime("%Y-%m-%d", time.gmtime()), "wall_seconds": round(wall, 1), "workers": workers,
                "files": {f: round(s, 2) for f, s in sorted(files.items())},
                "tests": {t: round(s, 2) for t, s in sorted(self.tests.items())}}, indent=1) + "\n")


TIMES = Times()
