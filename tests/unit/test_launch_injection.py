"""Attacks on the cluster launch files (issue 50): a run's option that holds shell syntax reaches each node's
`lmforge pretrain` as that very string, and runs nothing. The emitted Slurm script runs under bash with stand-in
`srun`/`scontrol`/`lmforge`, the Kubernetes commands under `sh -c` as their containers would run them; a marker
file the payloads would create must not appear. A control character in a value is refused before anything is
written (a newline in `--output` would end the `#SBATCH` line and start a command)."""
from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from training.launch import cluster
from training.launch.cluster import ClusterSpec, render


def payloads(marker: Path) -> list[str]:
    return [f"/shared/$(touch {marker})", f"/shared/`touch {marker}`", f"/shared/x; touch {marker}",
            f"/shared/x' ; touch {marker}; echo '", f'/shared/x" ; touch {marker}; echo "', "/shared/$HOME/${IFS}x",
            f"/shared/x\\'$(touch {marker})"]


def script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """bin/ with srun (drops its options, runs the rest as node 0), scontrol (one host) and lmforge (records its
    argv as JSON); the Slurm script calls this lmforge by absolute path, as it calls the installation's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    script(bin_dir / "srun", 'while [[ "$1" == --* ]]; do shift; done\nSLURM_NODEID=0 exec "$@"\n')
    script(bin_dir / "scontrol", "echo node0\n")
    lmforge = script(bin_dir / "lmforge", f'exec python3 -c \'import json, sys; json.dump(sys.argv[1:], open("{record}", "w"))\' "$@"\n')
    monkeypatch.setattr(cluster, "_interpreter", lambda: [str(lmforge)])
    return bin_dir, record


def node_env(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": "/nonexistent", "SLURM_JOB_NODELIST": "node0",
            "SLURM_CPUS_ON_NODE": "2", "JOB_COMPLETION_INDEX": "0", "RANK": "0", "MASTER_ADDR": "node0",
            "MASTER_PORT": "29500"}


def option_values(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("kind", ["slurm", "k8s", "pytorchjob"])
def test_shell_syntax_in_a_runs_paths_reaches_the_node_as_text(kind, tmp_path, stand_ins):
    bin_dir, record = stand_ins
    marker = tmp_path / "pwned"
    for payload in payloads(marker):
        opts = {"shards": payload, "tokenizer": "/shared/x/tokenizer", "init_from": payload, "model": "bert_mini"}
        text = render(kind, opts, ClusterSpec(nnodes=2))
        record.unlink(missing_ok=True)
        if kind == "slurm":
            path = tmp_path / "job.sbatch"
            path.write_text(text)
            r = subprocess.run(["bash", str(path)], env=node_env(bin_dir), capture_output=True, text=True, timeout=60)
        else:
            pod = [d for d in yaml.safe_load_all(text) if d["kind"] in ("Job", "PyTorchJob")][0]
            spec = pod["spec"]["template"]["spec"] if kind == "k8s" else \
                pod["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
            c = spec["containers"][0]
            r = subprocess.run([*c["command"], *c["args"]], env=node_env(bin_dir), capture_output=True, text=True,
                               timeout=60)
        assert r.returncode == 0, r.stderr
        assert not marker.exists(), f"{payload!r} ran on the node"
        argv = json.loads(record.read_text())
        assert option_values(argv, "--shards") == payload and option_values(argv, "--init-from") == payload
        # the launcher's own placeholders still expand on the node
        assert option_values(argv, "--node-rank") == "0" and option_values(argv, "--master-addr") in ("node0",
                                                                                                       "lmforge-pretrain-0.lmforge-pretrain")


@pytest.mark.parametrize("bad", ["/shared/x\ntouch /tmp/pwned", "/shared/x\r", "/shared/\x00x", "/shared/\x1b[2Jx"])
@pytest.mark.parametrize("kind", ["slurm", "k8s", "pytorchjob"])
def test_a_control_character_in_an_option_is_refused(kind, bad):
    with pytest.raises(ValueError, match="control character"):
        render(kind, {"shards": "/shared/s", "output": bad}, ClusterSpec(nnodes=2))


@pytest.mark.parametrize("image", ["lmforge:0.1.0\nspec: {}", "lmforge:0.1.0 --privileged", "x\"y", "$(id)", ""])
def test_an_image_is_an_image_reference(image):
    with pytest.raises(ValueError, match="image reference"):
        ClusterSpec(nnodes=2, image=image)
    for good in ("lmforge:0.1.0", "registry.example.com:5000/team/lmforge:v1.2",
                 "reg.io/lmforge@sha256:" + "a" * 64):
        assert ClusterSpec(nnodes=2, image=good).image == good


def test_node_vars_are_names():
    with pytest.raises(ValueError, match="shell variable name"):
        cluster.NodeVar("$(id)")
    assert cluster._shell(["a b", cluster.NodeVar("RANK"), "$RANK"]) == "'a b' \"$RANK\" '$RANK'"
