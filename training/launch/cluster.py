"""Cluster launch files for multi-node pretraining: a Kubernetes indexed Job with a headless Service, a Kubeflow
PyTorchJob, and a Slurm batch script, rendered from the same options `lmforge pretrain` takes.

    lmforge pretrain --shards /shared/x/shards --tokenizer /shared/x/tokenizer --output /shared/x/pretrain \\
        --nnodes 4 --emit k8s --image REGISTRY/lmforge:0.1.0 --shared-pvc lmforge-runs > pretrain.yaml
    kubectl apply -f pretrain.yaml

    lmforge pretrain ... --nnodes 4 --emit pytorchjob > pretrain.yaml && kubectl apply -f pretrain.yaml
    lmforge pretrain ... --nnodes 4 --emit slurm > pretrain.sbatch && sbatch pretrain.sbatch
    lmforge pretrain ... --nnodes 4 --submit k8s      # render, submit and follow to the end (training/launch/cluster_submit.py)

Each starts one `lmforge pretrain` per node with a static rank (`--node-rank`, `--master-addr` node 0):
- k8s: an indexed Job (`completionMode: Indexed`, one pod per node, the pod's JOB_COMPLETION_INDEX is its node
  rank), and a headless Service so that pod 0 is reachable as `<job>-0.<job>` (the Job's pods get that hostname
  through `subdomain`; `publishNotReadyAddresses` publishes it before pod 0 is ready); needs nothing but
  Kubernetes >= 1.24. The other pods wait for pod 0 in torchrun's static rendezvous, a TCPStore whose timeout is
  torchrun's `--rdzv-conf timeout=SECONDS` (900 by default; `join_timeout` is read by the c10d backend only);
- pytorchjob: Kubeflow Training Operator's PyTorchJob (kubeflow.org/v1), one Master and nnodes-1 Workers. The
  operator sets MASTER_ADDR (the Master's Service), MASTER_PORT (the container port named `pytorchjob-port`) and
  RANK (the pod's rank: Master 0, Worker i is i+1) in every pod, and the command reads them. It does not read
  WORLD_SIZE: operators before v1.8 set it to the number of pods, later ones to pods x nprocPerNode, so the node
  count is written into the command instead;
- slurm: `#SBATCH --nodes N --ntasks-per-node 1`, `srun` runs the command once per node with SLURM_NODEID as the
  node rank and the first host of the allocation as the master.
In both Kubernetes kinds the runs folder is a ReadWriteMany claim mounted at `mount` (the shared file system
pretraining checks for), /dev/shm is a memory volume (a container's default 64 MB is too small for NCCL and
DataLoader workers), and pods are not restarted (a failed node fails the job; rerunning resumes from the last
checkpoint). Each node's command forces its accelerator: cuda with the GPUs `--gpus-per-node` asks the scheduler
for (one process per GPU unless `--nproc`), else cpu: a GPU job cannot fall back to CPU unnoticed.
`--nccl-env` variables go into each node's environment and `--rdma-resource` asks for an RDMA device. Rendering is a
pure function (`render`), so tests check the kinds and fields, and the Kubernetes schemas, without a cluster.

Pods meet the Pod Security Standards' `restricted` profile (`_security`): the images' non-root user (POD_UID), no
privilege escalation, every capability dropped, the runtime's seccomp profile, a read-only root file system with an
emptyDir at /tmp for what a run writes outside the claim, no service account token. Not with `--rdma-resource`:
IPC_LOCK is outside both `restricted` and `baseline`, so those pods need a namespace at the `privileged` level
(`rdma_note`). Checks a scanner (checkov) would raise and that do not apply are skipped by annotation, each with
its reason (`_skips`; tests/unit/test_security_scan.py runs checkov on every kind).
"""
from __future__ import annotations

import os
import re
import shlex
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import options_to_argv
from training.runtime.accelerator import ACCELERATORS

KINDS = ("k8s", "pytorchjob", "slurm")
DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?"  # 52 at most: pod names add "-worker-NNN" within 63
QUANTITY = r"\d+(\.\d+)?([EPTGMk]i?|m|Ki)?"  # Kubernetes resource quantities: 4, 500m, 16Gi, 64G
IMAGE = r"([A-Za-z0-9.-]+(:[0-9]+)?/)?[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?"
"""An image reference: [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST], nothing a YAML or shell line could break on."""
RESOURCE = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"  # domain/name: rdma/hca
# variables besides NCCL_* that tune the collectives: gloo's interface, PyTorch's NCCL watchdog and debug output
ENV_ALLOWED = ("GLOO_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT",
               "TORCH_DISTRIBUTED_DEBUG")


@dataclass(frozen=True)
class ClusterSpec:
    nnodes: int
    nproc: int = 0
    """Processes per node (0: one per GPU, or 2 on CPU; training.runtime.accelerator)."""
    job: str = "lmforge-pretrain"
    """The job's name (a DNS label); Kubernetes names the pods and the Service after it."""
    image: str = "lmforge:0.1.0"
    """Kubernetes: the container image (infra/docker/Dockerfile), with `lmforge` on its PATH."""
    shared_pvc: str = "lmforge-runs"
    """Kubernetes: a ReadWriteMany PersistentVolumeClaim holding the shards, tokenizer and output."""
    mount: str = "/shared"
    """Kubernetes: where the claim is mounted in each pod; the run's paths must be under it."""
    gpus_per_node: int = 0
    """GPUs each node asks the scheduler for (nvidia.com/gpu, --gres=gpu:N); >0 means cuda."""
    accelerator: str = "auto"
    """auto, cpu or cuda; each node's command forces the resolved one (`device`): cuda needs gpus_per_node."""
    rdma: str = ""
    """Kubernetes: an RDMA device resource (e.g. rdma/hca, nvidia.com/hostdev) each pod asks one of, with IPC_LOCK
    so NCCL can pin memory for it; empty: none (NCCL falls back to TCP sockets)."""
    nccl_env: tuple[tuple[str, str], ...] = ()
    """(NAME, value) set in each node's environment: NCCL_* (e.g. NCCL_SOCKET_IFNAME, NCCL_IB_HCA) or one of
    ENV_ALLOWED; the Kubernetes kinds write them into the container's env, the Slurm script exports them."""
    cpu: str = ""
    """Kubernetes: CPU requested per pod (e.g. "8", "7500m"); empty: none requested."""
    memory: str = ""
    """Kubernetes: memory requested and limited per pod (e.g. "32Gi"); empty: none."""
    port: int = 29500
    cpus_per_task: int = 0
    """Slurm: CPUs for each node's `lmforge pretrain` (its processes x torch threads); 0: all the node's CPUs
    (the job is --exclusive; srun gets $SLURM_CPUS_ON_NODE, so nodes are assumed alike)."""

    def __post_init__(self) -> None:
        if self.nnodes < 2:
            raise ValueError(f"a cluster launch file is for 2 or more nodes, got --nnodes {self.nnodes}")
        if not re.fullmatch(DNS_LABEL, self.job):
            raise ValueError(f"job name {self.job!r}: lower-case letters, digits and '-' (a Kubernetes DNS label)")
        if self.cpus_per_task < 0:
            raise ValueError(f"--cpus-per-task must be >= 0 (0: all the node's CPUs), got {self.cpus_per_task}")
        if not re.fullmatch(IMAGE, self.image):
            raise ValueError(f"image {self.image[:80]!r}: an image reference such as REGISTRY/lmforge:0.1.0 or "
                             "REGISTRY/lmforge@sha256:DIGEST")
        if not self.mount.startswith("/"):
            raise ValueError(f"mount {self.mount!r}: an absolute path")
        for name in ("cpu", "memory"):
            value = getattr(self, name)
            if value and not re.fullmatch(QUANTITY, value):
                raise ValueError(f"{name} {value!r}: a Kubernetes quantity such as 8, 7500m, 32Gi")
        if self.accelerator not in ACCELERATORS:
            raise ValueError(f"accelerator must be one of {', '.join(ACCELERATORS)}, got {self.accelerator!r}")
        if self.gpus_per_node < 0 or self.nproc < 0:
            raise ValueError(f"--gpus-per-node and --nproc must be >= 0, got {self.gpus_per_node}, {self.nproc}")
        # without GPUs in the request the scheduler gives the pod or task none, and `auto` would quietly train on CPU
        if self.accelerator == "cuda" and not self.gpus_per_node:
            raise ValueError("--accelerator cuda on a cluster needs --gpus-per-node N (the GPUs each node asks for)")
        if self.accelerator == "cpu" and self.gpus_per_node:
            raise ValueError(f"--gpus-per-node {self.gpus_per_node} with --accelerator cpu: the GPUs would sit idle")
        if self.gpus_per_node and self.nproc > self.gpus_per_node:
            raise ValueError(f"--nproc {self.nproc} on nodes with {self.gpus_per_node} GPU(s): one process per GPU")
        if self.rdma and not re.fullmatch(RESOURCE, self.rdma):
            raise ValueError(f"RDMA resource {self.rdma!r}: an extended resource name such as rdma/hca")
        names = [k for k, _ in self.nccl_env]
        for name in names:
            if not (re.fullmatch(r"NCCL_[A-Z0-9_]+", name) or name in ENV_ALLOWED):
                raise ValueError(f"--nccl-env {name}: NCCL_* or one of {', '.join(ENV_ALLOWED)}")
        if len(set(names)) < len(names):
            raise ValueError(f"--nccl-env names a variable twice: {', '.join(names)}")
        if any(c in v for _, v in self.nccl_env for c in "\n\r\0"):
            raise ValueError("--nccl-env values are one line")

    @property
    def device(self) -> str:
        """The accelerator each node runs on: cuda when GPUs are asked for, else cpu. Never auto: a pod that asked
        for no GPU may still see the node's (CUDA images set NVIDIA_VISIBLE_DEVICES=all) and must not take them."""
        return "cuda" if self.gpus_per_node else "cpu"

    @property
    def procs(self) -> int:
        """Processes per node: nproc, else one per GPU (0 on CPU: the node's default, 2)."""
        return self.nproc or self.gpus_per_node


def env_pairs(items: list[str]) -> tuple[tuple[str, str], ...]:
    """`--nccl-env KEY=VALUE` options as ClusterSpec.nccl_env."""
    bad = [item for item in items if "=" not in item or item.startswith("=")]
    if bad:
        raise ValueError(f"--nccl-env {bad[0]!r}: KEY=VALUE, e.g. NCCL_SOCKET_IFNAME=eth0")
    return tuple(tuple(item.split("=", 1)) for item in items)  # type: ignore[misc]


def job_name(text: str) -> str:
    """A DNS label made from `text` (a run name): lower case, other characters as '-', 52 characters at most."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:52].strip("-")
    return name or "lmforge-pretrain"


class NodeVar(str):
    """A variable the node's shell expands into the command (`NodeVar("SLURM_NODEID")` is written "$SLURM_NODEID"):
    the launcher's own placeholders. Every other argument is quoted, whatever it holds: a path such as `$(touch x)`
    from a run's form stays that path."""

    def __new__(cls, name: str) -> NodeVar:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            raise ValueError(f"{name!r}: a shell variable name")
        return super().__new__(cls, name)


CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def refuse_control(name: str, value: str) -> None:
    """A value that goes into a launch file or a manifest is one line of printable characters: a newline in a path
    would end an `#SBATCH` line and start a command."""
    m = CONTROL.search(value)
    if m:
        raise ValueError(f"{name} {value[:60]!r}: holds a control character ({m.group()!r} at {m.start()})")


def pretrain_argv(cfg_opts: dict[str, Any], spec: ClusterSpec, node_rank: str, master_addr: str,
                  master_port: str = "") -> list[str]:
    """`lmforge pretrain` with the run's options and this node's place; `node_rank`, `master_addr` and `master_port`
    are values or NodeVar placeholders the node expands (e.g. NodeVar("JOB_COMPLETION_INDEX")). A run option holding
    a control character is refused."""
    argv = options_to_argv(cfg_opts)
    for i, a in enumerate(argv):
        refuse_control(argv[i - 1] if i and not a.startswith("--") else "option", a)
    return ["lmforge", "pretrain", *argv, "--accelerator", spec.device, "--nproc",
            str(spec.procs), "--nnodes", str(spec.nnodes), "--node-rank", node_rank, "--master-addr", master_addr,
            "--master-port", master_port or str(spec.port)]


def _shell(argv: list[str]) -> str:
    """A command line for `sh -c`: each argument quoted, NodeVar placeholders as "$NAME" (expanded by the node)."""
    return " ".join(f'"${a}"' if isinstance(a, NodeVar) else shlex.quote(a) for a in argv)


def render(kind: str, cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    if kind not in KINDS:
        raise ValueError(f"--emit must be one of {', '.join(KINDS)}, got {kind!r}")
    return {"k8s": _k8s, "pytorchjob": _pytorchjob, "slurm": _slurm}[kind](cfg_opts, spec)


def _q(s: str) -> str:
    """A double-quoted YAML string: names such as `on` or `y` stay strings, commands keep their quotes."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


POD_UID = 10001
"""The user and group the pods run as: the `lmforge` user of infra/docker/Dockerfile and Dockerfile.cuda (a test
checks both say so). Above 10000, so it is no user of the node's (checkov CKV_K8S_40)."""
SCRATCH = "/tmp"
"""The emptyDir for what a run writes outside the claim (HOME's caches, torchrun's and torch's temporary files),
as the root file system is read-only."""


def rdma_note(spec: ClusterSpec) -> str:
    """What `--rdma-resource` costs in Pod Security, for the manifest's header and a line on stderr; empty without."""
    if not spec.rdma:
        return ""
    return (f"--rdma-resource {spec.rdma}: pods run as root with IPC_LOCK, which the Pod Security levels restricted "
            "and baseline refuse: apply this in a namespace at the privileged level (infra/README.md)")


def _security(spec: ClusterSpec) -> tuple[str, str]:
    """(pod-level, container-level) securityContext and settings, as YAML lines.

    `restricted` (kubernetes.io/docs/concepts/security/pod-security-standards) wants runAsNonRoot, no privilege
    escalation, `drop: [ALL]` and a RuntimeDefault or Localhost seccomp profile. RDMA adds IPC_LOCK, so that NCCL
    can lock (register) its buffers with the device beyond the default locked-memory limit, and runs as root: a
    capability added to a non-root container is not effective (runtimes set no ambient capabilities,
    kubernetes/kubernetes#56374), and Kubernetes has no ulimit field. Group and fsGroup stay POD_UID, so what
    root writes on the claim stays the group's."""
    user = "runAsUser: 0, runAsNonRoot: false" if spec.rdma else f"runAsNonRoot: true, runAsUser: {POD_UID}"
    pod = (f"securityContext: {{{user}, runAsGroup: {POD_UID}, fsGroup: {POD_UID}, "
           "seccompProfile: {type: RuntimeDefault}}\n"
           # the job never calls the API server
           "automountServiceAccountToken: false\n")
    add = ", add: [IPC_LOCK]" if spec.rdma else ""
    # a read-only root: a run writes the claim, /dev/shm and the scratch emptyDir (HOME=/tmp: ~/.cache, Triton's
    # and torch's caches; tempfile); two nodes of this Job trained as UID 10001 under bubblewrap with / read-only
    container = ("\n  securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, "
                 f"capabilities: {{drop: [ALL]{add}}}}}")
    return pod, container


def _skips(spec: ClusterSpec, kind: str) -> str:
    """checkov's skip annotations (`checkov.io/skipN: CHECK=reason`) for the checks that do not apply here, as
    metadata lines; the Service gets only the namespace's. A reason holds no '=' (checkov splits there)."""
    skips = [("CKV_K8S_21", "the namespace is kubectl's (its context or --namespace); a fixed one would override it")]
    if kind != "Service":
        if "@sha256:" not in spec.image:
            skips.append(("CKV_K8S_43", "the image is --image as given; pass REGISTRY/lmforge@sha256:DIGEST to pin it"))
        no_cpu, no_memory = "no --pod-cpu given: the pod uses the node's free CPUs", "no --pod-memory given"
        if not spec.cpu:  # CPU request, limit
            skips += [("CKV_K8S_10", no_cpu), ("CKV_K8S_11", no_cpu)]
        if not spec.memory:  # memory request, limit
            skips += [("CKV_K8S_12", no_memory + ": the pod uses the node's free memory"),
                      ("CKV_K8S_13", no_memory + ": the pod uses the node's free memory")]
        if spec.rdma:
            root = "--rdma-resource: IPC_LOCK takes effect for root only (no ambient capabilities for other users)"
            skips += [("CKV_K8S_23", root), ("CKV_K8S_40", root),
                      ("CKV_K8S_25", "--rdma-resource: NCCL locks its buffers for the RDMA device (IPC_LOCK)")]
    lines = "".join(f"    checkov.io/skip{i}: {_q(f'{c}={r}')}\n" for i, (c, r) in enumerate(skips, 1))
    return f"  annotations:  # checkov's checks that do not apply here, and why\n{lines}"


def _pod(spec: ClusterSpec, container: str, cmd: str, port_name: str, indent: int) -> str:
    """A pod spec's security settings, containers and volumes (one container running `cmd`), indented to sit under
    `spec:`."""
    requests = {k: v for k, v in (("cpu", spec.cpu), ("memory", spec.memory)) if v}
    # limits equal to the requests: the Guaranteed QoS class, whose pods the kubelet's static CPU manager gives
    # whole cores of their own (and the topology manager aligns with the GPUs)
    limits = {**({"cpu": spec.cpu} if spec.cpu else {}), **({"memory": spec.memory} if spec.memory else {}),
              **({"nvidia.com/gpu": str(spec.gpus_per_node)} if spec.gpus_per_node else {}),
              **({spec.rdma: "1"} if spec.rdma else {})}  # extended resources: the request follows the limit
    # quantities are checked in ClusterSpec, so they go unquoted (8 stays a number, 32Gi a string)
    parts = [f"    {part}:\n" + "".join(f"      {k}: {v}\n" for k, v in d.items())
             for part, d in (("requests", requests), ("limits", limits)) if d]
    resources = ("\n  resources:\n" + "".join(parts)).rstrip("\n") if parts else ""
    pod_security, security = _security(spec)
    env = "".join(f"\n  - {{name: {k}, value: {_q(v)}}}" for k, v in spec.nccl_env)
    # imagePullPolicy Always: every node asks the registry, so no node runs an older copy of a re-pushed tag
    text = f"""{pod_security}containers:
- name: {container}
  image: {_q(spec.image)}
  imagePullPolicy: Always
  command: ["/bin/sh", "-c"]
  args: [{_q(cmd)}]
  ports:
  - {{name: {port_name}, containerPort: {spec.port}}}
  env:
  - {{name: TORCH_EXTENSIONS_DIR, value: {_q(spec.mount.rstrip("/") + "/.torch_extensions")}}}
  - {{name: HOME, value: {SCRATCH}}}{env}
  volumeMounts:
  - {{name: runs, mountPath: {_q(spec.mount)}}}
  - {{name: shm, mountPath: /dev/shm}}
  - {{name: scratch, mountPath: {SCRATCH}}}{resources}{security}
volumes:
- name: runs
  persistentVolumeClaim: {{claimName: {_q(spec.shared_pvc)}}}
- name: shm
  emptyDir: {{medium: Memory}}
- name: scratch
  emptyDir: {{}}
"""
    return textwrap.indent(text, " " * indent)


def _header_note(spec: ClusterSpec) -> str:
    note = rdma_note(spec)
    return "".join(f"# {line}\n" for line in textwrap.wrap(note, 112)) if note else ""


def _k8s(cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    cmd = _shell(pretrain_argv(cfg_opts, spec, NodeVar("JOB_COMPLETION_INDEX"), f"{spec.job}-0.{spec.job}"))
    return f"""# lmforge pretraining on {spec.nnodes} nodes: a headless Service for node 0's address, an indexed Job
# with one pod per node (JOB_COMPLETION_INDEX = node rank). Shards, tokenizer and output live on the
# ReadWriteMany claim {spec.shared_pvc} mounted at {spec.mount}.
{_header_note(spec)}apiVersion: v1
kind: Service
metadata:
  name: {_q(spec.job)}
  labels: {{app: {_q(spec.job)}}}
{_skips(spec, "Service")}spec:
  clusterIP: None
  # pod 0's name resolves as soon as it has an address: while its image is still pulling, the other pods would
  # otherwise find no DNS record for <job>-0.<job> and their static rendezvous could run out of time
  publishNotReadyAddresses: true
  selector: {{job-name: {_q(spec.job)}}}
  ports:
  - name: rendezvous
    port: {spec.port}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {_q(spec.job)}
  labels: {{app: {_q(spec.job)}}}
{_skips(spec, "Job")}spec:
  completionMode: Indexed
  completions: {spec.nnodes}
  parallelism: {spec.nnodes}
  backoffLimit: 0
  template:
    spec:
      subdomain: {_q(spec.job)}
      restartPolicy: Never
{_pod(spec, "pretrain", cmd, "rendezvous", 6)}"""


def _pytorchjob(cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    cmd = _shell(pretrain_argv(cfg_opts, spec, NodeVar("RANK"), NodeVar("MASTER_ADDR"), NodeVar("MASTER_PORT")))
    # the operator finds the rendezvous port by these names: container `pytorch`, port `pytorchjob-port`
    pod = _pod(spec, "pytorch", cmd, "pytorchjob-port", 10)
    replicas = "".join(f"""    {role}:
      replicas: {n}
      restartPolicy: Never
      template:
        spec:
{pod}""" for role, n in (("Master", 1), ("Worker", spec.nnodes - 1)))
    return f"""# lmforge pretraining on {spec.nnodes} nodes as a Kubeflow PyTorchJob: one Master (node 0) and
# {spec.nnodes - 1} Worker(s); the operator sets MASTER_ADDR, MASTER_PORT and RANK (the node rank) in each pod.
# Shards, tokenizer and output live on the ReadWriteMany claim {spec.shared_pvc} mounted at {spec.mount}.
{_header_note(spec)}apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {_q(spec.job)}
  labels: {{app: {_q(spec.job)}}}
{_skips(spec, "PyTorchJob")}spec:
  runPolicy:
    backoffLimit: 0
    cleanPodPolicy: None
  pytorchReplicaSpecs:
{replicas}"""


def _interpreter() -> list[str]:
    """This installation's `lmforge`, by absolute path: a batch job's PATH is the submitting shell's, which need not
    hold the virtualenv's bin/ (`.venv/bin/lmforge pretrain --submit slurm` from a plain shell). The console script
    pyproject.toml installs next to this Python; else the same entry point through the interpreter. Not resolved:
    a venv's python is a link to the base interpreter, whose directory has no lmforge."""
    here = Path(os.path.abspath(sys.executable))
    script = here.parent / "lmforge"
    return [str(script)] if os.access(script, os.X_OK) else [str(here), "-m", "lmforge.cli"]


PLAIN = r"[^\s'\"]+"  # an #SBATCH value sbatch reads as it is; others are quoted (sbatch strips the quotes)


def _slurm(cfg_opts: dict[str, Any], spec: ClusterSpec) -> str:
    argv = pretrain_argv(cfg_opts, spec, NodeVar("SLURM_NODEID"), NodeVar("MASTER_ADDR"))
    exe = _interpreter()
    cmd = _shell([*exe, *argv[1:]] if argv[0] == "lmforge" else argv)
    quoted = "'" + cmd.replace("'", "'\\''") + "'"  # for bash -c, single-quoted: each node expands the variables
    directives = [f"--job-name={spec.job}", f"--nodes={spec.nnodes}", "--ntasks-per-node=1", "--exclusive"]
    if spec.cpus_per_task:
        directives.append(f"--cpus-per-task={spec.cpus_per_task}")
    if spec.gpus_per_node:
        directives.append(f"--gres=gpu:{spec.gpus_per_node}")
    if cfg_opts.get("output"):  # the follower shows this file's tail; the folder must exist before the job starts
        directives.append(f"--output={Path(str(cfg_opts['output'])) / spec.job}-%j.out")
    # srun does not inherit --cpus-per-task from sbatch since Slurm 22.05 (sbatch(1)), so it is given again;
    # without it the step gets one CPU per task wherever task/affinity or task/cgroup confine steps
    cpus = str(spec.cpus_per_task) if spec.cpus_per_task else '"$SLURM_CPUS_ON_NODE"'
    sbatch = "".join(f"#SBATCH {d if re.fullmatch(PLAIN, d) else shlex.quote(d)}\n" for d in directives)
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.nccl_env)  # srun passes them to the nodes
    return f"""#!/bin/bash
# lmforge pretraining on {spec.nnodes} nodes: srun starts one `lmforge pretrain` per node; node 0 is the master.
# Shards, tokenizer and output must be on a file system every node mounts, and so must this lmforge:
# {exe[0]}
{sbatch}set -euo pipefail
export PATH={shlex.quote(str(Path(exe[0]).parent))}:"$PATH"  # its bin/ too, for the tools it runs (ninja)
{exports}export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun --kill-on-bad-exit=1 --cpus-per-task={cpus} bash -c {quoted}
"""
