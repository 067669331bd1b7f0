"""Cluster launch files for multi-node pretraining: a Kubernetes indexed Job with a headless Service, and a
Slurm batch script, rendered from the same options `lmforge pretrain` takes.

    lmforge pretrain --shards /shared/x/shards --tokenizer /shared/x/tokenizer --output /shared/x/pretrain \\
        --nnodes 4 --emit k8s --image REGISTRY/lmforge:0.1.0 --shared-pvc lmforge-runs > pretrain.yaml
    kubectl apply -f pretrain.yaml

    lmforge pretrain ... --nnodes 4 --emit slurm > pretrain.sbatch && sbatch pretrain.sbatch

Both start one `lmforge pretrain` per node with a static rank (`--node-rank`, `--master-addr` node 0):
- Kubernetes: an indexed Job (`completionMode: Indexed`, one pod per node, the pod's
  JOB_COMPLETION_INDEX is its node rank), and a headless Service so that pod 0 is reachable as
  `<job>-0.<job>` (the Job's pods get that hostname through `subdomain`); the runs folder is a
  ReadWriteMany volume (the shared file system pretraining checks for);
- Slurm: `#SBATCH --nodes N --ntasks-per-node 1`, `srun` runs the command once per node with
  SLURM_NODEID as the node rank and the first host of the allocation as the master.
Processes per node: `--nproc` (0: one per GPU where the node has them, else 2). The rendering is a
pure function (`render`), so tests check the kinds and fields without a cluster; submitting and
following such a job from a Prefect flow is not built yet.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from lmforge.config import options_to_argv

KINDS = ("k8s", "slurm")


@dataclass(frozen=True)
class ClusterSpec:
    nnodes: int
    nproc: int = 0
    """Processes per node (0: one per GPU, or 2 on CPU; training.accelerator)."""
    job: str = "lmforge-pretrain"
    image: str = "lmforge:0.1.0"
    shared_pvc: str = "lmforge-runs"
    """Kubernetes: a ReadWriteMany PersistentVolumeClaim holding the shards, tokenizer and output."""
    mount: str = "/shared"
    gpus_per_node: int = 0
    port: int = 29500

    def __post_init__(self) -> None:
        if self.nnodes < 2:
            raise ValueError(f"a cluster launch file is for 2 or more nodes, got --nnodes {self.nnodes}")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?", self.job):
            raise ValueError(f"job name {self.job!r}: lower-case letters, digits and '-' (a Kubernetes DNS label)")


def pretrain_argv(cfg_opts: dict[str, Any], spec: ClusterSpec, node_rank: str, master_addr: str) -> list[str]:
    """`lmforge pretrain` with the run's options and this node's place; `node_rank`/`master_addr` may be shell
    expressions the node expands (e.g. $JOB_COMPLETION_INDEX)."""
    return ["lmforge", "pretrain", *options_to_argv(cfg_opts), "--nproc", str(spec.nproc), "--nnodes",
            str(spec.nnodes), "--node-rank", node_rank, "--master-addr", master_addr, "--master-port", str(spec.port)]


def _shell(argv: list[str]) -> str:
    """Quoted for a shell, leaving "$VAR" and "$(...)" expansions to it."""
    return " ".join(a if a.startswith("$") else shlex.quote(a) for a in argv)


def render(kind: str, cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    if kind not in KINDS:
        raise ValueError(f"--emit must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "slurm":
        return _slurm(cfg_opts, spec)
    return _k8s(cfg_opts, spec)


def _k8s(cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    cmd = _shell(pretrain_argv(cfg_opts, spec, "$JOB_COMPLETION_INDEX", f"{spec.job}-0.{spec.job}"))
    gpu = (f"\n        resources:\n          limits:\n            nvidia.com/gpu: {spec.gpus_per_node}"
           if spec.gpus_per_node else "")
    return f"""# lmforge pretraining on {spec.nnodes} nodes: a headless Service for node 0's address, an indexed Job
# with one pod per node (JOB_COMPLETION_INDEX = node rank). Shards, tokenizer and output live on the
# ReadWriteMany claim {spec.shared_pvc} mounted at {spec.mount}.
apiVersion: v1
kind: Service
metadata:
  name: {spec.job}
  labels: {{app: {spec.job}}}
spec:
  clusterIP: None
  selector: {{job-name: {spec.job}}}
  ports:
  - name: rendezvous
    port: {spec.port}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {spec.job}
  labels: {{app: {spec.job}}}
spec:
  completionMode: Indexed
  completions: {spec.nnodes}
  parallelism: {spec.nnodes}
  backoffLimit: 0
  template:
    spec:
      subdomain: {spec.job}
      restartPolicy: Never
      containers:
      - name: pretrain
        image: {spec.image}
        command: ["/bin/sh", "-c"]
        args: [{_yaml_str(cmd)}]
        ports:
        - containerPort: {spec.port}
        env:
        - {{name: TORCH_EXTENSIONS_DIR, value: {spec.mount}/.torch_extensions}}
        volumeMounts:
        - {{name: runs, mountPath: {spec.mount}}}{gpu}
      volumes:
      - name: runs
        persistentVolumeClaim: {{claimName: {spec.shared_pvc}}}
"""


def _yaml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _slurm(cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    cmd = _shell(pretrain_argv(cfg_opts, spec, "$SLURM_NODEID", "$MASTER_ADDR"))
    gres = f"#SBATCH --gres=gpu:{spec.gpus_per_node}\n" if spec.gpus_per_node else ""
    quoted = "'" + cmd.replace("'", "'\\''") + "'"  # for bash -c, single-quoted: each node expands the variables
    return f"""#!/bin/bash
# lmforge pretraining on {spec.nnodes} nodes: srun starts one `lmforge pretrain` per node; node 0 is the master.
# Shards, tokenizer and output must be on a file system every node mounts.
#SBATCH --job-name={spec.job}
#SBATCH --nodes={spec.nnodes}
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
{gres}set -euo pipefail
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun --kill-on-bad-exit=1 bash -c {quoted}
"""
