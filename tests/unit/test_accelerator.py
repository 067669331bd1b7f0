"""training/runtime/accelerator.py: which accelerator, how many processes and threads, which backend (no GPU needed:
the machine is a value), and `lmforge pretrain --dry-run`, which prints the plan without running anything."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from training.runtime.accelerator import CPU_MALLOC, DEFAULT_CPU_PROCESSES, Machine, cpu_malloc, launch_plan

ROOT = Path(__file__).resolve().parents[2]
CPU2 = Machine(cpu_count=2)
A100x4 = Machine(cpu_count=32, gpus=((8, 0),) * 4)
V100x2 = Machine(cpu_count=16, gpus=((7, 0),) * 2)


def test_cpu_shares_the_cores_out_and_uses_gloo():
    two = launch_plan("auto", 2, CPU2)
    assert (two.accelerator, two.backend, two.nproc_per_node, two.threads_per_process) == ("cpu", "gloo", 2, 1)
    env = two.env()
    assert {k: env[k] for k in ("DS_ACCELERATOR", "OMP_NUM_THREADS", "LMFORGE_DIST_BACKEND")} == {
        "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "LMFORGE_DIST_BACKEND": "gloo"}
    one = launch_plan("cpu", 1, CPU2)  # a single process uses every core (it used to get one thread)
    assert one.threads_per_process == 2 and not one.fused_adam
    assert launch_plan("cpu", 0, Machine(8)).nproc_per_node == DEFAULT_CPU_PROCESSES
    assert launch_plan("cpu", 0, Machine(8)).threads_per_process == 8 // DEFAULT_CPU_PROCESSES
    crowded = launch_plan("cpu", 4, CPU2)
    assert crowded.threads_per_process == 1 and "contend" in crowded.notes[0]


def test_cuda_runs_one_process_per_gpu_over_nccl():
    p = launch_plan("auto", 0, A100x4)
    assert (p.accelerator, p.backend, p.nproc_per_node, p.ds_accelerator) == ("cuda", "nccl", 4, "cuda")
    assert p.precisions[0] == "bf16" and p.fused_adam and p.threads_per_process == 8
    assert launch_plan("cuda", 2, A100x4).nproc_per_node == 2
    old = launch_plan("auto", 0, V100x2)  # no bf16 before compute capability 8.0
    assert old.precisions == ("fp16", "fp32") and "bf16" in old.notes[0]
    assert launch_plan("cpu", 0, A100x4).accelerator == "cpu"  # asked for the CPU: the GPUs stay idle


def test_impossible_plans_are_clear_errors():
    with pytest.raises(ValueError, match="no CUDA device"):
        launch_plan("cuda", 0, CPU2)
    with pytest.raises(ValueError, match="8 processes on a node with 4 GPU"):
        launch_plan("cuda", 8, A100x4)
    with pytest.raises(ValueError, match="accelerator must be one of"):
        launch_plan("tpu", 0, CPU2)


def test_this_machine_plans_the_cpu():
    p = launch_plan("auto", 2)
    assert p.accelerator == "cpu" and p.backend == "gloo"  # no GPU here


DRY_RUNS = """
import contextlib, io, json, sys
from lmforge.cli import main
done = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    done.append({"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()})
open(sys.argv[2], "w").write(json.dumps(done))
"""
"""`lmforge pretrain --dry-run ...` several times in one process: one start-up of torch and DeepSpeed, not one each."""


def _dry_runs(tmp_path: Path, *extras: tuple[str, ...]) -> list[dict]:
    argvs = [["pretrain", "--shards", "s", "--tokenizer", "t", "--output", "o", "--dry-run", *extra] for extra in extras]
    out = tmp_path / "dry-runs.json"
    r = subprocess.run([sys.executable, "-c", DRY_RUNS, json.dumps(argvs), str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text())


def test_dry_run_prints_the_plan_and_the_deepspeed_config_without_running(tmp_path):
    runs = _dry_runs(tmp_path, ("--nproc", "1", "--zero-stage", "1"),
                     ("--nproc", "0", "--gpus-per-node", "4", "--nnodes", "2", "--rdzv-endpoint", "node0:29400"),
                     ("--gpus-per-node", "2", "--zero-stage", "2", "--micro-batch-size", "32"),
                     ("--gpus-per-node", "2", "--fp32"),
                     ("--optimizer", "lamb", "--gpus-per-node", "2", "--zero-stage", "0", "--fp32"),
                     ("--optimizer", "lamb", "--zero-stage", "2"))
    *planned, refused = runs
    assert all(r["rc"] == 0 for r in planned), [r["stderr"][-1000:] for r in planned]
    here, gpu, zero2, fp32, lamb = (json.loads(r["stdout"]) for r in planned)
    assert here["plan"]["accelerator"] == "cpu" and here["worker_env"]["LMFORGE_DIST_BACKEND"] == "gloo"
    # one process on one node runs as the worker itself, with the variables torchrun would have set
    assert here["command"][1:3] == ["-m", "training.pretraining.pretrain"] and here["worker_env"]["WORLD_SIZE"] == "1"
    assert here["deepspeed_config"]["zero_optimization"] == {"stage": 1}
    assert gpu["plan"]["accelerator"] == "cuda" and gpu["worker_env"]["DS_ACCELERATOR"] == "cuda"
    assert "--nproc_per_node=4" in gpu["command"] and "--rdzv_endpoint=node0:29400" in gpu["command"]
    assert "RANK" not in gpu["worker_env"]  # torchrun's to set
    assert gpu["nnodes"] == 2 and not Path(ROOT, "o").exists()  # nothing ran, nothing was written
    assert here["optimizer"] == gpu["optimizer"] == "torch.optim.AdamW(fused)"  # nothing to compile
    # a GPU plan trains in its best precision unless told: bf16 from compute capability 8.0; at the ZeRO-0 the plan
    # picks for bert-sized models, bf16 is torch autocast, and the plan says why it chose what it chose
    assert gpu["deepspeed_config"]["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}
    assert gpu["deepspeed_config"]["bf16"] == {"enabled": False} == here["deepspeed_config"]["bf16"]
    assert gpu["deepspeed_config"]["train_micro_batch_size_per_gpu"].startswith("auto")
    lines = "\n".join(gpu["run_plan"])
    assert "ZeRO-0:" in lines and "compile on: default on CUDA" in lines and "micro batch auto" in lines
    assert "ZeRO-1: asked for" in "\n".join(here["run_plan"]) and "micro batch 16: the CPU default" in "\n".join(here["run_plan"])
    assert zero2["deepspeed_config"]["bf16"] == {"enabled": True, "check_grad_overflow": False}
    assert zero2["deepspeed_config"]["train_micro_batch_size_per_gpu"] == 32
    assert fp32["deepspeed_config"]["bf16"] == {"enabled": False}
    assert lamb["optimizer"] == "deepspeed.ops.lamb.FusedLamb" and lamb["deepspeed_config"]["zero_optimization"]["stage"] == 0
    assert refused["rc"] == 2 and "lamb needs per-tensor norms" in refused["stderr"]


def test_fp16_is_for_cuda_and_refused_on_cpu_before_anything_starts(tmp_path):
    from training.launch.torchrun import check_precision, launch_pretrain
    from training.pretraining.pretrain import PretrainConfig
    from training.runtime.accelerator import Machine, launch_plan
    from training.runtime.ds_config import deepspeed_config

    cfg = PretrainConfig(shards="s", tokenizer="t", output=str(tmp_path / "o"), fp16=True)
    assert deepspeed_config(cfg)["fp16"] == {"enabled": True, "loss_scale": 0}
    with pytest.raises(ValueError, match="--fp16: the cpu plan supports bf16, fp32 only"):
        launch_pretrain(cfg, nproc=1, accelerator="cpu")
    assert not (tmp_path / "o").exists()  # refused before the output or any process was made
    old_gpu = launch_plan("cuda", 0, Machine(8, ((7, 0),)))
    check_precision(cfg, old_gpu)  # a V100 takes fp16
    with pytest.raises(ValueError, match="--bf16: the cuda plan supports fp16, fp32 only"):
        check_precision(PretrainConfig(shards="s", tokenizer="t", output="o", bf16=True), old_gpu)
    with pytest.raises(ValueError, match="give one of --bf16, --fp16 and --fp32"):
        PretrainConfig(shards="s", tokenizer="t", output="o", bf16=True, fp16=True)
    (gpu,) = _dry_runs(tmp_path, ("--fp16", "--gpus-per-node", "2"))
    assert gpu["rc"] == 0 and json.loads(gpu["stdout"])["deepspeed_config"]["fp16"]["enabled"] is True


def test_cpu_workers_get_the_allocator_settings_and_keep_the_users(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    tunables = launch_plan("cpu", 2, CPU2).env()["GLIBC_TUNABLES"].split(":")
    assert sorted(t.split("=")[0] for t in tunables) == sorted(CPU_MALLOC)
    assert "GLIBC_TUNABLES" not in launch_plan("cuda", 0, A100x4).env()
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0:glibc.cpu.x86_shstk=on")
    mine = launch_plan("cpu", 2, CPU2).env()["GLIBC_TUNABLES"].split(":")
    assert mine[:2] == ["glibc.malloc.trim_threshold=0", "glibc.cpu.x86_shstk=on"] and len(mine) == 4


STEPS = """
import resource, numpy as np
def step():  # a training step's shape: activations built up, then all freed
    bufs = [np.ones(1 << 18) for _ in range(20)]  # 20 x 2 MiB
    del bufs
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_the_allocator_settings_stop_the_page_faults_of_each_step():
    """Without them glibc gives the freed 40 MiB back and faults it in again every step (10,240 pages
    of 4 KiB a step); with them the memory stays. Runs where GLIBC_TUNABLES works (glibc 2.26+)."""
    def faults(tunables: str | None) -> int:
        env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
        if tunables is not None:
            env["GLIBC_TUNABLES"] = tunables
        return int(subprocess.run([sys.executable, "-c", STEPS], env=env, capture_output=True, text=True,
                                  check=True).stdout)
    default, tuned = faults(None), faults(cpu_malloc())
    assert default > 10 * 10_240 * 0.5 and tuned < default / 10, (default, tuned)
