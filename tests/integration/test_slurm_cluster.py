"""`lmforge pretrain --submit slurm` on a real Slurm: two nodes (slurmd n1 and n2 on 127.0.0.1) that
infra/slurm/local-cluster.sh starts on this machine, without slurmdbd (accounting off, as on many small clusters).

    apt-get install -y slurm-wlm munge       # Debian's Slurm 22.05; the test needs root to start the daemons
    .venv/bin/python -m pytest -q tests/integration/test_slurm_cluster.py

`.venv/bin/lmforge` is run as a user would run it from a plain shell: its PATH does not hold the virtualenv's
bin/, and the batch job inherits that PATH, so the nodes find lmforge only through the script's absolute path.
Checked, on the tiny preset, one process per node, the job followed through `scontrol` (`sacct` has no
accounting here):
- a node's training process killed after the first checkpoint: the job ends FAILED, lmforge exits 1 with the
  job's state and log tail; the same command with --resume continues from the last checkpoint and finishes on
  both nodes (world size 2, a verified manifest);
- cancellation from a flow: Prefect (3.8) cancels a flow run by SIGTERM to the flow-run process, which its
  engine's SIGTERM bridge (`capture_sigterm`) raises as TerminationSignal inside the flow. The test runs the
  stage as a flow task does (flows/stages/runner.py `run_logged` under `capture_sigterm`) and sends that SIGTERM: the
  stage launcher hands it on to `lmforge pretrain --submit slurm`, which scancels the job, and no training
  process is left on the nodes. A Prefect server and worker are not started here.
4 to 7 minutes on 2 shared cores (245 s and 400 s measured), nearly all of it the three jobs' start-up.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from schemas.manifest import read_manifest, verify_outputs
from tests.fixtures import files_holding, make_shards, make_tokenizer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "infra" / "slurm" / "local-cluster.sh"
CONF = "/var/spool/lmforge-slurm/slurm.conf"
LMFORGE = Path(os.path.abspath(sys.executable)).parent / "lmforge"  # the venv's console script


@pytest.fixture(scope="module")
def slurm():
    """The local 2-node cluster's environment for clients: started here unless it runs; stopped if started here."""
    search = os.pathsep.join([os.environ["PATH"], "/usr/sbin", "/sbin"])  # Debian's daemons live in sbin
    missing = [b for b in ("slurmctld", "slurmd", "munged", "sbatch") if shutil.which(b, path=search) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: apt-get install -y slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd needs root (infra/slurm/local-cluster.sh)")
    env = {**os.environ, "SLURM_CONF": CONF}
    running = subprocess.run([str(SCRIPT), "status"], env=env, capture_output=True).returncode == 0
    started = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    # what a user's plain shell has: system directories, no virtualenv
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p and Path(p) != LMFORGE.parent)
    yield {**{k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}, "PATH": path, "SLURM_CONF": CONF}
    if not running:
        subprocess.run([str(SCRIPT), "stop"], env=env, check=False, timeout=60)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm-data")
    tok = make_tokenizer(d / "tokenizer")
    return make_shards(d / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16), tok


PLANTED = "planted-shell-secret-3Vb8"


def _argv(data, out: Path, job: str, *extra: str) -> list[str]:
    shards, tok = data
    return [str(LMFORGE), "pretrain", "--shards", str(shards), "--tokenizer", str(tok), "--output", str(out),
            "--model", "tiny", "--micro-batch-size", "4", "--log-every", "10", "--eval-batches", "2",
            "--no-tensorboard", "--nnodes", "2", "--nproc", "1", "--submit", "slurm", "--job-name", job,
            "--cluster-poll", "2", "--cluster-timeout", "300", *extra]


def _job_state(env: dict, job_id: str) -> str:
    """JobState from the controller (gone: the controller forgot it, which only an ended job is)."""
    proc = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True, text=True)
    fields = dict(f.split("=", 1) for f in proc.stdout.split() if "=" in f)
    return fields.get("JobState", "gone")


def _trainers(out: Path) -> list[psutil.Process]:
    """The training workers (torchrun's children) writing to `out`, on any node."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "training.pretraining.pretrain" in cmd and str(out) in cmd and "torch.distributed.run" not in cmd:
            found.append(p)
    return found


def _node_trainer(out: Path, rank: int) -> psutil.Process | None:
    """The training worker of node `rank`: a child of that node's `lmforge pretrain ... --node-rank RANK`."""
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "pretrain" in cmd and str(out) in cmd and "--node-rank" in cmd and \
                cmd[cmd.index("--node-rank") + 1] == str(rank):
            kids = [k for k in p.children(recursive=True) if "training.pretraining.pretrain" in k.cmdline()
                    and "torch.distributed.run" not in k.cmdline()]
            if kids:
                return kids[0]
    return None


def _wait(what, timeout: float, every: float = 0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = what()
        if value:
            return value
        time.sleep(every)
    return None


def test_two_nodes_train_a_killed_node_fails_the_job_and_resume_finishes_it(slurm, data, tmp_path):
    """Node 1's training process is killed after the first checkpoint (as a crashed node: no clean-up); srun
    --kill-on-bad-exit=1 ends node 0, the job ends FAILED and lmforge exits 1 with its state and log tail. The
    same command with --resume (what a rerun of the flow's pretrain task adds) trains on both nodes to the end."""
    out = tmp_path / "pretrain"
    argv = _argv(data, out, "lmforge-kill", "--steps", "120", "--save-every", "10")
    slurm = {**slurm, "AWS_SECRET_ACCESS_KEY": PLANTED}  # a credential the user's shell holds: it reaches no output
    t0 = time.monotonic()
    run = subprocess.Popen(argv, env=slurm, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: (out / "checkpoints" / "latest").exists() or run.poll() is not None, 420)
        victim = _node_trainer(out, 1)
        assert victim is not None and run.poll() is None, "node 1's training process was not found running"
        victim.kill()
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.terminate()
            run.communicate(timeout=60)
    killed = (out / "checkpoints" / "latest").read_text().strip()
    assert run.returncode == 1, stdout[-2000:] + stderr[-2000:]
    assert "running (RUNNING (on n[1-2]))" in stdout  # followed through scontrol: sacct has no accounting here
    assert "JobFailed: slurm job" in stderr and "failed: FAILED (exit" in stderr, stderr[-3000:]
    assert "--- last 40 log lines ---" in stderr and "srun: error: n2: task 1" in stderr  # the job's log tail
    assert not (out / "manifest.json").exists()
    assert _wait(lambda: not _trainers(out), 30), "a training process outlived the failed job"
    print(f"\nnode 1 killed at {killed}; the job failed {time.monotonic() - t0:.0f} s after submission")

    t1 = time.monotonic()
    again = subprocess.run([*argv, "--resume"], env=slurm, cwd=tmp_path, capture_output=True, text=True, timeout=500)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "pretrain: slurm job lmforge-kill succeeded" in again.stdout
    assert "succeeded (COMPLETED (exit 0:0))" in again.stdout
    manifest = read_manifest(out)
    verify_outputs(out)
    assert manifest["counts"]["steps"] == 120 and manifest["extra"]["world_size"] == 2  # 1 process on each node
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from_step"] >= 10 and metrics["world_size"] == 2, metrics
    logs = sorted(out.glob("lmforge-kill-*.out"))  # each job's batch output, whose tail the follower shows
    assert len(logs) == 2 and "step 120/120" in logs[-1].read_text()
    # the job script, both jobs' batch output, checkpoints, TensorBoard-free logs, manifest: no credential
    assert not files_holding(PLANTED, tmp_path, texts={"stdout": stdout + again.stdout, "stderr": stderr + again.stderr})
    print(f"resumed from step {metrics['resumed_from_step']}; finished {time.monotonic() - t1:.0f} s after resubmission")


FLOW_RUN = r"""
import json, sys
from pathlib import Path

from prefect.utilities.engine import capture_sigterm

from flows.stages.runner import run_logged

with capture_sigterm():  # what Prefect's flow engine runs a flow in: its SIGTERM becomes TerminationSignal
    run_logged(json.loads(sys.argv[1]), Path(sys.argv[2]), "pretrain")
"""


def test_a_cancelled_flow_run_cancels_its_slurm_job(slurm, data, tmp_path):
    """SIGTERM to the flow-run process, as Prefect sends it on cancellation: the stage launcher sends SIGTERM to
    `lmforge pretrain --submit slurm`, which exits 143 through follow's `finally` after scancel; the nodes'
    training processes go with the job."""
    out = tmp_path / "pretrain"
    stage_log = tmp_path / "pretrain.log"
    argv = _argv(data, out, "lmforge-term", "--steps", "100000")
    run = subprocess.Popen([sys.executable, "-c", FLOW_RUN, json.dumps(argv), str(stage_log)], env=slurm, cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def training_job() -> str:
            """The job's id once it trains. Not earlier: a worker killed while it builds DeepSpeed's CPU comm op
            leaves torch's build lock (~/.cache/torch_extensions/.../lock) behind, and every later load waits on it."""
            proc = subprocess.run(["squeue", "-h", "-n", "lmforge-term", "-o", "%i %T"], env=slurm,
                                  capture_output=True, text=True)
            job_id, _, state = proc.stdout.strip().partition(" ")
            log = out / f"lmforge-term-{job_id}.out"
            return job_id if state == "RUNNING" and log.is_file() and "step 10/" in log.read_text() else ""

        job_id = _wait(training_job, 420, every=1)
        assert job_id and _trainers(out), "the job never trained"
        run.send_signal(signal.SIGTERM)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode != 0 and "stopping: SIGTERM to the stage" in stdout, stdout[-2000:] + stderr[-2000:]
    assert _wait(lambda: _job_state(slurm, job_id) in ("CANCELLED", "gone"), 30), _job_state(slurm, job_id)
    assert _wait(lambda: not _trainers(out), 60), "training went on after the job was cancelled"
