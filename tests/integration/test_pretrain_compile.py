"""Compiled pretraining (training.pretraining.compiled) computes what eager pretraining computes, repeats itself, and resumes
exactly.

On the CPU, the tiny preset in bf16 (autocast, as a GPU runs): 50 steps compiled against 50 eager agree within
bf16's rounding; a compiled run resumed from its step-25 checkpoint continues the uninterrupted compiled run's
curve exactly (which needs compiled runs to be deterministic: training.pretraining.compiled leaves the embeddings eager); the
compiled regions neither break nor recompile after the first steps."""
from __future__ import annotations

import json

import pytest

from tests.fixtures import make_shards, make_tokenizer
from training.launch.torchrun import launch_pretrain
from training.pretraining.pretrain import PretrainConfig

pytestmark = pytest.mark.slow


def _curve(out):
    return [p["loss"] for p in json.loads((out / "metrics.json").read_text())["loss_curve"]]


def test_compiled_and_eager_curves_agree_and_compiled_resume_is_exact(tmp_path):
    import shutil

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=96, valid_rows=16)
    base = dict(shards=str(shards), tokenizer=str(tok), model="tiny", steps=50, micro_batch_size=4, lr=3e-3,
                log_every=5, seed=0, dropout=0.0, bf16=True, eval_batches=2, tensorboard=False, zero_stage=0)
    eager = launch_pretrain(PretrainConfig(output=str(tmp_path / "eager"), compile=False, **base), nproc=1)
    compiled = launch_pretrain(PretrainConfig(output=str(tmp_path / "compiled"), compile=True, save_every=25, **base),
                               nproc=1)
    a, b = _curve(eager), _curve(compiled)
    assert len(a) == len(b) == 50 and a[-1] < a[0] - 0.3
    worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    assert worst < 2e-2, worst  # bf16 keeps 8 bits of mantissa: 2^-8 = 0.4% per rounding
    m = json.loads((compiled / "metrics.json").read_text())
    comp = m["compile"]
    assert m["plan"]["compile"] and comp["graph_breaks"] == 0 and len(comp["regions"]) == 3  # 2 blocks and the head
    assert comp["steps_with_recompiles"] <= 1, comp  # the first validation compiles eval mode once

    crashed = tmp_path / "crashed"
    shutil.copytree(compiled / "checkpoints" / "global_step25", crashed / "checkpoints" / "global_step25")
    (crashed / "checkpoints" / "latest").write_text("global_step25")
    shutil.copy(compiled / "metrics.jsonl", crashed / "metrics.jsonl")
    resumed = launch_pretrain(PretrainConfig(output=str(crashed), compile=True, save_every=25, resume=True, **base),
                              nproc=1)
    assert _curve(resumed) == b  # steps 1-25 from the checkpoint, 26-50 computed again: bit for bit
