"""Launching one stage from a flow task: a subprocess, its logs, and skipping it when nothing changed.

A stage runs as `python -m lmforge.cli <stage> ...`. Its stdout (lmforge's progress lines) goes to
the flow log and to `<run>/logs/<stage>.log`; its stderr (library warnings, tqdm bars, tracebacks)
to the log file only (common/logs.py sends each kind to its stream, so nothing is filtered here).

Skipping: a finished stage leaves `.flow-key.json` beside its manifest: the command, and the sha256 of
every upstream stage's manifest (or the size and mtime of each raw input file). A rerun with the
same key and an intact manifest skips the stage, across worker restarts; a changed option or a
rerun upstream stage (its manifest changes) runs it again, and so every stage after it.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from common.config import options_to_argv
from common.redact import redact_args, redact_text
from flows.stages.lines import shown, stage_summary
from schemas.manifest import MANIFEST_NAME, atomic_write_json, sha256_file

FLOW_KEY = ".flow-key.json"


def _file_signature(pattern: str) -> list[list[Any]]:
    files = sorted(glob.glob(os.path.join(pattern, "**", "*"), recursive=True) if os.path.isdir(pattern) else glob.glob(pattern))
    return [[f, os.path.getsize(f), os.stat(f).st_mtime_ns] for f in files if os.path.isfile(f)]


def stage_key(stage: str, cmd: list[str], upstream: Iterable[str | Path] = (), raw_inputs: Iterable[str] = ()) -> dict:
    """What decides a stage's output: its command, its upstream manifests, its raw input files."""
    return {"stage": stage, "cmd": redact_args([str(c) for c in cmd]),
            "upstream": {str(u): sha256_file(Path(u) / MANIFEST_NAME) for u in upstream},
            "raw_inputs": {str(r): _file_signature(str(r)) for r in raw_inputs}}


def unchanged(out: Path, key: dict) -> bool:
    path = out / FLOW_KEY
    return (out / MANIFEST_NAME).exists() and path.exists() and json.loads(path.read_text()) == key


class _TimeoutEnforced(logging.Filter):
    """Prefect warns, for every task with a timeout that runs in a worker thread, that it cannot enforce the timeout
    there; launch_stage does (task_time_limit), so the warning would mislead: it is left out."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "running in a worker thread. Timeouts in worker threads" not in str(record.msg)


logging.getLogger("prefect.task_runs").addFilter(_TimeoutEnforced())

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""A flow's stages never ask a model hub: a name such as `someorg/somemodel` in a form's model field that is no
folder under the data root fails as a missing path, it does not make the worker fetch (and run) a hub's files."""

STOP_GRACE_SECONDS = 90
"""How long a stage gets to stop after SIGTERM: `lmforge pretrain --submit` cancels its cluster job (scancel,
kubectl delete) and torchrun stops its workers in that time; then it is killed."""


TERMINAL: list = []
"""The stream `lmforge run` keeps for progress lines while its console shows nothing else (run_cli.failures_to_file,
quiet)."""


def progress(line: str) -> None:
    """A line for the person at the console: one per stage, a warning, what a user must do. It goes where every line
    goes (the flow log, the Prefect UI's log) and, under `lmforge run`'s quiet console, to the terminal too."""
    print(line, flush=True)
    for stream in TERMINAL[-1:]:
        stream.write(line + "\n")
        stream.flush()


def run_logged(cmd: list[str], log_path: Path, stage: str, grace: float = STOP_GRACE_SECONDS, *, echo: bool = True,
               append: bool = False, env: dict[str, str] | None = None, cwd: str | Path | None = None,
               on_start: Callable[[subprocess.Popen], Any] | None = None, timeout: float | None = None) -> int:
    """Run `cmd`, its stdout to the flow log and `log_path`, its stderr to `log_path`, both redacted; returns
    its exit code. With `timeout` (seconds), a stage still running then gets SIGTERM, `grace` seconds, then SIGKILL,
    and TimeoutError is raised: the limit of a Prefect task that runs in a worker thread, where Prefect's own
    timeout cannot interrupt it.

    When this process is told to stop while the stage runs (Prefect's cancellation: a SIGTERM that its
    engine turns into TerminationSignal here; Ctrl-C), the stage gets SIGTERM first and `grace` seconds to
    stop cleanly, so a stage that submitted a cluster job cancels it instead of living on as an orphan.

    The benches' options (bench/kit/steps.py): `echo=False` keeps stdout out of this process's own (the log only),
    `append` adds to the log (a resumed step keeps its earlier attempts), `env` adds variables, `cwd` is the
    child's folder, `on_start(proc)` runs once the child exists (bench scale samples its memory from there)."""
    with open(log_path, "a" if append else "w", buffering=1) as log:  # line-buffered: tail -f works while a stage runs
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, cwd=cwd,
                                errors="replace", env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        assert proc.stdout is not None and proc.stderr is not None
        if on_start is not None:
            on_start(proc)
        # Both streams pass the redaction rule on their way to the log (common/redact.py): the net under
        # the stages' own, for a library that echoes its options or a traceback that shows a value.
        errors = threading.Thread(target=lambda: [log.write(redact_text(line)) for line in proc.stderr], daemon=True)
        errors.start()
        expired = threading.Event()
        timer = threading.Timer(timeout, lambda: (expired.set(), _stop(proc, stage, grace))) if timeout else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            for line in proc.stdout:
                line = redact_text(line)
                log.write(line)
                if echo and ": warning: " in line:
                    progress(f"[{stage}] {line.rstrip()}")
                elif echo:
                    print(f"[{stage}] {line}", end="", flush=True)
            code = proc.wait()
            errors.join()
        except BaseException:
            _stop(proc, stage, grace)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if expired.is_set():
            raise TimeoutError(f"stage {stage} ran past its time limit of {timeout / 60:.1f} minutes and was stopped "
                               f"(log: {log_path})")
        return code


def _stop(proc: subprocess.Popen, stage: str, grace: float) -> None:
    """SIGTERM to a running stage, `grace` seconds to exit, then SIGKILL. Once per stage: a second call (the time
    limit and a cancellation at once) waits for the first's outcome instead of saying and sending it again."""
    if proc.poll() is None and getattr(proc, "lmforge_stopping", False):
        try:
            proc.wait(timeout=grace + 10)
        except subprocess.TimeoutExpired:
            pass
    elif proc.poll() is None:
        proc.lmforge_stopping = True  # type: ignore[attr-defined]
        print(f"[{stage}] stopping: SIGTERM to the stage (pid {proc.pid}), {grace:g} s to exit", flush=True)
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def task_time_limit() -> float | None:
    """The running Prefect task's timeout when the task runs in a worker thread (submitted, or inside a subflow
    that runs in one), where Prefect cannot enforce it; None in the main thread, where Prefect does."""
    if threading.current_thread() is threading.main_thread():
        return None
    from prefect.context import TaskRunContext

    ctx = TaskRunContext.get()
    return ctx.task.timeout_seconds if ctx is not None else None


class StageFailed(RuntimeError):
    """A stage that exited non-zero, in one line: the stage, its reason (its own error line), its log."""

    def __init__(self, stage: str, reason: str, log: Path, rc: int):
        self.stage, self.reason, self.log, self.rc = stage, reason, log, rc
        super().__init__(f"stage {stage} failed: {reason} (log: {log})")


class StagesFailed(RuntimeError):
    """Stages that failed while the flow went on without them (fine-tune, distil, the card...): a line each."""

    def __init__(self, failures: list[BaseException], after: str = ""):
        self.failures = failures
        super().__init__("; ".join(map(str, failures)) + (f"; {after}" if after else ""))


TRANSIENT = ("ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError",
             "BrokenPipeError", "StageBusy", "KilledWorker", "DistNetworkError", "DistStoreError",
             "Temporary failure in name resolution", "Connection refused", "Connection reset", "Network is unreachable",
             "SIGKILL", "Signal 9")
"""What in a failed stage's reason marks a failure a second try can get past: the network, a peer or a worker lost, a
lock another run held. Anything else (bad input, a missing file, a bug) fails the same way again."""


def worth_retrying(exc: BaseException | None) -> bool:
    """Whether a task's failure may pass on a second try: a stage killed by a signal (a lost worker or node, the
    out-of-memory killer), a reason naming one of TRANSIENT, or a network error in the flow process itself. A stage
    past its time limit, one that named bad input, and every other error are not retried."""
    if isinstance(exc, StageFailed):
        return exc.rc < 0 or exc.rc in (137, 143) or any(t in exc.reason for t in TRANSIENT)
    return isinstance(exc, (ConnectionError, socket.gaierror))


def retry_if_transient(task, task_run, state) -> bool:
    """A Prefect task's `retry_condition_fn`: retries (the task's `retries`) only worth_retrying failures, so a
    deterministic one ends the run in one line, once, instead of again after the retry delay."""
    data = state.data
    return worth_retrying(data if isinstance(data, BaseException) else None)


def failure_reason(log_path: Path, width: int = 300) -> str:
    """The line of a failed stage's log that says why: the last `...error: ...` line (every entry point ends
    with one: common/cli.py), else the last line of a traceback (`ValueError: ...`), else its last line."""
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if ": error: " in line:
            return line.split(": error: ", 1)[1][:width]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Interrupt")) and " " not in head:
            return line[:width]
    return (lines[-1] if lines else "no output")[:width]


def launch_stage(stage: str, opts: dict[str, Any], out: Path, log_dir: Path, argv: Iterable[str] = (),
                 upstream: Iterable[str | Path] = (), raw_inputs: Iterable[str] = (), cache: bool = True,
                 before_run=None, log_name: str = "") -> tuple[str, bool]:
    """Run `lmforge <stage> [argv] <opts as flags>` unless it is unchanged since its last run.
    Returns (stage directory, whether it ran). `before_run` is called only when the stage runs."""
    out = Path(out)
    cmd = [sys.executable, "-m", "lmforge.cli", stage, *argv, *options_to_argv(opts)]
    upstream = list(upstream)
    key = stage_key(stage, cmd[3:], upstream, raw_inputs)
    if cache and unchanged(out, key):
        progress(f"[{log_name or stage}] unchanged since its last run (same options and inputs): kept {shown(out)}")
        return str(out), False
    (out / FLOW_KEY).unlink(missing_ok=True)
    if before_run is not None:
        before_run()
    log_path = Path(log_dir) / f"{log_name or stage}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print(f"[{stage}] {' '.join(redact_args(cmd[3:]))}", flush=True)
    rc = run_logged(cmd, log_path, stage, timeout=task_time_limit(), env=OFFLINE)
    if rc != 0:
        raise StageFailed(log_name or stage, failure_reason(log_path), log_path, rc)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / FLOW_KEY, key)
    progress(f"[{log_name or stage}] done in {time.time() - t0:.1f}s: {stage_summary(stage, out)}")
    return str(out), True
