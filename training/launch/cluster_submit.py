"""Submit a cluster launch file (training/launch/cluster.py) and follow the job to its end.

    lmforge pretrain ... --nnodes 4 --submit k8s --image REGISTRY/lmforge:0.1.0 --namespace ml

    from training.launch.cluster_submit import submit, follow
    job = submit("slurm", text, "lmforge-demo", log_dir="/shared/runs/demo/pretrain")   # sbatch --parsable
    follow(job, timeout_s=4 * 3600)   # returns once it succeeded; JobFailed (state + log tail) or TimeoutError

The cluster is reached through its own command-line clients, as an operator would, so their configuration
(kubeconfig contexts and auth plugins, Slurm's defaults) applies unchanged:
- k8s: `kubectl delete` any earlier Job and Service of this name and waits for their pods to go (a Job's pod
  template cannot be changed in place, and a rerun resumes from the last checkpoint anyway), `kubectl apply -f -`, then `kubectl get job NAME
  -o json` every `poll_s`: the Complete or Failed condition ends it; `kubectl logs -l job-name=NAME` for the tail;
- pytorchjob: the same with `kubectl get pytorchjob NAME`; its last true condition (Created, Running,
  Restarting, Succeeded, Failed) is its state; pods are labelled training.kubeflow.org/job-name=NAME;
- slurm: `sbatch --parsable` with the script on stdin, then `sacct -j ID -X -n -P --format=State,ExitCode`
  (Slurm's accounting). Where accounting is off (no slurmdbd: sacct says "Slurm accounting storage is
  disabled"), sacct is missing or has no line yet, the controller is asked: `scontrol show job -o ID`
  (JobState, ExitCode, Reason; it keeps an ended job for MinJobAge, 300 s by default, longer than a poll), then
  `squeue -j ID -h -o %T --states=all`. The batch output goes to `<log_dir>/<job>-<ID>.out`, whose last lines
  a failure reports.
A job still running when the timeout passes, or when this process is interrupted (Ctrl-C, SIGTERM from a
cancelled flow), is cancelled (`kubectl delete`, `scancel`), so a retry never races a forgotten job.

The interpretation of each client's answer is pure (`k8s_job_state`, `pytorchjob_state`, `slurm_state`); the rest
runs the clients. Considered: the `kubernetes` Python client and submitit (Slurm); both add a dependency and
their own configuration, while the CLIs are what a cluster's users already have set up. Tested only against
stand-in executables that play scripted states (tests/unit/test_cluster_submit.py), whose Slurm answers were
captured from Slurm 22.05 (Debian's slurm-wlm); tests/integration/test_slurm_cluster.py runs pretraining on a
real 2-node Slurm (infra/slurm/local-cluster.sh). The Kubernetes kinds have not met a real cluster.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from training.launch.cluster import KINDS

PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"


class JobFailed(RuntimeError):
    """The cluster job ended in failure; the message names it, its last state and its last log lines."""


@dataclass(frozen=True)
class JobRef:
    kind: str
    """k8s, pytorchjob or slurm."""
    name: str
    """The job's name (Kubernetes), or its Slurm job id."""
    namespace: str = ""
    """Kubernetes namespace; empty: kubectl's current one."""
    log: str = ""
    """Slurm: the batch output file."""

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"slurm job {self.name}" if self.kind == "slurm" else f"{self.kind} job {self.name}{where}"


@dataclass(frozen=True)
class JobState:
    phase: str
    """pending, running, succeeded or failed."""
    detail: str = ""

    @property
    def done(self) -> bool:
        return self.phase in (SUCCEEDED, FAILED)


# ---- pure: what each client's answer says ------------------------------------------------------------------------

def _true_conditions(obj: dict) -> list[dict]:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if str(c.get("status")) == "True"]


def _why(c: dict) -> str:
    return ": ".join(x for x in (c.get("reason", ""), c.get("message", "")) if x)


def k8s_job_state(obj: dict) -> JobState:
    """A batch/v1 Job (`kubectl get job -o json`): Complete or Failed end it; active pods mean running."""
    for c in _true_conditions(obj):
        if c.get("type") == "Complete":
            return JobState(SUCCEEDED, _why(c))
        if c.get("type") == "Failed":
            return JobState(FAILED, _why(c) or "Failed")
    s = obj.get("status") or {}
    counts = f"{s.get('active', 0)} active, {s.get('succeeded', 0)} succeeded, {s.get('failed', 0)} failed pods"
    return JobState(RUNNING if s.get("active") else PENDING, counts)


def pytorchjob_state(obj: dict) -> JobState:
    """A kubeflow.org/v1 PyTorchJob: its last true condition (the operator appends them in order)."""
    phases = {"Succeeded": SUCCEEDED, "Failed": FAILED, "Running": RUNNING, "Restarting": RUNNING, "Created": PENDING}
    conds = [c for c in _true_conditions(obj) if c.get("type") in phases]
    if not conds:
        return JobState(PENDING, "no condition yet")
    last = conds[-1]
    return JobState(phases[last["type"]], _why(last) or last["type"])


SLURM_PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED", "CONFIGURING"}
SLURM_RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}


def slurm_state(sacct_out: str) -> JobState:
    """`sacct -X -n -P --format=State,ExitCode` for one job: COMPLETED succeeded; FAILED, CANCELLED by N, TIMEOUT,
    NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE failed; no line yet: pending."""
    line = next((x.strip() for x in sacct_out.splitlines() if x.strip()), "")
    if not line:
        return JobState(PENDING, "not in Slurm's accounting yet")
    state, _, exit_code = line.partition("|")
    return JobState(_slurm_phase(state)[0], state + (f" (exit {exit_code})" if exit_code else ""))


def scontrol_state(out: str, job_id: str) -> JobState:
    """`scontrol show job -o ID`: one line of Key=Value fields; JobState is read as sacct's State is."""
    line = next((x for x in out.splitlines() if re.search(rf"(^|\s)JobId={re.escape(job_id)}(\s|$)", x)), "")
    fields = dict(re.findall(r"(?:^|\s)(JobState|ExitCode|Reason|NodeList)=(\S*)", line))
    if "JobState" not in fields:
        raise ValueError(f"no JobState for job {job_id} in `scontrol show job -o` output: {out.strip()[:300]!r}")
    state = JobState(*_slurm_phase(fields["JobState"]))
    why = [f"exit {fields['ExitCode']}"] if state.done and fields.get("ExitCode") else []
    why += [fields["Reason"]] if fields.get("Reason", "None") not in ("None", "(null)") else []
    why += [f"on {fields['NodeList']}"] if state.phase == RUNNING and fields.get("NodeList") else []
    return JobState(state.phase, fields["JobState"] + (f" ({'; '.join(why)})" if why else ""))


def squeue_state(out: str) -> JobState | None:
    """`squeue -j ID -h -o %T --states=all`: the state word, or None when the controller no longer knows the job."""
    word = next((x.strip() for x in out.splitlines() if x.strip()), "")
    return JobState(*_slurm_phase(word)) if word else None


def _slurm_phase(state: str) -> tuple[str, str]:
    word = state.split()[0] if state.split() else ""
    if word == "COMPLETED":
        return SUCCEEDED, state
    if word in SLURM_PENDING:
        return PENDING, state
    if word in SLURM_RUNNING:
        return RUNNING, state
    return FAILED, state


def accounting_off(sacct_err: str) -> bool:
    """sacct's answer on a cluster without slurmdbd (AccountingStorageType=accounting_storage/none)."""
    return "accounting storage is disabled" in sacct_err.lower()


# ---- the clients -------------------------------------------------------------------------------------------------

def _run(argv: list[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which(argv[0]) is None:
        raise FileNotFoundError(f"{argv[0]} is not on PATH: submitting a cluster job runs it (install the "
                                f"cluster's client on this machine, or run the flow where it is)")
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc


def _kubectl(ref: JobRef, *args: str) -> list[str]:
    return ["kubectl", *(["--namespace", ref.namespace] if ref.namespace else []), *args]


def _objects(ref: JobRef) -> list[str]:
    return [f"job/{ref.name}", f"service/{ref.name}"] if ref.kind == "k8s" else [f"pytorchjob/{ref.name}"]


def submit(kind: str, rendered: str, job: str, namespace: str = "", log_dir: str | Path = "") -> JobRef:
    """Hand `rendered` (render(kind, ...)) to the cluster; returns the job to follow."""
    if kind not in KINDS:
        raise ValueError(f"cluster kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "slurm":
        out = Path(log_dir or ".").resolve()
        out.mkdir(parents=True, exist_ok=True)
        answer = _run(["sbatch", "--parsable", f"--output={out}/{job}-%j.out"], stdin=rendered).stdout.strip()
        job_id = answer.split(";", 1)[0]  # "ID" or "ID;CLUSTER"
        if not job_id.isdigit():
            raise RuntimeError(f"sbatch --parsable answered {answer!r}, not a job id")
        return JobRef(kind, job_id, log=str(out / f"{job}-{job_id}.out"))
    ref = JobRef(kind, job, namespace)
    # foreground: returns once the old pods are gone, so none of them answers for the new job's hostnames
    _run(_kubectl(ref, "delete", *_objects(ref), "--ignore-not-found", "--cascade=foreground", "--wait=true"))
    _run(_kubectl(ref, "apply", "-f", "-"), stdin=rendered)
    return ref


def _poll_slurm(ref: JobRef) -> JobState:
    """sacct where accounting answers; else the controller's memory (scontrol, then squeue)."""
    why = "sacct is not installed"
    if shutil.which("sacct"):
        proc = _run(["sacct", "-j", ref.name, "-X", "-n", "-P", "--format=State,ExitCode"], check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return slurm_state(proc.stdout)
        # accounting off, slurmdbd down, or the job not recorded yet (pending): the controller knows
        why = "no line in sacct yet" if proc.returncode == 0 else proc.stderr.strip()[-300:]
        if proc.returncode and not accounting_off(proc.stderr):
            why = f"`sacct` failed (exit {proc.returncode}): {why}"
    shown = _run(["scontrol", "show", "job", "-o", ref.name], check=False)
    if shown.returncode == 0:
        return scontrol_state(shown.stdout, ref.name)
    queued = _run(["squeue", "-j", ref.name, "-h", "-o", "%T", "--states=all"], check=False)
    state = squeue_state(queued.stdout) if queued.returncode == 0 else None
    if state is None:  # unknown to the controller: ended more than MinJobAge ago, or never there
        raise RuntimeError(f"{ref} is unknown to the controller and Slurm's accounting has no record ({why}): "
                           f"`scontrol show job` answered {shown.stderr.strip()[-300:]!r}")
    return state


def poll(ref: JobRef) -> JobState:
    if ref.kind == "slurm":
        return _poll_slurm(ref)
    what = "job" if ref.kind == "k8s" else "pytorchjob"
    obj = json.loads(_run(_kubectl(ref, "get", what, ref.name, "-o", "json")).stdout)
    return k8s_job_state(obj) if ref.kind == "k8s" else pytorchjob_state(obj)


def log_tail(ref: JobRef, lines: int = 40) -> str:
    """The job's last log lines (every pod's, prefixed by kubectl with the pod), or why there are none."""
    if ref.kind == "slurm":
        path = Path(ref.log)
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:]) if path.is_file() \
            else f"(no batch output at {path})"
    label = "job-name" if ref.kind == "k8s" else "training.kubeflow.org/job-name"
    proc = _run(_kubectl(ref, "logs", "-l", f"{label}={ref.name}", "--prefix", f"--tail={lines}"), check=False)
    return proc.stdout if proc.returncode == 0 else f"(kubectl logs failed: {proc.stderr.strip()[-500:]})"


def cancel(ref: JobRef) -> None:
    if ref.kind == "slurm":
        _run(["scancel", ref.name], check=False)
    else:
        _run(_kubectl(ref, "delete", *_objects(ref), "--ignore-not-found", "--wait=false"), check=False)


def follow(ref: JobRef, timeout_s: float = 0, poll_s: float = 15, tail_lines: int = 40, max_errors: int = 5,
           say: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> JobState:
    """Poll `ref` until it ends; say each change of state. Returns the final state when it succeeded; raises
    JobFailed when it failed, TimeoutError after `timeout_s` (0: no limit). A `kubectl get`/`sacct` that fails
    (an API server restarting) is retried; `max_errors` failures in a row end the wait."""
    start, last, errors = clock(), None, 0
    finished = False
    try:
        while True:
            try:
                state = poll(ref)
                errors = 0
            except (RuntimeError, ValueError) as e:
                errors += 1
                if errors >= max_errors:
                    raise RuntimeError(f"{ref}: could not read its state {errors} times in a row: {e}") from e
                state = last or JobState(PENDING, "state not read yet")
            if state != last:
                say(f"[cluster] {ref}: {state.phase}" + (f" ({state.detail})" if state.detail else ""))
                last = state
            if state.phase == SUCCEEDED:
                finished = True
                say(f"[cluster] {ref}: last log lines\n{log_tail(ref, tail_lines)}")
                return state
            if state.phase == FAILED:
                finished = True
                raise JobFailed(f"{ref} failed: {state.detail}\n--- last {tail_lines} log lines ---\n"
                                f"{log_tail(ref, tail_lines)}")
            if timeout_s and clock() - start >= timeout_s:
                raise TimeoutError(f"{ref} still {state.phase} ({state.detail}) after {timeout_s:.0f}s; cancelled it."
                                   f"\n--- last {tail_lines} log lines ---\n{log_tail(ref, tail_lines)}")
            sleep(poll_s)
    finally:
        if not finished:  # timeout, interruption, or unreadable state: leave no job running behind us
            try:
                cancel(ref)
            except OSError as e:  # the client vanished: say so, and let the first error be the one raised
                say(f"[cluster] could not cancel {ref}: {e}")


def run_on_cluster(kind: str, rendered: str, job: str, namespace: str = "", log_dir: str | Path = "",
                   timeout_s: float = 0, poll_s: float = 15, say: Callable[[str], None] = print) -> JobState:
    """Submit, then follow to the end (what `lmforge pretrain --submit KIND` does)."""
    ref = submit(kind, rendered, job, namespace, log_dir)
    say(f"[cluster] submitted {ref}")
    return follow(ref, timeout_s=timeout_s, poll_s=poll_s, say=say)
