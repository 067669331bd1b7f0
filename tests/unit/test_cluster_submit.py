"""training.launch.cluster_submit and the flows' `cluster` parameter: submitting a rendered launch file and following the
job to its end.

No cluster exists here: `kubectl`, `sbatch`, `sacct`, `scontrol`, `squeue` and `scancel` are TEST DOUBLES, small
scripts this test writes into a folder put first on PATH. Each records its argv and stdin and plays a scripted sequence of answers (pending ->
running -> succeeded, or a failure). What is checked is what lmforge sends to the clients and how it reads their
answers, in the formats the real clients print; not that a real API server or Slurm controller accepts the job.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest
import yaml

from training.launch.cluster import ClusterSpec, render
from training.launch.cluster_submit import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    JobFailed,
    JobRef,
    JobState,
    accounting_off,
    follow,
    k8s_job_state,
    pytorchjob_state,
    run_on_cluster,
    scontrol_state,
    slurm_state,
    squeue_state,
)

FAKE = '''#!{python}
"""TEST DOUBLE for a cluster client (kubectl, sbatch, sacct, scontrol, squeue, scancel): records the call, plays the next scripted
answer from script.json (the last one repeats). It talks to no cluster."""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
words = args[2:] if args[:1] == ["--namespace"] else args
key = "kubectl " + words[0] if tool == "kubectl" else tool
stdin = sys.stdin.read() if key in ("kubectl apply", "sbatch") else None
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"key": key, "argv": args, "stdin": stdin}}) + "\\n")
with open(os.path.join(here, "script.json")) as f:
    answers = json.load(f).get(key, [{{}}])
counter = os.path.join(here, "count-" + key.replace(" ", "-"))
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
answer = answers[min(n, len(answers) - 1)]
sys.stdout.write(answer.get("out", ""))
sys.stderr.write(answer.get("err", ""))
sys.exit(answer.get("rc", 0))
'''

OPTS = {"shards": "/shared/x/shards", "tokenizer": "/shared/x/tokenizer", "output": "/shared/x/pretrain", "steps": 50}

# Real answers, captured from Slurm 22.05.8 (Debian's slurm-wlm) on infra/slurm/local-cluster.sh's two nodes, which
# run without slurmdbd: `sbatch --hold` (pending), `srun sleep 100` (running, then scancel), `srun bash -c "exit 3"`.
SCONTROL = {
    "pending": (
        'JobId=3 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 Nice=0 Account=(null) '
        'QOS=(null) JobState=PENDING Reason=JobHeldUser Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 '
        'Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A '
        'SubmitTime=2026-11-25T10:30:51 EligibleTime=Unknown AccrueTime=Unknown StartTime=Unknown '
        'EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-25T10:30:51 '
        'Scheduler=Main Partition=debug AllocNode:Sid=localhost:3024 ReqNodeList=(null) ExcNodeList=(null) '
        'NodeList= NumNodes=2-2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* '
        'TRES=cpu=2,mem=2M,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 '
        'MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 '
        'Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp/cap StdErr=/tmp/cap/slurm-3.out '
        'StdIn=/dev/null StdOut=/tmp/cap/slurm-3.out Power= '
    ),
    "running": (
        'JobId=4 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 '
        'Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 '
        'BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A '
        'SubmitTime=2026-11-25T10:30:51 EligibleTime=2026-11-25T10:30:51 AccrueTime=2026-11-25T10:30:51 '
        'StartTime=2026-11-25T10:30:52 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 '
        'LastSchedEval=2026-11-25T10:30:52 Scheduler=Main Partition=debug AllocNode:Sid=localhost:3024 '
        'ReqNodeList=(null) ExcNodeList=(null) NodeList=n[1-2] BatchHost=n1 NumNodes=2 NumCPUs=2 NumTasks=2 '
        'CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* '
        'CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 '
        'OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp/cap '
        'StdErr=/tmp/cap/slurm-4.out StdIn=/dev/null StdOut=/tmp/cap/slurm-4.out Power= '
    ),
    "failed": (
        'JobId=2 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 '
        'Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 '
        'Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A '
        'SubmitTime=2026-11-25T10:30:51 EligibleTime=2026-11-25T10:30:51 AccrueTime=2026-11-25T10:30:51 '
        'StartTime=2026-11-25T10:30:52 EndTime=2026-11-25T10:30:52 Deadline=N/A SuspendTime=None '
        'SecsPreSuspend=0 LastSchedEval=2026-11-25T10:30:52 Scheduler=Main Partition=debug '
        'AllocNode:Sid=localhost:3024 ReqNodeList=(null) ExcNodeList=(null) NodeList=n[1-2] BatchHost=n1 '
        'NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 '
        'Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 '
        'Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) '
        'Command=(null) WorkDir=/tmp/cap StdErr=/tmp/cap/slurm-2.out StdIn=/dev/null '
        'StdOut=/tmp/cap/slurm-2.out Power= '
    ),
    "cancelled": (
        'JobId=4 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 '
        'Account=(null) QOS=(null) JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 Restarts=0 '
        'BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A '
        'SubmitTime=2026-11-25T10:30:51 EligibleTime=2026-11-25T10:30:51 AccrueTime=2026-11-25T10:30:51 '
        'StartTime=2026-11-25T10:30:52 EndTime=2026-11-25T10:30:54 Deadline=N/A SuspendTime=None '
        'SecsPreSuspend=0 LastSchedEval=2026-11-25T10:30:52 Scheduler=Main Partition=debug '
        'AllocNode:Sid=localhost:3024 ReqNodeList=(null) ExcNodeList=(null) NodeList=n[1-2] BatchHost=n1 '
        'NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 '
        'Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 '
        'Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) '
        'Command=(null) WorkDir=/tmp/cap StdErr=/tmp/cap/slurm-4.out StdIn=/dev/null '
        'StdOut=/tmp/cap/slurm-4.out Power= '
    ),
}
SACCT_OFF = {"rc": 1, "err": "Slurm accounting storage is disabled\n"}  # sacct's whole answer without slurmdbd
GONE = {"rc": 1, "err": "slurm_load_jobs error: Invalid job id specified\n"}  # scontrol, past MinJobAge


class FakeCluster:
    def __init__(self, bin_dir: Path):
        self.bin = bin_dir

    def play(self, script: dict[str, list[dict]]) -> FakeCluster:
        (self.bin / "script.json").write_text(json.dumps(script))
        for f in self.bin.glob("count-*"):
            f.unlink()
        (self.bin / "calls.jsonl").unlink(missing_ok=True)
        return self

    def calls(self, key: str | None = None) -> list[dict]:
        path = self.bin / "calls.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r for r in rows if key is None or r["key"] == key]


@pytest.fixture
def cluster(tmp_path, monkeypatch) -> FakeCluster:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for tool in ("kubectl", "sbatch", "sacct", "scontrol", "squeue", "scancel"):
        path = bin_dir / tool
        path.write_text(FAKE.format(python=sys.executable))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return FakeCluster(bin_dir)


def _job(conditions=(), **status) -> dict:
    return {"out": json.dumps({"kind": "Job", "status": {**status, "conditions": [
        {"type": t, "status": "True", "reason": r, "message": m} for t, r, m in conditions]}})}


def test_k8s_job_submitted_and_followed_to_success(cluster):
    text = render("k8s", OPTS, ClusterSpec(nnodes=3, job="mini"))
    cluster.play({"kubectl get": [{"out": "{}"}, _job(active=3), _job([("Complete", "", "")], succeeded=3)],
                  "kubectl logs": [{"out": "[pod/mini-0-abc/pretrain] pretrain: wrote /shared/x/pretrain\n"}]})
    said: list[str] = []
    state = run_on_cluster("k8s", text, "mini", namespace="ml", poll_s=0, say=said.append)
    assert state.phase == SUCCEEDED
    calls = cluster.calls()
    assert [c["key"] for c in calls] == ["kubectl delete", "kubectl apply", *["kubectl get"] * 3, "kubectl logs"]
    # an earlier job of this name goes first (a Job's pod template cannot be changed in place)
    assert calls[0]["argv"] == ["--namespace", "ml", "delete", "job/mini", "service/mini", "--ignore-not-found",
                                "--cascade=foreground", "--wait=true"]
    assert calls[1]["argv"] == ["--namespace", "ml", "apply", "-f", "-"] and calls[1]["stdin"] == text
    assert calls[2]["argv"] == ["--namespace", "ml", "get", "job", "mini", "-o", "json"]
    assert calls[-1]["argv"][2:5] == ["logs", "-l", "job-name=mini"]
    phases = [line.split(": ", 1)[1].split(" ")[0] for line in said if "k8s job mini in namespace ml: " in line]
    assert phases[:3] == [PENDING, RUNNING, SUCCEEDED]
    assert "pretrain: wrote /shared/x/pretrain" in said[-1]


def test_pytorchjob_failure_names_the_job_its_state_and_log_tail(cluster):
    text = render("pytorchjob", OPTS, ClusterSpec(nnodes=2, job="pt"))
    created = ("Created", "PyTorchJobCreated", "")
    running = ("Running", "PyTorchJobRunning", "")
    failed = ("Failed", "PyTorchJobFailed", "PyTorchJob pt is failed because 1 Worker replica(s) failed.")
    cluster.play({"kubectl get": [_job([created]), _job([created, running]), _job([created, running, failed])],
                  "kubectl logs": [{"out": "[pod/pt-worker-0/pytorch] RuntimeError: shards not found\n"}]})
    with pytest.raises(JobFailed) as e:
        run_on_cluster("pytorchjob", text, "pt", poll_s=0, say=lambda s: None)
    msg = str(e.value)
    assert msg.startswith("pytorchjob job pt failed: PyTorchJobFailed: PyTorchJob pt is failed because 1 Worker")
    assert "RuntimeError: shards not found" in msg
    gets = cluster.calls("kubectl get")
    assert gets[0]["argv"] == ["get", "pytorchjob", "pt", "-o", "json"]  # no namespace given: kubectl's current
    assert cluster.calls("kubectl logs")[0]["argv"][:3] == ["logs", "-l", "training.kubeflow.org/job-name=pt"]
    deletes = cluster.calls("kubectl delete")
    assert len(deletes) == 1 and deletes[0]["argv"][1] == "pytorchjob/pt"  # only the one before apply: logs stay


def test_slurm_job_submitted_with_sbatch_and_followed_with_sacct(cluster, tmp_path):
    text = render("slurm", OPTS, ClusterSpec(nnodes=2, job="sl"))
    cluster.play({"sbatch": [{"out": "4242;main\n"}],  # sacct has no line yet: the controller is asked
                  "sacct": [{"out": ""}, {"out": "PENDING|0:0\n"}, {"out": "RUNNING|0:0\n"}, {"out": "COMPLETED|0:0\n"}],
                  "scontrol": [{"out": _as_job(SCONTROL["pending"], 4242)}]})
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sl-4242.out").write_text("step 50/50\npretrain: wrote /shared/x/pretrain\n")
    said: list[str] = []
    state = run_on_cluster("slurm", text, "sl", log_dir=tmp_path / "out", poll_s=0, say=said.append)
    assert state == JobState(SUCCEEDED, "COMPLETED (exit 0:0)")
    (sb,) = cluster.calls("sbatch")
    assert sb["argv"] == ["--parsable", f"--output={tmp_path / 'out'}/sl-%j.out"] and sb["stdin"] == text
    assert cluster.calls("sacct")[0]["argv"] == ["-j", "4242", "-X", "-n", "-P", "--format=State,ExitCode"]
    assert len(cluster.calls("sacct")) == 4 and not cluster.calls("scancel")
    assert [c["argv"] for c in cluster.calls("scontrol")] == [["show", "job", "-o", "4242"]]
    assert said[0] == "[cluster] submitted slurm job 4242" and "pretrain: wrote /shared/x/pretrain" in said[-1]
    assert said[1] == "[cluster] slurm job 4242: pending (PENDING (JobHeldUser))"


def _as_job(line: str, job_id: int) -> str:
    """A captured `scontrol show job -o` line renumbered as `job_id` (the double's sbatch hands out other ids)."""
    return line.replace(line.split()[0], f"JobId={job_id}", 1) + "\n"


def test_slurm_without_accounting_is_followed_through_scontrol(cluster, tmp_path):
    """No slurmdbd (the cluster infra/slurm/local-cluster.sh starts): every sacct fails with accounting disabled,
    so states come from `scontrol show job -o`; a failure names the state, exit code, reason and the log tail."""
    cluster.play({"sbatch": [{"out": "2\n"}], "sacct": [SACCT_OFF],
                  "scontrol": [{"out": _as_job(SCONTROL[s], 2)} for s in ("pending", "running", "failed")]})
    (tmp_path / "sl-2.out").write_text("srun: error: n1: task 0: Exited with exit code 3\n")
    said: list[str] = []
    with pytest.raises(JobFailed, match=r"(?s)slurm job 2 failed: FAILED \(exit 3:0; NonZeroExitCode\).*"
                                        r"--- last 40 log lines ---\nsrun: error: n1: task 0: Exited with exit code 3"):
        run_on_cluster("slurm", "#!/bin/bash\n", "sl", log_dir=tmp_path, poll_s=0, say=said.append)
    assert said[1:] == ["[cluster] slurm job 2: pending (PENDING (JobHeldUser))",
                        "[cluster] slurm job 2: running (RUNNING (on n[1-2]))",
                        "[cluster] slurm job 2: failed (FAILED (exit 3:0; NonZeroExitCode))"]
    assert len(cluster.calls("sacct")) == 3 and not cluster.calls("squeue") and not cluster.calls("scancel")


def test_a_job_the_controller_forgot_is_asked_of_squeue_then_given_up(cluster, tmp_path):
    """Past MinJobAge (300 s after its end) the controller forgets a job; squeue --states=all is the last look.
    Neither knowing it, its end is unknown: after max_errors looks in a row the wait fails (and scancel is sent,
    which is harmless for a job that ended)."""
    cluster.play({"sacct": [SACCT_OFF], "scontrol": [GONE], "squeue": [{"out": "RUNNING\n"}, GONE]})
    ref = JobRef("slurm", "9", log=str(tmp_path / "none.out"))
    with pytest.raises(RuntimeError, match=r"could not read its state 2 times in a row: slurm job 9 is unknown to "
                                           r"the controller .*Slurm accounting storage is disabled.*Invalid job id"):
        follow(ref, poll_s=0, max_errors=2, say=lambda s: None)
    assert [c["argv"] for c in cluster.calls("squeue")][0] == ["-j", "9", "-h", "-o", "%T", "--states=all"]
    assert len(cluster.calls("squeue")) == 3 and [c["argv"] for c in cluster.calls("scancel")] == [["9"]]


def test_slurm_failure_and_timeout(cluster, tmp_path):
    cluster.play({"sbatch": [{"out": "77\n"}], "sacct": [{"out": "RUNNING|0:0\n"}, {"out": "FAILED|1:0\n"}]})
    (tmp_path / "sl-77.out").write_text("Traceback (most recent call last):\nValueError: bad shard\n")
    with pytest.raises(JobFailed, match=r"(?s)slurm job 77 failed: FAILED \(exit 1:0\).*ValueError: bad shard"):
        run_on_cluster("slurm", "#!/bin/bash\n", "sl", log_dir=tmp_path, poll_s=0, say=lambda s: None)
    assert not cluster.calls("scancel")  # it ended by itself

    cluster.play({"sacct": [{"out": "RUNNING|0:0\n"}]})
    ticks = iter(range(0, 1000, 4))  # a clock 4 s further at each look
    with pytest.raises(TimeoutError, match="slurm job 78 still running .* after 10s; cancelled it"):
        follow(JobRef("slurm", "78", log=str(tmp_path / "none.out")), timeout_s=10, poll_s=0, say=lambda s: None,
               clock=lambda: next(ticks))
    assert [c["argv"] for c in cluster.calls("scancel")] == [["78"]]  # no job is left running behind us


def test_unreadable_state_is_retried_then_the_job_is_cancelled(cluster):
    cluster.play({"kubectl get": [{"rc": 1, "err": "connection refused"}, _job(active=2), _job(active=2),
                                  {"rc": 1, "err": "connection refused"}]})
    with pytest.raises(RuntimeError, match="could not read its state 3 times in a row: .*connection refused"):
        follow(JobRef("k8s", "mini"), poll_s=0, max_errors=3, say=lambda s: None)
    assert len(cluster.calls("kubectl get")) == 6  # one failure, two answers, three failures
    (delete,) = cluster.calls("kubectl delete")
    assert delete["argv"] == ["delete", "job/mini", "service/mini", "--ignore-not-found", "--wait=false"]


def test_a_missing_client_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="kubectl is not on PATH"):
        run_on_cluster("k8s", "", "mini")
    with pytest.raises(FileNotFoundError, match="sbatch is not on PATH"):
        run_on_cluster("slurm", "", "mini", log_dir=tmp_path)


@pytest.mark.parametrize("answer, phase", [
    ("", PENDING), ("PENDING|0:0", PENDING), ("REQUEUED|0:0", PENDING), ("RUNNING|0:0", RUNNING),
    ("COMPLETING|0:0", RUNNING), ("COMPLETED|0:0", SUCCEEDED), ("FAILED|1:0", FAILED), ("CANCELLED by 1000|0:15", FAILED),
    ("TIMEOUT|0:0", FAILED), ("OUT_OF_MEMORY|0:125", FAILED), ("NODE_FAIL|0:0", FAILED), ("PREEMPTED|0:0", FAILED)])
def test_slurm_states(answer, phase):
    assert slurm_state(answer + "\n").phase == phase


@pytest.mark.parametrize("captured, phase, detail", [
    ("pending", PENDING, "PENDING (JobHeldUser)"), ("running", RUNNING, "RUNNING (on n[1-2])"),
    ("failed", FAILED, "FAILED (exit 3:0; NonZeroExitCode)"), ("cancelled", FAILED, "CANCELLED (exit 0:15)")])
def test_scontrol_states_from_a_real_controller(captured, phase, detail):
    line = SCONTROL[captured]
    assert scontrol_state(line + "\n", line.split()[0].split("=")[1]) == JobState(phase, detail)


def test_scontrol_and_squeue_answers_that_say_little():
    with pytest.raises(ValueError, match="no JobState for job 5"):
        scontrol_state(SCONTROL["running"], "5")  # another job's line (JobId=4): never read as this one's
    assert scontrol_state(_as_job(SCONTROL["running"], 41), "41").phase == RUNNING  # JobId=41 is not JobId=4
    assert squeue_state("PENDING\n") == JobState(PENDING, "PENDING") and squeue_state("COMPLETED\n").phase == SUCCEEDED
    assert squeue_state("") is None  # the controller no longer lists it
    assert accounting_off(SACCT_OFF["err"]) and not accounting_off("sacct: error: slurmdbd: Connection refused")


def test_kubernetes_states():
    assert k8s_job_state({}).phase == PENDING
    assert k8s_job_state({"status": {"active": 1, "failed": 0}}) == JobState(RUNNING, "1 active, 0 succeeded, 0 failed pods")
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                          "message": "Job has reached the specified backoff limit"}]}}
    assert k8s_job_state(failed) == JobState(FAILED, "BackoffLimitExceeded: Job has reached the specified backoff limit")
    stale = {"status": {"conditions": [{"type": "Failed", "status": "False"}], "active": 2}}
    assert k8s_job_state(stale).phase == RUNNING  # a condition that is not true says nothing
    restarting = {"status": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "False"},
                                            {"type": "Restarting", "status": "True", "reason": "PyTorchJobRestarting"}]}}
    assert pytorchjob_state(restarting) == JobState(RUNNING, "PyTorchJobRestarting")
    assert pytorchjob_state({"status": {}}).phase == PENDING


def test_lmforge_pretrain_submit_applies_the_manifest_and_reports_the_end(cluster, capsys):
    from lmforge.cli import main

    argv = ["pretrain", "--shards", "/data/s", "--tokenizer", "/data/t", "--output", "/data/o", "--steps", "7",
            "--nnodes", "2", "--submit", "pytorchjob", "--job-name", "cli-run", "--mount", "/data", "--namespace", "ml"]
    before = signal.getsignal(signal.SIGTERM)
    try:
        cluster.play({"kubectl get": [_job([("Succeeded", "PyTorchJobSucceeded", "")])]})
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "pytorchjob job cli-run in namespace ml: succeeded" in out
        assert "pretrain: pytorchjob job cli-run succeeded; wrote /data/o" in out
        (job,) = yaml.safe_load_all(cluster.calls("kubectl apply")[0]["stdin"])
        pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        assert pod["containers"][0]["volumeMounts"][0]["mountPath"] == "/data"
        cmd = shlex.split(pod["containers"][0]["args"][0])
        assert cmd[:2] == ["lmforge", "pretrain"] and cmd[cmd.index("--steps") + 1] == "7"

        cluster.play({"kubectl get": [_job([("Failed", "PyTorchJobFailed", "1 Master replica(s) failed")])]})
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "JobFailed: pytorchjob job cli-run in namespace ml failed: PyTorchJobFailed" in err
    finally:
        signal.signal(signal.SIGTERM, before)


# ---- the flows' `cluster` parameter ------------------------------------------------------------------------------

@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", str(tmp_path))
    for stage in ("shards", "tokenizer"):
        (tmp_path / "runs" / "demo" / stage).mkdir(parents=True)
        (tmp_path / "runs" / "demo" / stage / "manifest.json").write_text("{}")
    return tmp_path


def test_cluster_parameters_are_checked(data_root):
    from flows.params import TrainOnlyParams

    # pydantic wraps the ParamError (a ValueError) in its ValidationError (also a ValueError)
    with pytest.raises(ValueError, match="cluster k8s: a cluster launch file is for 2 or more nodes"):
        TrainOnlyParams(cluster="k8s")
    with pytest.raises(ValueError, match="leave hostfile and rdzv_endpoint empty"):
        TrainOnlyParams(cluster="slurm", nnodes=2, rdzv_endpoint="node0:29500")
    with pytest.raises(ValueError, match="shards .*elsewhere.* is not under cluster_mount .*: the pods would not see it"):
        TrainOnlyParams(cluster="pytorchjob", nnodes=2, cluster_mount=str(data_root / "runs"),
                        shards=str(data_root / "elsewhere"))
    TrainOnlyParams(cluster="slurm", nnodes=2, cluster_mount=str(data_root / "elsewhere"))  # Slurm mounts no claim
    assert TrainOnlyParams(cluster="k8s", nnodes=2).cluster_mount_dir() == str(data_root.resolve())


def test_the_pretrain_task_submits_the_job_and_follows_it(data_root, cluster, monkeypatch):
    """The flow's pretrain task with cluster=k8s: its options reach `lmforge pretrain --submit k8s` (run in this
    process instead of the stage launcher's subprocess, to stay fast), which applies the Job to the fake kubectl."""
    import flows.dag as dag
    from common.config import options_to_argv
    from flows.params import TrainOnlyParams
    from lmforge.cli import main

    monkeypatch.setenv("LMFORGE_CLUSTER_IMAGES", "reg/lmforge:*")  # the worker's allow-list (docs/SECURITY.md)
    p = TrainOnlyParams(run_name="k8s-run", cluster="k8s", nnodes=3, cluster_image="reg/lmforge:1",
                        cluster_namespace="ml", cluster_gpus=2, stage_timeout_minutes=30)
    run = p.run_dir
    options = dag.cluster_options(p, run)
    assert options == {"submit": "k8s", "job_name": "lmforge-k8s-run", "cluster_timeout": 1740.0, "gpus_per_node": 2,
                       "nproc": 2, "image": "reg/lmforge:1", "shared_pvc": "lmforge-runs",
                       "mount": str(data_root.resolve()), "namespace": "ml"}
    assert dag.cluster_options(TrainOnlyParams(), run) is None  # local torchrun stays the default

    def launch_in_process(stage, opts, out, log_dir, **kw):
        assert main([stage, *options_to_argv({**opts, "cluster_poll": 0})]) == 0
        return str(out), True

    monkeypatch.setattr(dag, "launch_stage", launch_in_process)
    cluster.play({"kubectl get": [_job(active=3), _job([("Complete", "", "")], succeeded=3)]})
    shards, tokenizer = str(data_root / "runs/demo/shards"), str(data_root / "runs/demo/tokenizer")
    before = signal.getsignal(signal.SIGTERM)
    try:
        out = dag.pretrain_task.fn(shards, tokenizer, run, {"steps": 5}, p.nproc, nnodes=p.nnodes, cluster=options)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert out == str(run / "pretrain")
    (svc, job) = yaml.safe_load_all(cluster.calls("kubectl apply")[0]["stdin"])
    assert (svc["kind"], job["kind"], job["metadata"]["name"], job["spec"]["completions"]) == (
        "Service", "Job", "lmforge-k8s-run", 3)
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "reg/lmforge:1" and c["resources"]["limits"]["nvidia.com/gpu"] == 2
    cmd = shlex.split(c["args"][0])
    assert cmd[cmd.index("--output") + 1] == str(run / "pretrain") and cmd[cmd.index("--shards") + 1] == shards
    assert cmd[cmd.index("--nproc") + 1] == "2" and cmd[cmd.index("--nnodes") + 1] == "3"
    assert "--submit" not in cmd  # the nodes train; only the flow's stage submits
    assert len(cluster.calls("kubectl get")) == 2
