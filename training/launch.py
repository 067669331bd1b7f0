"""Launch a training entry point under torchrun from Python (for flows and tests).

    from training.launch import launch_pretrain
    from training.pretrain import PretrainConfig
    out = launch_pretrain(PretrainConfig(shards=..., tokenizer=..., output=..., model="tiny", steps=20), nproc=2)

runs `python -m torch.distributed.run --nproc_per_node=2 --master_port=<free> -m training.pretrain
--shards ... ` with the environment training/accelerator.py plans (on CPU: DS_ACCELERATOR=cpu, gloo, and
the cores shared out, OMP_NUM_THREADS=1 for 2 processes on 2 cores; on CUDA: one process per GPU, NCCL), streams the workers' stdout (lmforge's progress) to our stdout
and their stderr (library warnings, tracebacks) to our stderr, both to <output>/launch.log, and
raises RuntimeError with the log's tail if it fails.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from lmforge.config import options_to_argv
from training.accelerator import Machine, launch_plan

REPO_ROOT = Path(__file__).resolve().parents[1]


def cfg_to_argv(cfg: Any, prefix: str = "") -> list[str]:
    """The command line that `add_config_args` + `config_from_args` parse back into `cfg`: nested
    config dataclasses become prefixed flags (`--mask-rate`), the rest as `options_to_argv`."""
    opts: dict[str, Any] = {}
    nested: list[str] = []
    for f in dataclasses.fields(cfg):
        if not f.init:
            continue
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            nested += cfg_to_argv(value, prefix=f"{prefix}{f.name}_")
        else:
            opts[prefix + f.name] = value
    return options_to_argv(opts) + nested


def free_port() -> int:
    """A port the OS says is free now (another process could take it before torchrun does; rare)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass(frozen=True)
class Nodes:
    """Where the processes of one training job run. One node: torchrun with a free local port. Several
    nodes: every node runs the same command (one torchrun agent each) and they meet through a c10d
    rendezvous on `rdzv_endpoint` (host:port of a machine all nodes reach, usually node 0); the shards,
    tokenizer and output directory must be on a file system they all share."""

    nnodes: int = 1
    rdzv_endpoint: str = ""
    rdzv_id: str = "lmforge"

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise ValueError(f"nnodes must be >= 1, got {self.nnodes}")
        if self.nnodes > 1 and not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+:\d+", self.rdzv_endpoint):
            raise ValueError(f"{self.nnodes} nodes need --rdzv-endpoint HOST:PORT (node 0's address, reachable from "
                             f"every node), got {self.rdzv_endpoint!r}")


def torchrun_command(module: str, argv: list[str], nproc: int, port: int, nodes: Nodes = Nodes()) -> list[str]:
    if nodes.nnodes == 1:
        where = ["--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={port}"]
    else:
        where = [f"--nnodes={nodes.nnodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={nodes.rdzv_endpoint}",
                 f"--rdzv_id={nodes.rdzv_id}"]
    return [sys.executable, "-m", "torch.distributed.run", *where, f"--nproc_per_node={nproc}", "-m", module, *argv]


def plan_text(module: str, cfg: Any, nproc: int, nodes: Nodes = Nodes(), accelerator: str = "auto",
              machine: Machine | None = None) -> str:
    """What a launch would do, as JSON: the accelerator plan, the workers' environment, the torchrun command and
    (for pretraining) the DeepSpeed config; nothing runs."""
    import json

    plan = launch_plan(accelerator, nproc, machine)
    out: dict[str, Any] = {"plan": plan.as_dict(), "worker_env": plan.env(), "nnodes": nodes.nnodes,
                           "torchrun": torchrun_command(module, cfg_to_argv(cfg), plan.nproc_per_node, 29500, nodes)}
    if module == "training.pretrain":
        from training.pretrain import deepspeed_config

        out["deepspeed_config"] = deepspeed_config(cfg)
    return json.dumps(out, indent=1, default=str)


def launch(module: str, cfg: Any, output: str | os.PathLike, nproc: int = 2, tail_lines: int = 60,
           nodes: Nodes = Nodes(), accelerator: str = "auto") -> Path:
    """Run `module` under torchrun with `cfg` as flags; returns `output` once every rank of this node exited 0.
    `nproc` 0: one process per GPU, or training.accelerator's default on CPU."""
    plan = launch_plan(accelerator, nproc)
    nproc = plan.nproc_per_node
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    cmd = torchrun_command(module, cfg_to_argv(cfg), nproc, free_port(), nodes)
    env = {
        **os.environ,
        **plan.env(),  # DS_ACCELERATOR, OMP_NUM_THREADS (the cores shared out), LMFORGE_DIST_BACKEND
        "PYTHONUNBUFFERED": "1",  # progress lines arrive as they are printed
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    # one launch log per node on a shared output directory
    log_name = "launch.log" if nodes.nnodes == 1 else f"launch-{socket.gethostname()}-{os.getpid()}.log"
    with open(output / log_name, "w") as log_file:
        log_file.write("$ " + " ".join(cmd) + "\n")
        # cwd stays ours, so relative paths in cfg mean what the caller meant; PYTHONPATH finds the repo
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, bufsize=1)
        assert proc.stdout is not None and proc.stderr is not None
        lock = threading.Lock()

        def pump(stream, to) -> None:
            for line in stream:
                with lock:
                    to.write(line)
                    to.flush()
                    log_file.write(line)
                    tail.append(line)

        err = threading.Thread(target=pump, args=(proc.stderr, sys.stderr), daemon=True)
        err.start()
        try:
            pump(proc.stdout, sys.stdout)
            code = proc.wait()
            err.join(timeout=10)
        finally:
            if proc.poll() is None:  # we were interrupted: torchrun stops its workers on SIGTERM
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    if code != 0:
        raise RuntimeError(
            f"{module} failed with exit code {code} ({nproc} processes); full log: {output / 'launch.log'}\n"
            f"--- last {len(tail)} lines ---\n" + "".join(tail)
        )
    return output


def launch_pretrain(cfg, nproc: int = 2, nodes: Nodes = Nodes(), accelerator: str = "auto") -> Path:
    """Run `training.pretrain` on `nproc` processes of this node (of `nodes`); returns cfg.output."""
    return launch("training.pretrain", cfg, cfg.output, nproc=nproc, nodes=nodes, accelerator=accelerator)
