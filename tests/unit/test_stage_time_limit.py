"""A stage's time limit holds where Prefect cannot enforce it: a task in a worker thread (a submitted task, or a
stage inside an ablation arm's subflow, which runs in one)."""
from __future__ import annotations

import sys
import time

import pytest

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


pytestmark = pytest.mark.usefixtures("prefect_api")  # its flow talks to the session's server


def test_a_stage_past_its_limit_is_stopped_and_named(tmp_path):
    from flows.stages.runner import run_logged

    t0 = time.time()
    with pytest.raises(TimeoutError, match=r"stage sleepy ran past its time limit of 0.0 minutes"):
        run_logged(SLEEP, tmp_path / "s.log", "sleepy", grace=2, timeout=1.5)
    assert time.time() - t0 < 20
    assert run_logged([sys.executable, "-c", "pass"], tmp_path / "ok.log", "quick", timeout=30) == 0


def test_the_limit_is_the_tasks_own_only_in_a_worker_thread():
    from prefect import flow, task

    from flows.stages.runner import task_time_limit

    seen = {}

    @task(timeout_seconds=42)
    def probe(where: str) -> None:
        seen[where] = task_time_limit()

    @flow
    def outer() -> None:
        probe("main")
        probe.submit("thread").wait()  # the default task runner's worker thread

    outer()
    assert seen == {"main": None, "thread": 42}
    assert task_time_limit() is None  # outside any task


def test_a_stage_told_to_stop_twice_is_stopped_once(capsys):
    import subprocess
    import threading

    from flows.stages.runner import _stop

    # a stage that takes its time to exit after SIGTERM: the second stop waits for the first instead of repeating it
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, lambda *a: "
                             "(time.sleep(1), exit(3))); print('up', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    first = threading.Thread(target=_stop, args=(proc, "slow", 10))
    first.start()
    time.sleep(0.3)
    _stop(proc, "slow", 10)
    first.join()
    assert proc.returncode == 3 and capsys.readouterr().out.count("stopping: SIGTERM") == 1
