"""training.pretrain under torchrun: 2 CPU processes, DeepSpeed ZeRO-2, the tiny preset, ~20 steps.

Takes ~20 s once DeepSpeed's CPU comm op is compiled; the very first run on a machine adds
~45 s compiling it into ~/.cache/torch_extensions.
"""
from __future__ import annotations

import json

import pytest

from schemas.manifest import read_manifest, verify_outputs
from tests.fixtures import make_shards, make_tokenizer
from training.launch import launch_pretrain
from training.pretrain import PretrainConfig

pytestmark = pytest.mark.slow


def test_pretrain_two_processes_zero2(tmp_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    # 64 rows / 2 ranks / micro batch 4 = 8 batches per epoch per rank; 24 steps = 3 epochs, variants 0, 1, 0.
    cfg = PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "pretrain"), model="tiny",
                         steps=24, micro_batch_size=4, grad_accum=1, lr=3e-3, log_every=6, zero_stage=2, seed=0)
    out = launch_pretrain(cfg, nproc=2)

    manifest = read_manifest(out)
    verify_outputs(out)
    assert manifest["stage"] == "pretrain"
    assert manifest["counts"]["steps"] == 24
    assert manifest["counts"]["sequences"] == 24 * 4 * 2
    assert 0 < manifest["counts"]["tokens"] <= 24 * 4 * 2 * 32
    assert manifest["config"]["zero_stage"] == 2 and manifest["extra"]["world_size"] == 2
    assert [i["path"] for i in manifest["inputs"]] == [str(shards), str(tok)]
    assert manifest["inputs"][0]["manifest_sha256"]
    assert {"hf/config.json", "hf/model.safetensors", "hf/tokenizer.json", "metrics.json"} <= {
        o["path"] for o in manifest["outputs"]}

    ckpt = out / "checkpoints"
    assert (ckpt / "latest").read_text().strip() == "global_step24"
    assert sorted(p.name for p in (ckpt / "global_step24").glob("zero_pp_rank_*_optim_states.pt")) == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]

    model = AutoModelForMaskedLM.from_pretrained(out / "hf")
    tokenizer = AutoTokenizer.from_pretrained(out / "hf")
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size >= len(tokenizer)
    assert tokenizer.mask_token == "[MASK]" and tokenizer.pad_token_id == model.config.pad_token_id

    metrics = json.loads((out / "metrics.json").read_text())
    assert [p["step"] for p in metrics["loss_curve"]] == list(range(1, 25))
    assert metrics["world_size"] == 2
    assert metrics["last_loss"] < metrics["first_loss"] - 0.5, (metrics["first_loss"], metrics["last_loss"])
    assert (out / "tensorboard").is_dir()



def test_resume_after_a_crash_matches_the_uninterrupted_run(tmp_path):
    """Run 12 steps saving every 4. Then leave a copy of its output as a crash right after step
    4 would have (checkpoint global_step4 is `latest`, nothing after it, no manifest) and
    --resume it: weights, loss curve and the final checkpoint's loader state must equal the
    uninterrupted run's exactly (torch AdamW, per-rank dropout RNG restored)."""
    import shutil

    import torch
    from safetensors.torch import load_file

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=40, valid_rows=8)
    # 40 rows / 2 ranks / micro batch 4 = 5 batches per epoch: the resume point (step 4) is mid-epoch
    # and the run crosses two epoch boundaries after it.
    base = dict(shards=str(shards), tokenizer=str(tok), model="tiny", steps=12, micro_batch_size=4, lr=3e-3,
                log_every=4, zero_stage=2, seed=0, save_every=4, eval_batches=2, tensorboard=False)
    full = launch_pretrain(PretrainConfig(output=str(tmp_path / "full"), **base), nproc=2)
    assert sorted(p.name for p in (full / "checkpoints").glob("global_step*")) == [
        "global_step12", "global_step4", "global_step8"]

    crashed = tmp_path / "crashed"
    shutil.copytree(full / "checkpoints" / "global_step4", crashed / "checkpoints" / "global_step4")
    (crashed / "checkpoints" / "latest").write_text("global_step4")
    resumed = launch_pretrain(PretrainConfig(output=str(crashed), resume=True, **base), nproc=2)

    a, b = load_file(full / "hf" / "model.safetensors"), load_file(resumed / "hf" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:5]
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (full, resumed))
    assert mb["loss_curve"] == ma["loss_curve"] and mb["valid_loss"] == ma["valid_loss"]
    assert mb["resumed_from_step"] == 4 and ma["resumed_from_step"] is None
    assert read_manifest(resumed)["counts"]["tokens"] == read_manifest(full)["counts"]["tokens"]
    state = [torch.load(d / "checkpoints" / "global_step12" / "mp_rank_00_model_states.pt", weights_only=False)
             for d in (full, resumed)]
    assert state[0]["loader"] == state[1]["loader"] and state[0]["step"] == state[1]["step"] == 12


@pytest.mark.parametrize("objective,auto", [("causal", "AutoModelForCausalLM"), ("t5_span", "AutoModelForSeq2SeqLM")])
def test_pretrain_causal_and_t5_shards(tmp_path, objective, auto):
    """The same entry point on causal shards (byte-level BPE) trains a GPT-2 and on t5_span shards
    (unigram with sentinels) a T5, under ZeRO-2 on 2 processes; the exports load with the
    matching transformers Auto class and generate."""
    import transformers

    from tests.fixtures import OBJECTIVE_TOKENIZERS, make_objective_shards

    shards = make_objective_shards(tmp_path, objective)
    tok = tmp_path / OBJECTIVE_TOKENIZERS[objective][0]
    cfg = PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "pretrain"), model="tiny",
                         steps=20, micro_batch_size=4, lr=3e-3, log_every=10, zero_stage=2, seed=0, eval_batches=2)
    out = launch_pretrain(cfg, nproc=2)

    manifest = read_manifest(out)
    verify_outputs(out)
    assert manifest["counts"]["steps"] == 20 and manifest["config"]["zero_stage"] == 2
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["last_loss"] < metrics["first_loss"] - 0.5, (metrics["first_loss"], metrics["last_loss"])
    assert metrics["valid_loss"] is not None
    model = getattr(transformers, auto).from_pretrained(out / "hf")
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "hf")
    ids = tokenizer("a good movie", return_tensors="pt").input_ids
    generated = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert generated.shape[0] == 1 and generated.shape[1] >= 2


@pytest.mark.slow
def test_two_nodes_meet_through_a_c10d_rendezvous(tmp_path):
    """Two simulated nodes: the same `lmforge pretrain --nnodes 2` command run twice (one torchrun agent
    each, one process per node) on 127.0.0.1, sharing the file system; one world of 2 ranks."""
    import subprocess
    import sys
    from pathlib import Path

    from training.launch import free_port

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    out = tmp_path / "pretrain"
    cmd = [sys.executable, "-m", "lmforge.cli", "pretrain", "--shards", str(shards), "--tokenizer", str(tok),
           "--output", str(out), "--model", "tiny", "--steps", "8", "--micro-batch-size", "4", "--log-every", "4",
           "--nproc", "1", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    nodes = [subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    logs = [n.communicate(timeout=600)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], logs
    m = read_manifest(out)
    assert m["extra"]["world_size"] == 2 and m["counts"]["sequences"] == 8 * 4 * 2
    assert len(list(out.glob("launch-*.log"))) == 2  # one launch log per node

    # a second node count without an endpoint is refused before anything starts
    bad = subprocess.run(cmd[:-2], cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "need --rdzv-endpoint HOST:PORT" in bad.stderr
