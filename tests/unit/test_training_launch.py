"""training.launch.torchrun and training.pretraining.pretrain's pure parts: the command line and the engine config."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import pytest

from common.config import add_config_args, config_from_args, opt
from training.launch.torchrun import cfg_to_argv, torchrun_command
from training.pretraining.pretrain import PretrainConfig, plan_steps
from training.runtime.ds_config import deepspeed_config


def _parse(cls, argv):
    parser = argparse.ArgumentParser()
    add_config_args(parser, cls)
    return config_from_args(cls, parser.parse_args(argv))


def test_cfg_to_argv_round_trips_pretrain_config():
    cfg = PretrainConfig(shards="s", tokenizer="t", output="o", model="tiny", bf16=True, tensorboard=False, lr=2e-4)
    assert cfg_to_argv(cfg)[:2] == ["--shards", "s"]
    assert "--bf16" in cfg_to_argv(cfg) and "--no-tensorboard" in cfg_to_argv(cfg)
    assert _parse(PretrainConfig, cfg_to_argv(cfg)) == cfg


@dataclass
class _Inner:
    rate: float = opt(0.15, help="a nested float")
    keep: bool = opt(True, help="a nested flag")


@dataclass
class _Other:
    name: str = opt(help="a string")
    sizes: list[int] = opt([1, 2], help="a list")
    maybe: float | None = opt(None, help="optional")
    mask: _Inner = opt(default_factory=_Inner, help="a nested config")


def test_cfg_to_argv_other_dataclasses():
    cfg = _Other(name="x", sizes=[3, 4, 5], maybe=None, mask=_Inner(rate=0.2, keep=False))
    assert cfg_to_argv(cfg) == ["--name", "x", "--sizes", "3", "4", "5", "--mask-rate", "0.2", "--no-mask-keep"]
    assert _parse(_Other, cfg_to_argv(cfg)) == cfg


def test_torchrun_command():
    cmd = torchrun_command("training.pretraining.pretrain", ["--steps", "3"], nproc=2, port=29999)
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc_per_node=2" in cmd and "--master_port=29999" in cmd
    assert cmd[-4:] == ["-m", "training.pretraining.pretrain", "--steps", "3"]


def test_one_process_on_one_node_is_launched_without_torchrun():
    from training.launch.torchrun import Nodes, launch_command

    cmd, env = launch_command("training.pretraining.pretrain", ["--steps", "3"], nproc=1, port=29999)
    assert cmd == [sys.executable, "-m", "training.pretraining.pretrain", "--steps", "3"]
    assert env["RANK"] == env["LOCAL_RANK"] == "0" and env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "1"
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29999")
    for nproc, nodes in ((2, Nodes()), (1, Nodes(2, rdzv_endpoint="n0:29400"))):  # torchrun's, which sets the ranks
        cmd, env = launch_command("training.pretraining.pretrain", [], nproc=nproc, port=29999, nodes=nodes)
        assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"] and env == {}


def test_config_validation_and_plan():
    with pytest.raises(ValueError, match="zero_stage must be 0, 1, 2, 3 or auto"):
        PretrainConfig(shards="s", tokenizer="t", output="o", zero_stage=4)
    with pytest.raises(ValueError, match="unknown model preset"):
        PretrainConfig(shards="s", tokenizer="t", output="o", model="nope")
    cfg = PretrainConfig(shards="s", tokenizer="t", output="o", epochs=3, grad_accum=2, micro_batch_size=8, zero_stage=2)
    assert plan_steps(cfg, batches_per_epoch=62) == 3 * 31
    ds = deepspeed_config(cfg)
    assert ds["zero_optimization"] == {"stage": 2} and ds["gradient_accumulation_steps"] == 2
    assert ds["train_micro_batch_size_per_gpu"] == 8 and ds["gradient_clipping"] == 1.0


def test_resume_mismatch_names_options_that_change_the_run():
    from common.config import config_to_dict
    from training.pretraining.resume import resume_mismatch

    saved = config_to_dict(PretrainConfig(shards="s", tokenizer="t", output="o", steps=10))
    # logging, validation and checkpoint cadence may change; resume itself obviously does
    same = config_to_dict(PretrainConfig(shards="s", tokenizer="t", output="o", steps=10, resume=True,
                                         save_every=5, log_every=3, eval_batches=0, tensorboard=False))
    assert resume_mismatch(saved, same) == {}
    other = config_to_dict(PretrainConfig(shards="s", tokenizer="t", output="o", steps=20, lr=1e-4, resume=True))
    assert resume_mismatch(saved, other) == {"steps": (10, 20), "lr": (1e-3, 1e-4)}


def test_pretrain_accepts_the_deepspeed_launchers_local_rank(monkeypatch, tmp_path):
    """`deepspeed --hostfile ...` runs the script with --local_rank=N: it must parse (it used to be 'unrecognized
    arguments'), not become an option of the run, and reach LOCAL_RANK."""
    import training.pretraining.pretrain as pretrain
    import training.runtime.processes as processes

    seen = {}
    monkeypatch.setattr(processes, "die_with_parent", lambda: seen.setdefault("dies_with_parent", True))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(pretrain, "run", lambda cfg: seen.setdefault("cfg", cfg))
    pretrain.main(["--shards", "s", "--tokenizer", "t", "--output", str(tmp_path), "--local_rank=1"])
    assert seen["cfg"] == PretrainConfig(shards="s", tokenizer="t", output=str(tmp_path))
    assert seen["dies_with_parent"]  # a launched worker asks for SIGKILL when its agent dies
    import os

    assert os.environ["LOCAL_RANK"] == "1"


def test_workers_pythonpath_is_the_checkout_root():
    """Launched workers get the checkout root on PYTHONPATH (it was training/ after the move into subpackages, which
    only an editable install hid)."""
    from training.launch.torchrun import REPO_ROOT

    assert (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "training" / "launch" / "torchrun.py").is_file()
