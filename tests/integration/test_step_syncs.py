"""The training step makes no host sync and no collective of its own between two log steps.

On a GPU every `.item()`, `.tolist()`, `.cpu()` or tensor-as-bool waits for the device queue to drain, and
the old loop did four of them plus an all-reduce every micro-step. CPU tensors cannot show the stall, but
they can show the calls: a spy replaces those Tensor methods and torch.distributed's collectives in a
1-process pretraining run (a subprocess, so the patches die with it), attributes each call to the first
frame outside torch (lmforge's code, DeepSpeed's or another library's) and to the phase it happened in:
"step" from the moment a training batch is handed out (training.pretraining.feed.DeviceFeed) until the next log step's
StepStats.take_window, "log" from there, "validate" inside validation. lmforge's calls in the step phase
must be none.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures import make_shards, make_tokenizer
from training.launch.torchrun import free_port, worker_path

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

SPY = textwrap.dedent(r'''
    import json, os, sys
    import torch
    import torch.distributed as dist

    ROOT, OUT = sys.argv[1], sys.argv[2]
    OURS = tuple(os.path.join(ROOT, d) + os.sep for d in ("training", "schemas", "lmforge", "pipelines"))
    TORCH = os.path.dirname(torch.__file__) + os.sep
    phase = ["setup"]
    events = []

    def who():
        f = sys._getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith(OURS):
                return "lmforge", f"{os.path.relpath(name, ROOT)}:{f.f_code.co_name}"
            if not name.startswith(TORCH) and name != "<string>":
                return "other", f"{name.rsplit('site-packages/', 1)[-1]}:{f.f_code.co_name}"
            f = f.f_back
        return "other", "?"

    def spy(owner, name, kind):
        orig = getattr(owner, name)

        def wrapper(*args, **kwargs):
            side, where = who()
            device = next((str(a.device) for a in args if isinstance(a, torch.Tensor)), None)
            events.append({"phase": phase[0], "side": side, "where": where, "call": name, "kind": kind,
                           "device": device})
            return orig(*args, **kwargs)
        setattr(owner, name, wrapper)

    for name in ("item", "tolist", "cpu", "__bool__", "__float__", "__int__"):
        spy(torch.Tensor, name, "sync")
    for name in ("all_reduce", "broadcast", "all_gather", "all_gather_object", "broadcast_object_list",
                 "reduce_scatter_tensor", "all_gather_into_tensor", "barrier"):
        spy(dist, name, "collective")

    import training.pretraining.feed
    import training.pretraining.step_stats

    iterate = training.pretraining.feed.DeviceFeed.__iter__

    def feed_iter(self):
        for item in iterate(self):
            if phase[0] != "validate":
                phase[0] = "step"
            yield item
    training.pretraining.feed.DeviceFeed.__iter__ = feed_iter
    import training.pretraining.pretrain

    validate = training.pretraining.pretrain.validate

    def validating(*args, **kwargs):
        phase[0] = "validate"
        try:
            return validate(*args, **kwargs)
        finally:
            phase[0] = "log"
    training.pretraining.pretrain.validate = validating
    take = training.pretraining.step_stats.StepStats.take_window

    def take_window(self):
        phase[0] = "log"
        return take(self)
    training.pretraining.step_stats.StepStats.take_window = take_window

    from training.pretraining.pretrain import main
    try:
        main(sys.argv[3:])
    finally:
        with open(OUT, "w") as f:
            json.dump(events, f)
''')


@pytest.mark.parametrize("zero_stage", ["2", "auto"])
def test_no_host_sync_or_collective_of_lmforge_between_log_steps(tmp_path, zero_stage):
    """ZeRO-2 (DeepSpeed clips), and the plan's choice for one process (ZeRO-0: lmforge clips inside the step)."""
    tok = make_tokenizer(tmp_path / "tokenizer")
    # ZeRO-2 on rows with padding; the plan's choice on full rows (the HF mask check below)
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16,
                         padded_every=3 if zero_stage == "2" else 0)
    events_file = tmp_path / "events.json"
    env = {**os.environ, "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "DS_ACCELERATOR": "cpu", "LMFORGE_DIST_BACKEND": "gloo",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "PATH": worker_path()}
    # 12 steps, grad_accum 2 (24 micro-batches), a log record every 4 steps: 3 log steps
    argv = ["--shards", str(shards), "--tokenizer", str(tok), "--output", str(tmp_path / "out"), "--model", "tiny",
            "--steps", "12", "--micro-batch-size", "4", "--grad-accum", "2", "--log-every", "4", "--eval-batches", "2",
            "--zero-stage", zero_stage, "--no-tensorboard"]
    done = subprocess.run([sys.executable, "-c", SPY, str(ROOT), str(events_file), *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    events = json.loads(events_file.read_text())
    ours_in_step = [e for e in events if e["phase"] == "step" and e["side"] == "lmforge"]
    assert ours_in_step == [], ours_in_step[:10]
    # transformers' mask builder asks mask.all() of a mask it is given (a sync on a GPU); packed rows with no
    # padding reach the model without one (training.pretraining.setup.without_full_mask)
    hf_mask = [e for e in events if e["phase"] == "step" and "masking_utils" in e["where"]]
    assert (hf_mask == []) == (zero_stage == "auto"), hf_mask[:5]  # padded rows keep their mask, and its check
    # the spy sees what it should: lmforge's reads and collectives at the log steps (3 windows: one all-reduce
    # of the stacked steps and one of the peak RSS each), every collective tensor on the engine's device
    log_collectives = [e for e in events if e["phase"] == "log" and e["side"] == "lmforge" and e["kind"] == "collective"]
    assert sum(e["where"].endswith("step_stats.py:flush") for e in log_collectives) >= 3, log_collectives
    assert {e["device"] for e in events if e["kind"] == "collective" and e["device"]} == {"cpu"}
    assert any(e["where"].endswith("step_stats.py:flush") and e["call"] == "tolist" for e in events)
