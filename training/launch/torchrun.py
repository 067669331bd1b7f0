"""Launch a training entry point under torchrun from Python (for flows and tests).

    from training.launch.torchrun import launch_pretrain
    from training.pretraining.pretrain import PretrainConfig
    out = launch_pretrain(PretrainConfig(shards=..., tokenizer=..., output=..., model="tiny", steps=20), nproc=2)

runs `python -m torch.distributed.run --nproc_per_node=2 --master_port=<free> -m training.pretraining.pretrain
--shards ... ` with the environment training/runtime/accelerator.py plans (on CPU: DS_ACCELERATOR=cpu, gloo, and
the cores shared out, OMP_NUM_THREADS=1 for 2 processes on 2 cores; on CUDA: one process per GPU, NCCL); one process
on one node runs as `python -m training.pretraining.pretrain ...` itself, with the variables torchrun would set
(`launch_command`). It streams the workers' stdout (lmforge's progress) to our stdout
and their stderr (library warnings) to our stderr, both to <output>/launch.log. The workers' tracebacks
and torchrun's failure summary go to the log only: a failed run raises common.cli.Failed with the
first worker's own error (its exception line) and the log's path, one line, where two ranks'
tracebacks and torchrun's summary printed 151 lines before.
"""
from __future__ import annotations

import dataclasses
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from common.cli import Failed
from common.config import options_to_argv
from training.runtime.accelerator import Machine, launch_plan
from training.runtime.processes import die_with_parent

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    """Where the processes of one training job run; every node runs the same command. Three ways to meet:

    - one node: torchrun with a free local port (the default);
    - c10d rendezvous (`rdzv_endpoint` HOST:PORT of a machine all nodes reach, usually node 0): torchrun
      agents find each other and agree on ranks, so nodes need not know their rank;
    - static (`node_rank` and `master_addr`, `master_port`): torchrun with fixed node ranks, as Slurm or
      a Kubernetes indexed Job hands them out;
    - a DeepSpeed hostfile (`hostfile`, one `HOST slots=N` line per node): the DeepSpeed launcher runs on each
      node with `--no_ssh --node_rank` (no ssh or pdsh needed); processes per node come from the slots.
    The shards, tokenizer and output directory must be on a file system all nodes share; pretraining checks
    that the output directory is the same on every process and stops with a clear error if not."""

    nnodes: int = 1
    rdzv_endpoint: str = ""
    rdzv_id: str = "lmforge"
    node_rank: int = -1
    master_addr: str = ""
    master_port: int = 29500
    hostfile: str = ""

    def __post_init__(self) -> None:
        if self.hostfile:
            hosts = read_hostfile(self.hostfile)
            if self.nnodes not in (1, len(hosts)):
                raise ValueError(f"--nnodes {self.nnodes} but {self.hostfile} lists {len(hosts)} node(s)")
            object.__setattr__(self, "nnodes", len(hosts))
            if len(hosts) > 1 and not 0 <= self.node_rank < len(hosts):
                raise ValueError(f"{self.hostfile} lists {len(hosts)} nodes: give each its --node-rank 0..{len(hosts) - 1}")
            return
        if self.nnodes < 1:
            raise ValueError(f"nnodes must be >= 1, got {self.nnodes}")
        if self.nnodes > 1 and self.node_rank >= 0:
            if self.node_rank >= self.nnodes or not self.master_addr:
                raise ValueError(f"static multi-node launch: --node-rank must be in 0..{self.nnodes - 1} and "
                                 f"--master-addr name node 0 (got node rank {self.node_rank}, addr {self.master_addr!r})")
            return
        if self.nnodes > 1 and not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+:\d+", self.rdzv_endpoint):
            raise ValueError(f"{self.nnodes} nodes need --rdzv-endpoint HOST:PORT (node 0's address, reachable from "
                             f"every node), or --node-rank with --master-addr, got {self.rdzv_endpoint!r}")

    def slots(self) -> int | None:
        """Processes on this node from the hostfile (None without one)."""
        if not self.hostfile:
            return None
        hosts = read_hostfile(self.hostfile)
        return hosts[max(self.node_rank, 0)][1]


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """DeepSpeed's hostfile: `HOST slots=N` per line, # comments; a clear error for anything else."""
    hosts: list[tuple[str, int]] = []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise ValueError(f"hostfile {path}: no such file") from None
    for i, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"(\S+)\s+slots=(\d+)", line)
        if not m or int(m.group(2)) < 1:
            raise ValueError(f"hostfile {path} line {i}: expected 'HOST slots=N' (N >= 1), got {line!r}")
        if m.group(1) in {h for h, _ in hosts}:
            raise ValueError(f"hostfile {path} line {i}: host {m.group(1)} is listed twice")
        hosts.append((m.group(1), int(m.group(2))))
    if not hosts:
        raise ValueError(f"hostfile {path} lists no host")
    return hosts


def torchrun_command(module: str, argv: list[str], nproc: int, port: int, nodes: Nodes = Nodes(),
                     meet_timeout_s: int = 0) -> list[str]:
    """The launcher command for this node. `meet_timeout_s`: how long the nodes wait for each other at the start
    (torchrun's static rendezvous `timeout`, 600 s by default; c10d's `join_timeout`): a pod whose image is still
    being pulled, or a Slurm node that starts late, joins within it (0: torchrun's default)."""
    if nodes.hostfile:
        addr = nodes.master_addr or read_hostfile(nodes.hostfile)[0][0]
        return [sys.executable, "-m", "deepspeed.launcher.runner", "--hostfile", nodes.hostfile, "--no_ssh",
                "--node_rank", str(max(nodes.node_rank, 0)), "--master_addr", addr,
                "--master_port", str(nodes.master_port if nodes.nnodes > 1 else port), "--module", module, *argv]
    if nodes.nnodes == 1:
        where = ["--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={port}"]
    elif nodes.node_rank >= 0:
        where = [f"--nnodes={nodes.nnodes}", f"--node_rank={nodes.node_rank}", f"--master_addr={nodes.master_addr}",
                 f"--master_port={nodes.master_port}"]
        where += [f"--rdzv_conf=timeout={meet_timeout_s}"] if meet_timeout_s else []
    else:
        where = [f"--nnodes={nodes.nnodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={nodes.rdzv_endpoint}",
                 f"--rdzv_id={nodes.rdzv_id}"]
        where += [f"--rdzv_conf=join_timeout={meet_timeout_s}"] if meet_timeout_s else []
    return [sys.executable, "-m", "torch.distributed.run", *where, f"--nproc_per_node={nproc}", "-m", module, *argv]


def launch_command(module: str, argv: list[str], nproc: int, port: int, nodes: Nodes = Nodes(),
                   meet_timeout_s: int = 0) -> tuple[list[str], dict[str, str]]:
    """(command, the environment it adds) of this node's launch. One process on one node is the worker itself,
    given the variables torchrun would give it (RANK, WORLD_SIZE, MASTER_ADDR/PORT, ...): torchrun's agent would be
    another interpreter importing torch (~3 s of CPU) to start and watch one child. Anything else is torchrun's
    (or the DeepSpeed launcher's) command."""
    if nproc == 1 and nodes.nnodes == 1 and not nodes.hostfile:
        return [sys.executable, "-m", module, *argv], {
            "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0",
            "ROLE_RANK": "0", "ROLE_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    return torchrun_command(module, argv, nproc, port, nodes, meet_timeout_s), {}


def plan_text(module: str, cfg: Any, nproc: int, nodes: Nodes = Nodes(), accelerator: str = "auto",
              machine: Machine | None = None) -> str:
    """What a launch would do, as JSON: the accelerator plan, the workers' environment, the command (torchrun's, or
    the worker's own for one process on one node) and
    (for pretraining) the DeepSpeed config; nothing runs."""
    import json

    plan = launch_plan(accelerator, nodes.slots() or nproc, machine)
    cfg = gpu_precision(cfg, plan)
    command, env = launch_command(module, cfg_to_argv(cfg), plan.nproc_per_node, 29500, nodes,
                                  int(60 * getattr(cfg, "dist_timeout_minutes", 0)))
    out: dict[str, Any] = {"plan": plan.as_dict(), "worker_env": {**plan.env(), **env}, "nnodes": nodes.nnodes,
                           "command": command}
    if module == "training.pretraining.pretrain":
        from training.runtime.ds_config import deepspeed_config
        from training.runtime.recipe import optimizer_choice

        cfg, run = planned_run(cfg, plan, nodes)
        out["run_plan"] = run.lines()
        if cfg.micro_batch_size == "auto":  # probed by the workers; the config shows where it goes
            out["deepspeed_config"] = {**deepspeed_config(dataclasses.replace(cfg, micro_batch_size=1)),
                                       "train_micro_batch_size_per_gpu": "auto (probed on the GPU at start-up)"}
        else:
            out["deepspeed_config"] = deepspeed_config(cfg)
        out["optimizer"] = optimizer_choice(cfg.optimizer, plan.accelerator, fused_lamb=plan.fused_adam)
    return json.dumps(out, indent=1, default=str)


def planned_run(cfg: Any, plan, nodes: Nodes):
    """The pretraining run's plan (training.pretraining.run_plan) as the workers will make it: world size from the nodes, each
    device's memory from the launch plan, the parameter count from the preset and the shards (30,522 pieces and
    MLM where the shards are not there yet)."""
    from types import SimpleNamespace

    from training.pretraining.module import estimated_parameters
    from training.pretraining.run_plan import resolve

    try:
        from training.pretraining.shard_set import ShardSet

        shards = ShardSet.open(cfg.shards, verify=False)
    except (OSError, ValueError):
        shards = SimpleNamespace(vocab_size=30522, objective="mlm")
    world = plan.nproc_per_node * nodes.nnodes
    return resolve(cfg, world, plan.accelerator, plan.device_memory or None, estimated_parameters(cfg, shards))


def worker_path() -> str:
    """PATH for the workers with this interpreter's bin/ first, as the Slurm script has it (training.launch.cluster):
    DeepSpeed's ops are built by whichever `ninja` PATH finds first, and two ninja versions (the venv's 1.13,
    Debian's 1.11) hash build commands differently, so alternating between them rebuilt the CPU comm op
    (60-100 s) at every other launch."""
    bin_dir = os.path.dirname(sys.executable)
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != bin_dir]
    return os.pathsep.join([bin_dir, *rest])


def check_precision(cfg: Any, plan) -> None:
    """--fp16 needs CUDA (DeepSpeed's CPU accelerator has no fp16), --bf16 a device that has bf16: refused before
    any process starts."""
    for name in ("bf16", "fp16"):
        if getattr(cfg, name, False) and name not in plan.precisions:
            raise ValueError(f"--{name}: the {plan.accelerator} plan supports {', '.join(plan.precisions)} only"
                             + (" (fp16 is for CUDA GPUs without bf16)" if name == "fp16" else " (use --fp16)"))


def gpu_precision(cfg: Any, plan) -> Any:
    """On CUDA a config that names no precision trains in the plan's best: bf16 (compute capability 8.0+) or
    fp16 with loss scaling; fp32 only when asked (--fp32). CPU plans and configs without the fields: unchanged."""
    names = ("bf16", "fp16", "fp32")
    if plan.accelerator != "cuda" or not all(hasattr(cfg, n) for n in names) or any(getattr(cfg, n) for n in names):
        return cfg
    best = plan.precisions[0]
    return dataclasses.replace(cfg, **{best: True}) if best in ("bf16", "fp16") else cfg


_RANK_PREFIX = re.compile(r"^\[(?:default)?rank\d+\]:\s?")


class WorkerErrors:
    """Sorts the workers' stderr lines: True for a line the terminal shows, False for one that only goes
    to the log (a traceback's frames, torchrun's failure summary). The exception line ending each
    traceback is kept in `errors`, the workers' first, torchrun's own (ChildFailedError) last."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.last_shown = ""
        self._in_traceback = self._summary = False

    def __call__(self, line: str) -> bool:
        body = _RANK_PREFIX.sub("", line.rstrip("\n"))
        if self._summary:
            return False
        if body.startswith("Traceback (most recent call last):"):
            self._in_traceback = True
            return False
        if self._in_traceback:
            if not body.strip() or body[0].isspace() or body.startswith(("During handling", "The above exception")):
                return False
            self._in_traceback = False
            self.errors.append(body.strip())
            self._summary = "ChildFailedError" in body  # torchrun's summary follows: frames of no one's code
            return False
        if body.strip():
            self.last_shown = body.strip()
        return True

    def first(self) -> str:
        """The error a user needs: the first worker's exception, else the last thing a worker said."""
        own = [e for e in self.errors if "ChildFailedError" not in e]
        return own[0] if own else self.last_shown or (self.errors[0] if self.errors else "")


def launch(module: str, cfg: Any, output: str | os.PathLike, nproc: int = 2,
           nodes: Nodes = Nodes(), accelerator: str = "auto", check_inputs: Any = None) -> Path:
    """Run `module` under torchrun with `cfg` as flags; returns `output` once every rank of this node exited 0.
    `nproc` 0: one process per GPU, or training.runtime.accelerator's default on CPU."""
    plan = launch_plan(accelerator, nodes.slots() or nproc)
    cfg = gpu_precision(cfg, plan)
    check_precision(cfg, plan)
    if check_inputs is not None:  # what every process would stop on, before any starts or the output exists
        check_inputs(cfg)
    nproc = plan.nproc_per_node
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    # the nodes wait for each other as long as a collective waits (pretraining's --dist-timeout-minutes)
    meet = int(60 * getattr(cfg, "dist_timeout_minutes", 0))
    cmd, ranks = launch_command(module, cfg_to_argv(cfg), nproc, free_port(), nodes, meet)
    env = {
        **os.environ,
        **plan.env(),  # DS_ACCELERATOR, OMP_NUM_THREADS (the cores shared out), LMFORGE_DIST_BACKEND
        **ranks,  # one process on one node: what torchrun would have set
        "PYTHONUNBUFFERED": "1",  # progress lines arrive as they are printed
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
        "PATH": worker_path(),
    }
    # one launch log per node on a shared output directory
    log_name = "launch.log" if nodes.nnodes == 1 else f"launch-{socket.gethostname()}-{os.getpid()}.log"
    with open(output / log_name, "w") as log_file:
        log_file.write("$ " + " ".join(cmd) + "\n")
        # cwd stays ours, so relative paths in cfg mean what the caller meant; PYTHONPATH finds the repo
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, bufsize=1, preexec_fn=die_with_parent)
        assert proc.stdout is not None and proc.stderr is not None
        lock = threading.Lock()

        errors = WorkerErrors()

        def pump(stream, to, show=lambda line: True) -> None:
            for line in stream:
                with lock:
                    if show(line):
                        to.write(line)
                        to.flush()
                    log_file.write(line)

        everything = bool(os.environ.get("LMFORGE_TRACEBACK"))  # the workers' tracebacks on the terminal too

        def shown(line: str) -> bool:
            return errors(line) or everything

        err = threading.Thread(target=pump, args=(proc.stderr, sys.stderr, shown), daemon=True)
        err.start()
        try:
            pump(proc.stdout, sys.stdout)
            code = proc.wait()
            err.join(timeout=10)
        finally:
            if proc.poll() is None:  # we were interrupted: torchrun stops its workers on SIGTERM (a lone worker stops)
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    if code != 0:
        said = errors.first() or f"exit code {code}"
        raise Failed(f"{said}  ({module} on {nproc} process{'es' if nproc != 1 else ''}; the workers' tracebacks are in {output / log_name})")
    return output


def check_pretrain_inputs(cfg: Any) -> None:
    """What every rank would stop on, found once before torchrun starts them (FileNotFoundError or
    ValueError naming the path): a shards stage that has not finished or is not one, shards of an
    objective pretraining does not train, a tokenizer or init_from folder that is not there."""
    from schemas.hf import require_model_dir
    from schemas.objectives import OBJECTIVES
    from training.pretraining.shard_set import ShardSet

    ShardSet.open(cfg.shards, verify=False).require_objective(OBJECTIVES, "pretrain")
    if not Path(cfg.tokenizer).is_dir():
        raise FileNotFoundError(f"--tokenizer {cfg.tokenizer}: no such folder")
    if getattr(cfg, "init_from", ""):
        require_model_dir(cfg.init_from, "--init-from")


def launch_pretrain(cfg, nproc: int = 2, nodes: Nodes = Nodes(), accelerator: str = "auto") -> Path:
    """Run `training.pretraining.pretrain` on `nproc` processes of this node (of `nodes`); returns cfg.output."""
    return launch("training.pretraining.pretrain", cfg, cfg.output, nproc=nproc, nodes=nodes, accelerator=accelerator,
                  check_inputs=check_pretrain_inputs)
