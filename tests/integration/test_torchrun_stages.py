"""Stages other than pretraining under the launcher (training.launch.torchrun), each a real `lmforge` process
with 2 CPU processes over gloo: data-parallel fine-tuning and distillation against their 1-process runs, and
`lmforge doctor --cpu-run`. Moved here from tests/unit (their pure parts stay there) so that `make test-fast`
starts no multi-process job."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from schemas.finetune import FinetuneMetrics
from schemas.manifest import Manifest, read_manifest, verify_outputs, write_manifest
from tests.fixtures import make_shards, make_tokenizer, tiny_bert_dir
from tests.unit.test_finetune_run import split_reviews
from training.doctor import node as doctor
from training.models.export import load_tokenizer, save_hf
from training.models.model import bert_config, build_model, preset
from training.pretraining.data import ShardSet

pytestmark = pytest.mark.slow
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU report is checked on a machine without CUDA")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_bert_dir(tmp_path_factory.mktemp("model"))



def test_data_parallel_finetune_under_the_launcher_matches_one_process(tmp_path, model_dir):
    """`lmforge finetune --nproc 2`: torchrun, each process half of every batch, gradients summed, rank 0 writing.
    With dropout off the two processes' update is the one process's up to float rounding, so the scores agree."""
    import subprocess
    import sys

    _, data = split_reviews(tmp_path / "reviews.jsonl", 300)
    scores = {}
    for n in (1, 2):
        out = tmp_path / f"ft{n}"
        r = subprocess.run([sys.executable, "-m", "lmforge.cli", "finetune", "--model", str(model_dir), "--data",
                            str(data), "--output", str(out), "--epochs", "2", "--batch-size", "16", "--lr", "1e-3",
                            "--max-length", "48", "--seeds", "1", "--init", "pretrained", "--dropout", "0",
                            "--nproc", str(n)], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        m = FinetuneMetrics.read(out / "metrics.json")
        scores[n] = m.rows["pretrained"].scores["validation"]["accuracy"].mean
        verify_outputs(out)
    import re

    log = (tmp_path / "ft2" / "launch.log").read_text()
    assert len(re.findall(r"^finetune: \w+, [\d,]+ train", log, flags=re.M)) == 1  # rank 0 speaks, once
    assert abs(scores[1] - scores[2]) <= 0.05, scores

def test_distill_data_parallel_under_the_launcher_follows_the_single_process_run(tmp_path):
    """`lmforge distill --nproc 2` runs under torchrun (training.launch.torchrun) with the batch split over 2 processes and
    gradients summed over the processes, each loss scaled by its share of the batch: with dropout off, its loss curve follows the 1-process run's with the same global batch."""
    import subprocess
    import sys
    from pathlib import Path

    from transformers import BertConfig

    tok_dir = make_tokenizer(tmp_path / "tokenizer")
    shards_dir = make_shards(tmp_path / "shards", tok_dir, seq_len=32, num_variants=2, train_rows=48, valid_rows=8)
    shards = ShardSet.open(shards_dir)
    torch.manual_seed(0)
    c = bert_config(preset("tiny"), shards.vocab_size, shards.pad_id, shards.seq_len).to_dict()
    c.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    teacher = build_model(BertConfig(**{k: v for k, v in c.items() if k not in ("model_type", "transformers_version")}))
    teacher_hf = tmp_path / "pretrain" / "hf"
    save_hf(teacher, load_tokenizer(tok_dir), teacher_hf)
    write_manifest(teacher_hf.parent, Manifest(stage="pretrain", config={}))
    curves = {}
    for n in (1, 2):
        out = tmp_path / f"d{n}"
        r = subprocess.run([sys.executable, "-m", "lmforge.cli", "distill", "--teacher", str(teacher_hf.parent),
                            "--shards", str(shards_dir), "--output", str(out), "--steps", "6", "--batch-size", "8",
                            "--log-every", "3", "--eval-batches", "1", "--nproc", str(n)],
                           cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["world_size"] == n and read_manifest(out)["counts"]["sequences"] == 6 * 8
        curves[n] = [p["loss"] for p in metrics["loss_curve"]]
    assert (tmp_path / "d2" / "launch.log").exists()
    assert all(abs(a - b) < 0.05 for a, b in zip(curves[1], curves[2], strict=True)), curves

@no_cuda
def test_cpu_run_pretrains_two_processes(tmp_path):
    """--cpu-run: shards from the bundled sample through the real stages, 5 steps on 2 CPU processes."""
    report = doctor.run_doctor(tmp_path, cpu_run=True)
    check = report["checks"]["pretrain_cpu"]
    assert report["verdict"] == "ok" and check["status"] == "ok", check
    (run,) = check["runs"]
    assert run["world"] == 2 and run["steps"] == 5 and run["tokens_per_s"] > 0
    assert math.isfinite(run["last_loss"]) and run["mfu"]["mfu"] is None
    assert (tmp_path / "work" / "data" / "shards-64" / "manifest.json").exists()
