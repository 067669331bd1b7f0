"""The images and the cluster manifests, scanned by checkov (a maintained scanner; `make scan-setup` installs the
version the Makefile pins into .venv-scan: its own pins would downgrade packages lmforge's .venv has).

One checkov run (its start takes seconds) over a folder of: both Dockerfiles; every Kubernetes manifest
`lmforge pretrain --emit` writes (k8s: Service and indexed Job; pytorchjob) for CPU, CPU with requests, GPU, RDMA and
a digest-pinned image; and a control Job with no hardening at all, which must fail, so a scan that silently checks
nothing cannot pass. No other check may fail. A skipped check is one a file suppresses inline (`# checkov:skip=` in
a Dockerfile, `checkov.io/skipN` annotations in a manifest) with its reason, and only from the list below.

checkov runs no policy on the PyTorchJob custom resource (it counts it and checks nothing), so each replica's pod
template is scanned as a Job carrying the PyTorchJob's metadata and so its annotations. The Slurm kind is a batch
script, not a Kubernetes manifest: there is nothing of this kind to scan in it (its nodes run the installation
that rendered it, tests/unit/test_cluster_launch.py)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.test_cluster_manifests import OPTS, SPECS
from training.launch.cluster import ClusterSpec, render

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / ".venv-scan" / "bin" / "checkov"
PIN = re.search(r"^CHECKOV\s*:=\s*checkov==(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
SCANNED = {**SPECS, "digest": ClusterSpec(nnodes=2, gpus_per_node=8, cpu="96", memory="1Ti",
                                          image="reg/lmforge@sha256:" + "0" * 64)}
RDMA = {name for name, spec in SCANNED.items() if spec.rdma}
# every check a file may skip; the reasons are in the files (training/launch/cluster.py `_skips`, the Dockerfiles' heads)
SKIPPABLE = {
    "CKV_DOCKER_2",  # HEALTHCHECK: batch processes; Kubernetes ignores it
    "CKV_DOCKER_7",  # version tag of FROM: an ARG, which checkov does not expand
    "CKV_K8S_21",  # default namespace: kubectl's context or --namespace decides
    "CKV_K8S_43",  # image digest: the image is --image as given
    "CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_12", "CKV_K8S_13",  # requests and limits, when --pod-cpu/--pod-memory are not given
    "CKV_K8S_23", "CKV_K8S_25", "CKV_K8S_40",  # root with IPC_LOCK: --rdma-resource only
}
ROOT_ONLY = {"CKV_K8S_23", "CKV_K8S_25", "CKV_K8S_40"}
CONTROL = """apiVersion: batch/v1
kind: Job
metadata: {name: control}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: "busybox:1.36", command: ["true"]}
"""


@pytest.fixture(scope="module")
def checkov() -> Path:
    if not CHECKOV.exists():  # `make test` has installed it; a bare `pytest` installs it here once (about a minute)
        proc = subprocess.run(["make", "-C", str(ROOT), "scan-setup"], capture_output=True, text=True, timeout=600)
        if proc.returncode:
            pytest.skip(f"checkov could not be installed (make scan-setup):\n{proc.stderr[-2000:]}")
    return CHECKOV


def _pod_templates_as_jobs(doc: dict) -> list[dict]:
    return [{"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {**doc["metadata"], "name": f"{doc['metadata']['name']}-{role.lower()}"},
             "spec": {"template": replica["template"]}} for role, replica in doc["spec"]["pytorchReplicaSpecs"].items()]


def _scan_folder(folder: Path) -> int:
    """Writes what is scanned into `folder`; returns the number of Kubernetes resources among it."""
    for name in ("Dockerfile", "Dockerfile.cuda"):
        shutil.copy(ROOT / "infra" / "docker" / name, folder / name)
    resources = 0
    for name, spec in SCANNED.items():
        (folder / f"k8s-{name}.yaml").write_text(text := render("k8s", OPTS, spec))
        resources += len(list(yaml.safe_load_all(text)))
        (doc,) = yaml.safe_load_all(render("pytorchjob", OPTS, spec))
        jobs = _pod_templates_as_jobs(doc)
        (folder / f"pytorchjob-{name}.yaml").write_text(yaml.safe_dump_all(jobs, sort_keys=False))
        resources += len(jobs)
    (folder / "control").mkdir()
    (folder / "control" / "job.yaml").write_text(CONTROL)
    return resources + 1


def test_checkov_finds_nothing_in_the_images_and_manifests_but_the_skips_explained(checkov, tmp_path):
    resources = _scan_folder(tmp_path)
    # --skip-download: no call to the vendor's API (no network here; guidelines and severities are not needed)
    proc = subprocess.run([str(checkov), "-d", str(tmp_path), "--framework", "kubernetes", "dockerfile", "-o", "json",
                           "--skip-download"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    reports = {r["check_type"]: r for r in json.loads(proc.stdout)}
    assert set(reports) == {"kubernetes", "dockerfile"}, proc.stderr[-2000:]
    for r in reports.values():
        assert r["summary"]["checkov_version"] == PIN and r["summary"]["parsing_errors"] == 0, r["summary"]
        assert r["summary"]["passed"] > 0
    assert reports["dockerfile"]["summary"]["resource_count"] == 2
    assert reports["kubernetes"]["summary"]["resource_count"] == resources

    failed = [c for r in reports.values() for c in r["results"]["failed_checks"]]
    # the control Job fails what the hardening fixes (runAsNonRoot, privilege escalation, seccomp, capabilities)
    control = {c["check_id"] for c in failed if c["file_path"].startswith("/control/")}
    assert {"CKV_K8S_20", "CKV_K8S_23", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_37"} <= control, control
    ours = [f"{c['check_id']} {c['check_name']} ({c['file_path']}: {c['resource']})" for c in failed
            if not c["file_path"].startswith("/control/")]
    assert not ours, "\n".join(ours)

    skipped = [c for r in reports.values() for c in r["results"]["skipped_checks"]]
    assert {c["check_id"] for c in skipped} <= SKIPPABLE, {c["check_id"] for c in skipped} - SKIPPABLE
    for c in skipped:
        reason = c["check_result"]["suppress_comment"]
        assert len(reason) > 30 and reason != "No comment provided", (c["check_id"], c["file_path"], reason)
        # root and IPC_LOCK only with --rdma-resource: the other pods meet Pod Security's `restricted` level
        if c["check_id"] in ROOT_ONLY:
            assert Path(c["file_path"]).stem.split("-", 1)[1] in RDMA, (c["check_id"], c["file_path"])
    skipped_in = {Path(c["file_path"]).name for c in skipped}
    assert {"Dockerfile", "Dockerfile.cuda", "k8s-rdma.yaml", "pytorchjob-rdma.yaml"} <= skipped_in
