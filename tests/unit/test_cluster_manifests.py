"""training.launch.cluster's Kubernetes manifests checked against the Kubernetes API's own schemas, offline
(kubernetes-validate ships the OpenAPI schemas of each release as JSON Schema; strict: an unknown field fails), and
the GPU rules of `lmforge pretrain --emit/--submit`: GPUs asked for are GPUs trained on (`--accelerator cuda`), and
cuda without `--gpus-per-node` is refused. PyTorchJob is a CRD the core schemas lack: its pod templates are checked
as core PodTemplates, and its own fields by hand."""
from __future__ import annotations

import dataclasses
import re
import shlex

import kubernetes_validate
import pytest
import yaml

from training.launch.cluster import DNS_LABEL, POD_UID, ClusterSpec, env_pairs, render
from training.pretraining.pretrain import PretrainConfig

OPTS = {"shards": "/shared/x/shards", "tokenizer": "/shared/x/tokenizer", "output": "/shared/x/pretrain"}
# the oldest schema kubernetes-validate ships (the indexed Job needs >= 1.24) and the newest
VERSIONS = ("1.25", "1.37")
SPECS = {
    "cpu": ClusterSpec(nnodes=2),
    "cpu-requests": ClusterSpec(nnodes=3, nproc=4, cpu="7500m", memory="32Gi", accelerator="cpu"),
    "gpus": ClusterSpec(nnodes=4, gpus_per_node=8, cpu="96", memory="1Ti"),
    "rdma": ClusterSpec(nnodes=2, gpus_per_node=8, rdma="rdma/hca"),
    "nccl-env": ClusterSpec(nnodes=2, gpus_per_node=2, rdma="nvidia.com/hostdev", nccl_env=(
        ("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_HCA", "mlx5_0,mlx5_1"), ("NCCL_DEBUG", "WARN"),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"))),
}
REPLICA_KEYS = {"replicas", "restartPolicy", "template"}
RUN_POLICY_KEYS = {"backoffLimit", "cleanPodPolicy", "activeDeadlineSeconds", "ttlSecondsAfterFinished",
                   "schedulingPolicy", "suspend", "managedBy"}  # kubeflow.org/v1 RunPolicy


def _containers(doc: dict) -> list[dict]:
    if doc["kind"] == "Job":
        return doc["spec"]["template"]["spec"]["containers"]
    return [c for r in doc["spec"].get("pytorchReplicaSpecs", {}).values() for c in r["template"]["spec"]["containers"]]


def _validate(doc: dict, version: str) -> None:
    """Raises kubernetes_validate.ValidationError naming the field that the API server would refuse."""
    if doc["kind"] != "PyTorchJob":
        kubernetes_validate.validate(doc, version, strict=True)
        return
    assert (doc["apiVersion"], set(doc)) == ("kubeflow.org/v1", {"apiVersion", "kind", "metadata", "spec"})
    assert re.fullmatch(DNS_LABEL, doc["metadata"]["name"])
    assert set(doc["spec"]) == {"runPolicy", "pytorchReplicaSpecs"} and set(doc["spec"]["runPolicy"]) <= RUN_POLICY_KEYS
    assert doc["spec"]["runPolicy"]["cleanPodPolicy"] in ("All", "Running", "None")
    for role, replica in doc["spec"]["pytorchReplicaSpecs"].items():
        assert role in ("Master", "Worker") and set(replica) == REPLICA_KEYS, replica.keys()
        assert isinstance(replica["replicas"], int) and replica["restartPolicy"] in ("Always", "OnFailure", "Never",
                                                                                     "ExitCode")
        # a core PodTemplate wraps the same PodTemplateSpec the operator copies into each pod
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role.lower()},
                                      "template": replica["template"]}, version, strict=True)


def _node_argv(container: dict) -> list[str]:
    return shlex.split(container["args"][0])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", ["k8s", "pytorchjob"])
@pytest.mark.parametrize("name", SPECS)
def test_every_manifest_passes_the_kubernetes_schema(name, kind, version):
    docs = list(yaml.safe_load_all(render(kind, OPTS, SPECS[name])))
    assert [d["kind"] for d in docs] == (["Service", "Job"] if kind == "k8s" else ["PyTorchJob"])
    for doc in docs:
        _validate(doc, version)


def test_the_schema_check_catches_what_the_api_server_refuses():
    job = list(yaml.safe_load_all(render("k8s", OPTS, SPECS["gpus"])))[1]
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": 1}  # "limits" misspelt
    with pytest.raises(kubernetes_validate.ValidationError, match="limit"):
        _validate(job, VERSIONS[-1])
    (pt,) = yaml.safe_load_all(render("pytorchjob", OPTS, SPECS["gpus"]))
    pt["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"][0]["vaule"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError, match="vaule"):
        _validate(pt, VERSIONS[-1])


def test_headless_service_publishes_pod_0_before_it_is_ready():
    """Pod 0's name must resolve while its image still pulls, or the other pods' static rendezvous waits on a
    DNS name that does not exist yet."""
    svc = next(yaml.safe_load_all(render("k8s", OPTS, SPECS["cpu"])))
    assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True


@pytest.mark.parametrize("kind", ["k8s", "pytorchjob"])
def test_gpus_asked_for_are_gpus_trained_on(kind):
    gpu_docs = list(yaml.safe_load_all(render(kind, OPTS, SPECS["gpus"])))
    for c in _containers(gpu_docs[-1]):
        assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
        argv = _node_argv(c)
        # one process per GPU when --nproc is not given, on CUDA whatever torch's `auto` would have guessed
        assert argv[argv.index("--accelerator") + 1] == "cuda" and argv[argv.index("--nproc") + 1] == "8"
    cpu_docs = list(yaml.safe_load_all(render(kind, OPTS, SPECS["cpu"])))
    for c in _containers(cpu_docs[-1]):
        assert "nvidia.com/gpu" not in c.get("resources", {}).get("limits", {})
        argv = _node_argv(c)  # a pod that asked for no GPU must not take one it happens to see
        assert argv[argv.index("--accelerator") + 1] == "cpu" and argv[argv.index("--nproc") + 1] == "0"


def _pods(doc: dict) -> list[dict]:
    if doc["kind"] == "Job":
        return [doc["spec"]["template"]["spec"]]
    return [r["template"]["spec"] for r in doc["spec"]["pytorchReplicaSpecs"].values()]


# what Pod Security's `restricted` level requires of a pod (kubernetes.io/docs/concepts/security/pod-security-standards)
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": POD_UID, "runAsGroup": POD_UID, "fsGroup": POD_UID,
                  "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}
NCCL_ENV = [("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_HCA", "mlx5_0,mlx5_1"), ("NCCL_DEBUG", "WARN"),
            ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")]


@pytest.mark.parametrize("kind", ["k8s", "pytorchjob"])
@pytest.mark.parametrize("name", [n for n, s in SPECS.items() if not s.rdma])
def test_pods_meet_the_restricted_pod_security_level(name, kind):
    """The images' user (infra/docker), no escalation, no capability, the runtime's seccomp profile, a read-only root
    file system: HOME and temporary files go to the scratch emptyDir, the run to the claim. tests/unit/
    test_security_scan.py checks the same with checkov."""
    text = render(kind, OPTS, SPECS[name])
    assert "privileged" not in text  # no RDMA note
    for pod in _pods(list(yaml.safe_load_all(text))[-1]):
        assert pod["securityContext"] == RESTRICTED_POD and pod["automountServiceAccountToken"] is False
        assert {"name": "scratch", "emptyDir": {}} in pod["volumes"]
        for c in pod["containers"]:
            assert c["securityContext"] == RESTRICTED_CONTAINER and c["imagePullPolicy"] == "Always"
            assert {"name": "scratch", "mountPath": "/tmp"} in c["volumeMounts"]
            assert {"name": "HOME", "value": "/tmp"} in c["env"]


def test_rdma_device_and_nccl_environment():
    """RDMA: IPC_LOCK, as root (a capability added to a non-root container is not effective), with the rest of the
    hardening; the manifest says it needs the `privileged` level."""
    for kind in ("k8s", "pytorchjob"):
        text = render(kind, OPTS, SPECS["nccl-env"])
        assert "namespace at the privileged level" in text
        for pod in _pods(list(yaml.safe_load_all(text))[-1]):
            assert pod["securityContext"] == {**RESTRICTED_POD, "runAsNonRoot": False, "runAsUser": 0}
            (c,) = pod["containers"]
            assert c["resources"]["limits"] == {"nvidia.com/gpu": 2, "nvidia.com/hostdev": 1}
            assert c["securityContext"] == {**RESTRICTED_CONTAINER, "capabilities": {"drop": ["ALL"],
                                                                                      "add": ["IPC_LOCK"]}}
            assert [(e["name"], e["value"]) for e in c["env"] if e["name"] not in ("TORCH_EXTENSIONS_DIR", "HOME")] \
                == NCCL_ENV
        for c in _containers(list(yaml.safe_load_all(render(kind, OPTS, SPECS["gpus"])))[-1]):
            assert "add" not in c["securityContext"]["capabilities"]
            assert [e["name"] for e in c["env"]] == ["TORCH_EXTENSIONS_DIR", "HOME"]


def test_accelerator_and_environment_rules():
    with pytest.raises(ValueError, match="needs --gpus-per-node"):
        ClusterSpec(nnodes=2, accelerator="cuda")
    with pytest.raises(ValueError, match="sit idle"):
        ClusterSpec(nnodes=2, accelerator="cpu", gpus_per_node=4)
    with pytest.raises(ValueError, match="one process per GPU"):
        ClusterSpec(nnodes=2, gpus_per_node=4, nproc=8)
    with pytest.raises(ValueError, match="accelerator must be one of"):
        ClusterSpec(nnodes=2, accelerator="tpu")
    assert (ClusterSpec(nnodes=2, gpus_per_node=4, nproc=2).procs, ClusterSpec(nnodes=2, gpus_per_node=4).device) == (
        2, "cuda")
    with pytest.raises(ValueError, match="extended resource name"):
        ClusterSpec(nnodes=2, rdma="hca")
    for env in ((("LD_PRELOAD", "/x.so"),), (("nccl_debug", "INFO"),)):
        with pytest.raises(ValueError, match="NCCL_"):
            ClusterSpec(nnodes=2, nccl_env=env)
    with pytest.raises(ValueError, match="twice"):
        ClusterSpec(nnodes=2, nccl_env=(("NCCL_DEBUG", "WARN"), ("NCCL_DEBUG", "INFO")))
    with pytest.raises(ValueError, match="one line"):
        ClusterSpec(nnodes=2, nccl_env=(("NCCL_DEBUG", "WARN\nrm -rf /"),))
    assert env_pairs(["NCCL_IB_HCA=mlx5_0:1", "NCCL_NET_PLUGIN="]) == (("NCCL_IB_HCA", "mlx5_0:1"),
                                                                       ("NCCL_NET_PLUGIN", ""))
    with pytest.raises(ValueError, match="KEY=VALUE"):
        env_pairs(["NCCL_DEBUG"])


CLI = ["pretrain", "--shards", "/shared/s", "--tokenizer", "/shared/t", "--output", "/shared/o", "--nnodes", "2"]


def test_cli_refuses_cuda_without_gpus_in_one_line(capsys):
    from lmforge.cli import main

    assert main([*CLI, "--emit", "k8s", "--accelerator", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--gpus-per-node" in err and len(err.strip().splitlines()) == 1, err
    assert main([*CLI, "--emit", "k8s", "--nccl-env", "NCCL_DEBUG"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_cli_gpus_per_node_implies_cuda_in_every_kind(capsys):
    from lmforge.cli import main

    assert main([*CLI, "--emit", "slurm", "--gpus-per-node", "8", "--cpus-per-task", "64", "--nccl-env",
                 "NCCL_IB_HCA=mlx5"]) == 0
    out = capsys.readouterr().out
    assert "--accelerator cuda --nproc 8" in out
    # what an HPC user writes by hand: the GPUs and CPUs asked for, the step given the same CPUs, NCCL settings
    assert "#SBATCH --gres=gpu:8\n" in out and "#SBATCH --cpus-per-task=64\n" in out
    assert "srun --kill-on-bad-exit=1 --cpus-per-task=64 " in out and "export NCCL_IB_HCA=mlx5\n" in out
    assert main([*CLI, "--emit", "pytorchjob", "--gpus-per-node", "4", "--nproc", "2", "--nccl-env",
                 "NCCL_SOCKET_IFNAME=eth0", "--nccl-env", "NCCL_DEBUG=WARN", "--rdma-resource", "rdma/hca"]) == 0
    out, err = capsys.readouterr()
    # RDMA costs the restricted Pod Security level: said on stderr in one line, and in the manifest
    assert len(err.strip().splitlines()) == 1 and "rdma/hca" in err and "privileged" in err, err
    (doc,) = yaml.safe_load_all(out)
    _validate(doc, VERSIONS[-1])
    for c in _containers(doc):
        assert c["resources"]["limits"] == {"nvidia.com/gpu": 4, "rdma/hca": 1}
        assert {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"} in c["env"]
        argv = _node_argv(c)
        assert argv[argv.index("--accelerator") + 1] == "cuda" and argv[argv.index("--nproc") + 1] == "2"


@pytest.mark.skipif("dist_timeout_minutes" not in {f.name for f in dataclasses.fields(PretrainConfig)},
                    reason="PretrainConfig has no collective timeout yet")
def test_the_collective_timeout_reaches_each_node(capsys):
    from lmforge.cli import main

    assert main([*CLI, "--emit", "k8s", "--gpus-per-node", "8", "--dist-timeout-minutes", "45"]) == 0
    job = list(yaml.safe_load_all(capsys.readouterr().out))[1]
    argv = _node_argv(job["spec"]["template"]["spec"]["containers"][0])
    assert float(argv[argv.index("--dist-timeout-minutes") + 1]) == 45
