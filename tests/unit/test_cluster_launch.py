"""training.launch.cluster: the Kubernetes (indexed Job, Kubeflow PyTorchJob) and Slurm launch files for multi-node
pretraining, rendered and checked without a cluster: kinds and fields, and the command each node runs parses as
`lmforge pretrain` options. Where kubectl is installed, it also reads each manifest offline (`kubectl label --local`:
no API server needed, so kinds and metadata are decoded but the spec is not checked against a schema)."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess

import pytest
import yaml

from common.config import add_config_args, config_from_args
from training.launch.cluster import ClusterSpec, job_name, render
from training.pretraining.pretrain import PretrainConfig

OPTS = {"shards": "/shared/x/shards", "tokenizer": "/shared/x/tokenizer", "output": "/shared/x/pretrain",
        "model": "bert_mini", "steps": 5000, "save_every": 500}


def _parse_node_command(cmd: str, node_rank: str, master: str) -> tuple[PretrainConfig, argparse.Namespace]:
    """The node's command with its shell variables as the node would expand them, through pretrain's parser."""
    argv = shlex.split(cmd)
    start = argv.index("pretrain")  # after `lmforge`, an installation's by absolute path, or `PYTHON -m lmforge.cli`
    assert os.path.basename(argv[0]) == "lmforge" and start == 1 or argv[1:start] == ["-m", "lmforge.cli"], argv
    env = {"$JOB_COMPLETION_INDEX": node_rank, "$SLURM_NODEID": node_rank, "$RANK": node_rank, "$MASTER_ADDR": master,
           "$MASTER_PORT": "23456"}  # the PyTorchJob operator's values
    argv = [env.get(a, a) for a in argv[start + 1:]]
    p = argparse.ArgumentParser()
    add_config_args(p, PretrainConfig)
    for flag, kind in (("--nproc", int), ("--nnodes", int), ("--node-rank", int), ("--master-addr", str),
                       ("--master-port", int), ("--accelerator", str)):
        p.add_argument(flag, type=kind)
    ns = p.parse_args(argv)
    extra = argparse.Namespace(**{k: getattr(ns, k) for k in ("nproc", "nnodes", "node_rank", "master_addr",
                                                               "master_port", "accelerator")})
    for k in vars(extra):
        delattr(ns, k)
    return config_from_args(PretrainConfig, ns), extra


def test_kubernetes_indexed_job_with_a_headless_service():
    spec = ClusterSpec(nnodes=4, nproc=8, job="mini-run", image="reg/lmforge:0.1.0", shared_pvc="runs", gpus_per_node=8)
    docs = list(yaml.safe_load_all(render("k8s", OPTS, spec)))
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    svc, job = docs
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == {"job-name": "mini-run"}
    assert svc["spec"]["ports"][0]["port"] == 29500
    js = job["spec"]
    assert (js["completionMode"], js["completions"], js["parallelism"], js["backoffLimit"]) == ("Indexed", 4, 4, 0)
    pod = js["template"]["spec"]
    assert pod["subdomain"] == "mini-run" and pod["restartPolicy"] == "Never"  # pods resolve as mini-run-<i>.mini-run
    c = pod["containers"][0]
    assert c["image"] == "reg/lmforge:0.1.0" and c["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "runs"
    assert c["volumeMounts"][0]["mountPath"] == "/shared"
    assert c["command"] == ["/bin/sh", "-c"]
    cfg, node = _parse_node_command(c["args"][0], node_rank="2", master="unused")
    assert cfg == PretrainConfig(**OPTS)
    assert (node.nnodes, node.node_rank, node.nproc, node.master_addr) == (4, 2, 8, "mini-run-0.mini-run")
    assert node.accelerator == "cuda"  # forced: `auto` would train on CPU wherever torch sees no GPU


def test_slurm_batch_script_runs_one_task_per_node():
    text = render("slurm", OPTS, ClusterSpec(nnodes=3))
    assert text.startswith("#!/bin/bash\n")
    directives = dict(line[len("#SBATCH "):].split("=", 1) for line in text.splitlines()
                      if line.startswith("#SBATCH ") and "=" in line)
    assert directives["--nodes"] == "3" and directives["--ntasks-per-node"] == "1"
    assert "--gres" not in directives  # a CPU cluster asks for no GPU
    assert 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in text
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    inner = shlex.split(srun)[-1]  # what bash -c runs on each node
    cfg, node = _parse_node_command(inner, node_rank="1", master="node17")
    assert cfg == PretrainConfig(**OPTS) and (node.nnodes, node.node_rank, node.master_addr) == (3, 1, "node17")
    # what a user would write by hand: this installation's lmforge by absolute path (a batch job's PATH is the
    # submitting shell's), its bin/ on PATH, the node's CPUs for the step, the batch output where the follower reads
    exe = shlex.split(inner)[0]
    assert os.path.isabs(exe) and os.access(exe, os.X_OK) and exe.endswith("/lmforge")
    assert f"export PATH={os.path.dirname(exe)}:\"$PATH\"" in text
    assert shlex.split(srun)[:3] == ["srun", "--kill-on-bad-exit=1", "--cpus-per-task=$SLURM_CPUS_ON_NODE"]
    assert directives["--output"] == "/shared/x/pretrain/lmforge-pretrain-%j.out" and "--cpus-per-task" not in directives
    gpu = render("slurm", OPTS, ClusterSpec(nnodes=2, gpus_per_node=4, cpus_per_task=32))
    assert "#SBATCH --gres=gpu:4\n" in gpu and "#SBATCH --cpus-per-task=32\n" in gpu
    assert "srun --kill-on-bad-exit=1 --cpus-per-task=32 bash -c" in gpu and "--accelerator cuda" in gpu


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="2 or more nodes"):
        ClusterSpec(nnodes=1)
    with pytest.raises(ValueError, match="DNS label"):
        ClusterSpec(nnodes=2, job="Big_Job")
    with pytest.raises(ValueError, match="--emit must be one of k8s, pytorchjob, slurm"):
        render("pbs", OPTS, ClusterSpec(nnodes=2))
    with pytest.raises(ValueError, match="Kubernetes quantity"):
        ClusterSpec(nnodes=2, memory="lots")
    assert job_name("lmforge-CC-MAIN_2026.40") == "lmforge-cc-main-2026-40" and len(job_name("x" * 99)) == 52


def test_kubeflow_pytorchjob_one_master_and_workers_reading_the_operators_env():
    spec = ClusterSpec(nnodes=3, nproc=4, job="pt-run", image="reg/lmforge:0.1.0", shared_pvc="runs", mount="/data",
                       gpus_per_node=4, cpu="30", memory="120Gi")
    docs = list(yaml.safe_load_all(render("pytorchjob", {**OPTS, "output": "/data/x/pretrain"}, spec)))
    assert len(docs) == 1
    job = docs[0]
    assert (job["apiVersion"], job["kind"], job["metadata"]["name"]) == ("kubeflow.org/v1", "PyTorchJob", "pt-run")
    assert job["spec"]["runPolicy"] == {"backoffLimit": 0, "cleanPodPolicy": "None"}
    roles = job["spec"]["pytorchReplicaSpecs"]
    assert set(roles) == {"Master", "Worker"}
    assert (roles["Master"]["replicas"], roles["Worker"]["replicas"]) == (1, 2)
    for role in roles.values():
        assert role["restartPolicy"] == "Never"
        pod = role["template"]["spec"]
        (c,) = pod["containers"]
        # the operator reads the rendezvous port from the container named pytorch, port named pytorchjob-port
        assert c["name"] == "pytorch" and c["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]
        assert c["image"] == "reg/lmforge:0.1.0" and c["command"] == ["/bin/sh", "-c"]
        # limits equal to the requests: the Guaranteed QoS class
        assert c["resources"] == {"requests": {"cpu": 30, "memory": "120Gi"},
                                  "limits": {"cpu": 30, "memory": "120Gi", "nvidia.com/gpu": 4}}
        assert c["volumeMounts"] == [{"name": "runs", "mountPath": "/data"}, {"name": "shm", "mountPath": "/dev/shm"},
                                     {"name": "scratch", "mountPath": "/tmp"}]
        assert pod["volumes"] == [{"name": "runs", "persistentVolumeClaim": {"claimName": "runs"}},
                                  {"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "scratch", "emptyDir": {}}]
        assert {"name": "TORCH_EXTENSIONS_DIR", "value": "/data/.torch_extensions"} in c["env"]
        cmd = c["args"][0]
        assert '--node-rank "$RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"' in cmd
        assert "WORLD_SIZE" not in cmd  # operators disagree on it (pods, or pods x nprocPerNode): nnodes is written
        cfg, node = _parse_node_command(cmd, node_rank="2", master="pt-run-master-0")
        assert cfg == PretrainConfig(**{**OPTS, "output": "/data/x/pretrain"})
        assert (node.nnodes, node.node_rank, node.nproc, node.master_addr, node.master_port) == (
            3, 2, 4, "pt-run-master-0", 23456)


@pytest.mark.parametrize("name", ["on", "y", "null"])
def test_names_yaml_would_read_as_other_types_stay_strings(name):
    for kind in ("k8s", "pytorchjob"):
        for doc in yaml.safe_load_all(render(kind, OPTS, ClusterSpec(nnodes=2, job=name))):
            assert doc["metadata"]["name"] == name


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
@pytest.mark.parametrize("kind", ["k8s", "pytorchjob"])
def test_kubectl_reads_the_manifests_offline(kind, tmp_path):
    """`kubectl label --local` decodes each object (apiVersion, kind, typed metadata) without an API server:
    `kubectl apply --dry-run=client` cannot, it asks the server for its resource types first."""
    path = tmp_path / "job.yaml"
    path.write_text(render(kind, OPTS, ClusterSpec(nnodes=3, job="y", gpus_per_node=2)))
    proc = subprocess.run(["kubectl", "label", "--local", "-f", str(path), "checked=offline", "-o", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    items, text, decoder = [], proc.stdout.strip(), json.JSONDecoder()
    while text:  # one JSON object per document, back to back
        obj, end = decoder.raw_decode(text)
        items.append(obj)
        text = text[end:].strip()
    assert [(o["apiVersion"], o["kind"]) for o in items] == (
        [("v1", "Service"), ("batch/v1", "Job")] if kind == "k8s" else [("kubeflow.org/v1", "PyTorchJob")])
    assert all(o["metadata"]["name"] == "y" and o["metadata"]["labels"]["checked"] == "offline" for o in items)


def test_lmforge_pretrain_emit_prints_the_file_for_the_runs_options(capsys):
    from lmforge.cli import main

    argv = ["pretrain", "--shards", "/shared/s", "--tokenizer", "/shared/t", "--output", "/shared/o", "--model",
            "bert_mini", "--steps", "7", "--nnodes", "2", "--emit", "k8s", "--job-name", "cli-run"]
    assert main(argv) == 0
    job = list(yaml.safe_load_all(capsys.readouterr().out))[1]
    cfg, node = _parse_node_command(job["spec"]["template"]["spec"]["containers"][0]["args"][0], "1", "unused")
    assert cfg == PretrainConfig(shards="/shared/s", tokenizer="/shared/t", output="/shared/o", model="bert_mini",
                                 steps=7)
    assert (node.nnodes, node.node_rank, node.master_addr) == (2, 1, "cli-run-0.cli-run")
    assert main([*argv[:-4], "--nnodes", "1", "--emit", "slurm"]) == 2  # one node needs no cluster file
    assert "2 or more nodes" in capsys.readouterr().err


def test_launch_options_come_from_one_declaration():
    """LaunchOptions' flags are its fields (common.config): defaults, choices and the repeatable --nccl-env."""
    from common.config import add_config_args
    from training.launch.command import LaunchOptions, add_launch_args
    from training.pretraining.config import PretrainConfig

    sp = argparse.ArgumentParser()
    add_config_args(sp, PretrainConfig)
    add_launch_args(sp)  # beside the stage's flags and its --config, without a second --config
    assert LaunchOptions.from_args(sp.parse_args([])) == LaunchOptions()
    o = LaunchOptions.from_args(sp.parse_args(["--nccl-env", "NCCL_DEBUG=WARN", "--nccl-env", "NCCL_IB_HCA=mlx5",
                                               "--emit", "slurm", "--dry-run", "--master-port", "29600"]))
    assert (o.nccl_env, o.emit, o.dry_run, o.master_port, o.nnodes) == (
        ("NCCL_DEBUG=WARN", "NCCL_IB_HCA=mlx5"), "slurm", True, 29600, 1)
    with pytest.raises(SystemExit):
        sp.parse_args(["--emit", "pbs"])  # argparse names the choices
