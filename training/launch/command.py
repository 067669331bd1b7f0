"""`lmforge pretrain`'s launch and cluster options, and what each does with a validated PretrainConfig:
train here under torchrun (or on a hostfile's nodes), print the plan (`--dry-run`), write a cluster
launch file (`--emit`) or submit one and follow the job to its end (`--submit`).

    lmforge pretrain --shards S --tokenizer T --output O --dry-run                  # the plan as JSON
    lmforge pretrain ... --nnodes 2 --emit slurm > job.sh                          # an sbatch script
    lmforge pretrain ... --nnodes 2 --submit k8s --image lmforge:0.1.0             # applied and followed

The options are one typed object (LaunchOptions), declared with common.config like a stage's.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from common.config import add_config_args, opt
from training.launch.cluster import KINDS, ClusterSpec


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """Where and how `lmforge pretrain` runs: its launch and cluster flags, declared like every stage's options
    (common.config), beside PretrainConfig's on the same parser."""

    nproc: int = opt(0, help="processes per node (torchrun --nproc_per_node); 0: one per GPU, or 2 on CPU")
    accelerator: str = opt("auto", choices=("auto", "cpu", "cuda"), help="cuda: one process per GPU over NCCL; cpu: "
                           "gloo, the cores shared out as torch threads; auto: cuda if torch sees a GPU")
    dry_run: bool = opt(False, help="print the launch plan (accelerator, processes, threads, backend, torchrun "
                        "command, DeepSpeed config) as JSON and exit")
    gpus_per_node: int | None = opt(None, help="with --dry-run: plan for a node with this many GPUs (compute "
                                    "capability 8.0) instead of this machine; with --emit/--submit: the GPUs each "
                                    "node's job asks for, trained on with --accelerator cuda, one process per GPU "
                                    "unless --nproc (needed for cuda there: without it the job gets no GPU and "
                                    "trains on CPU)")
    nnodes: int = opt(1, help="nodes: run this same command on each of them; they meet through a c10d rendezvous "
                      "at --rdzv-endpoint and must share the file system holding --shards, --tokenizer and --output")
    rdzv_endpoint: str = opt("", help="HOST:PORT every node reaches (node 0's), with --nnodes > 1")
    rdzv_id: str = opt("", help="job id, the same on every node (empty: derived from --output)")
    node_rank: int = opt(-1, help="static multi-node launch instead of a rendezvous: this node's rank 0..nnodes-1 "
                         "(as Slurm's SLURM_NODEID or a Kubernetes indexed Job's index), with --master-addr; with "
                         "--hostfile, which host of it this node is")
    master_addr: str = opt("", help="node 0's address for --node-rank or --hostfile launches")
    master_port: int = opt(29500, help="node 0's port for those")
    emit: str | None = opt(None, choices=KINDS, help="print a cluster launch file for --nnodes N nodes instead of "
                           "running: k8s (a headless Service and an indexed Job, one pod per node), pytorchjob (a "
                           "Kubeflow PyTorchJob: one Master, N-1 Workers) or slurm (an sbatch script, srun per "
                           "node); each node runs this pretraining with a static rank (training/launch/cluster.py)")
    submit: str | None = opt(None, choices=KINDS, help="render that file, submit it (kubectl apply, or sbatch) and "
                             "follow the job until it ends: exit 0 when it succeeded, else an error with its state "
                             "and last log lines (training/launch/cluster_submit.py)")
    image: str = opt(ClusterSpec.image, help="k8s/pytorchjob: the container image (infra/docker/Dockerfile)")
    shared_pvc: str = opt(ClusterSpec.shared_pvc, help="k8s/pytorchjob: a ReadWriteMany claim mounted at --mount in every "
                          "pod, holding the shards, tokenizer and output")
    mount: str = opt(ClusterSpec.mount, help="k8s/pytorchjob: where the claim is mounted in the pods; give paths under it")
    pod_cpu: str = opt("", help="k8s/pytorchjob: CPU requested per pod, e.g. 8 or 7500m")
    pod_memory: str = opt("", help="k8s/pytorchjob: memory requested and limited per pod, e.g. 32Gi")
    cpus_per_task: int = opt(0, help="slurm: CPUs for each node's lmforge pretrain (its processes x torch threads), "
                             "as #SBATCH and srun --cpus-per-task; 0: all the node's CPUs (the job is --exclusive)")
    job_name: str = opt(ClusterSpec.job, help="with --emit/--submit: the job's name")
    nccl_env: tuple[str, ...] = opt((), repeat=True, metavar="KEY=VALUE", help="with --emit/--submit: set in each "
                                    "node's environment, repeatable: NCCL_* (NCCL_SOCKET_IFNAME=eth0, "
                                    "NCCL_IB_HCA=mlx5, NCCL_DEBUG=WARN), GLOO_SOCKET_IFNAME, "
                                    "TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_BLOCKING_WAIT or "
                                    "TORCH_DISTRIBUTED_DEBUG")
    rdma_resource: str = opt("", metavar="NAME", help="k8s/pytorchjob: an RDMA device resource each pod asks one of "
                             "(e.g. rdma/hca, nvidia.com/hostdev), with the IPC_LOCK capability, as root: the "
                             "namespace must allow the Pod Security level privileged (infra/README.md)")
    namespace: str = opt("", help="with --submit k8s/pytorchjob: the namespace (empty: kubectl's current)")
    cluster_timeout: float = opt(0.0, help="with --submit: cancel the job and fail after this many seconds (0: wait "
                                 "until it ends)")
    cluster_poll: float = opt(15.0, help="with --submit: seconds between looks at the job's state")
    hostfile: str = opt("", help="a DeepSpeed hostfile ('HOST slots=N' per node): launch with the DeepSpeed "
                        "launcher instead of torchrun, on each node with its --node-rank (no ssh needed); "
                        "processes per node come from the slots")

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> LaunchOptions:
        """The options given on a parser `add_launch_args` filled (the others at their defaults)."""
        given = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls) if getattr(ns, f.name, None) is not None}
        return cls(**{**given, **({"nccl_env": tuple(given["nccl_env"])} if "nccl_env" in given else {})})


def add_launch_args(sp: argparse.ArgumentParser) -> None:
    """LaunchOptions' flags on `sp`, which already holds PretrainConfig's (and its --config)."""
    add_config_args(sp, LaunchOptions, config_file=False)


def pretrain_command(cfg: Any, o: LaunchOptions) -> int | Path:
    """What `lmforge pretrain` does with `o`: an exit code (a file emitted, a job followed, a plan printed) or
    the output folder of a pretraining run here."""
    from training.launch.torchrun import Nodes, launch_pretrain

    if o.emit or o.submit:
        return on_cluster(cfg, o)
    job = o.rdzv_id or "lmforge-" + hashlib.sha1(os.path.abspath(cfg.output).encode()).hexdigest()[:12]
    nodes = Nodes(o.nnodes, o.rdzv_endpoint, job, o.node_rank, o.master_addr, o.master_port, o.hostfile)
    if o.dry_run:
        from training.launch.torchrun import plan_text
        from training.runtime.accelerator import Machine

        machine = None if o.gpus_per_node is None else Machine(Machine.here().cpu_count, ((8, 0),) * o.gpus_per_node)
        print(plan_text("training.pretraining.pretrain", cfg, o.nproc, nodes, o.accelerator, machine))
        return 0
    return launch_pretrain(cfg, nproc=o.nproc, nodes=nodes, accelerator=o.accelerator)


def on_cluster(cfg: Any, o: LaunchOptions) -> int:
    """`--emit KIND` prints the launch file; `--submit KIND` submits it and follows the job: 0 when it succeeded."""
    from common.config import config_to_dict
    from training.launch.cluster import env_pairs, rdma_note, render

    kind = o.emit or o.submit
    spec = ClusterSpec(nnodes=o.nnodes, nproc=o.nproc, job=o.job_name, image=o.image, shared_pvc=o.shared_pvc,
                       mount=o.mount, gpus_per_node=o.gpus_per_node or 0, cpu=o.pod_cpu, memory=o.pod_memory,
                       port=o.master_port, accelerator=o.accelerator, rdma=o.rdma_resource,
                       nccl_env=env_pairs(list(o.nccl_env)), cpus_per_task=o.cpus_per_task)
    given = config_to_dict(cfg)  # the options that differ from the defaults, so the file reads well
    base = config_to_dict(type(cfg)(shards=cfg.shards, tokenizer=cfg.tokenizer, output=cfg.output))
    opts = {k: v for k, v in given.items() if k in ("shards", "tokenizer", "output") or base[k] != v}
    text = render(kind, opts, spec)
    if spec.rdma and kind != "slurm":  # the file's header says it too
        print(f"lmforge pretrain: {rdma_note(spec)}", file=sys.stderr)
    if o.emit:
        print(text, end="")
        return 0
    from training.launch.cluster_submit import run_on_cluster

    # a cancelled flow sends SIGTERM: exit through Python so the job is cancelled too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run_on_cluster(o.submit, text, spec.job, o.namespace, cfg.output, o.cluster_timeout, o.cluster_poll)
    except (RuntimeError, TimeoutError) as e:  # JobFailed and the timeout name the job and its log tail
        print(f"lmforge pretrain: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"pretrain: {o.submit} job {spec.job} succeeded; wrote {cfg.output}")
    return 0
