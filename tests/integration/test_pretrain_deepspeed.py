"""training.pretraining.pretrain under torchrun: 2 CPU processes, DeepSpeed ZeRO-2, the tiny preset, ~20 steps.

Each launch takes ~20 s once DeepSpeed's CPU comm op is compiled; the very first run on a machine adds
~45 s compiling it (common/cache.py `torch_extensions_dir`). The ZeRO-2 checks and the crash-resume test read one
shared run (the `zero2` fixture).
"""
from __future__ import annotations

import json

import pytest

from schemas.manifest import read_manifest, verify_outputs
from tests.fixtures import make_shards, make_tokenizer
from training.launch.torchrun import launch_pretrain
from training.pretraining.pretrain import PretrainConfig

pytestmark = pytest.mark.slow


# The shared baseline: one ZeRO-2 run on 2 processes that the ZeRO-2 checks read and the crash-resume test resumes
# a damaged copy of. 40 rows / global batch 8 = 5 steps per epoch: the resume point (step 4) is mid-epoch and the
# run crosses two epoch boundaries after it; 12 steps = 2.4 epochs, mask variants 0, 1, 0.
BASE = dict(model="tiny", steps=12, micro_batch_size=4, lr=3e-3, log_every=4, zero_stage=2, seed=0, save_every=4,
            eval_batches=2)


@pytest.fixture(scope="module")
def zero2(tmp_path_factory):
    """(tokenizer, shards, the uninterrupted run's output), shared by the tests that read or resume it."""
    tmp = tmp_path_factory.mktemp("zero2")
    tok = make_tokenizer(tmp / "tokenizer")
    shards = make_shards(tmp / "shards", tok, seq_len=32, num_variants=2, train_rows=40, valid_rows=8)
    out = launch_pretrain(PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp / "full"), **BASE),
                          nproc=2)
    return tok, shards, out


def test_pretrain_two_processes_zero2(zero2):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tok, shards, out = zero2
    steps = BASE["steps"]
    manifest = read_manifest(out)
    verify_outputs(out)
    assert manifest["stage"] == "pretrain"
    assert manifest["counts"]["steps"] == steps
    assert manifest["counts"]["sequences"] == steps * 4 * 2
    assert 0 < manifest["counts"]["tokens"] <= steps * 4 * 2 * 32
    assert manifest["config"]["zero_stage"] == 2 and manifest["extra"]["world_size"] == 2
    assert [i["path"] for i in manifest["inputs"]] == [str(shards), str(tok)]
    assert manifest["inputs"][0]["manifest_sha256"]
    assert {"hf/config.json", "hf/model.safetensors", "hf/tokenizer.json", "metrics.json"} <= {
        o["path"] for o in manifest["outputs"]}

    ckpt = out / "checkpoints"
    assert (ckpt / "latest").read_text().strip() == f"global_step{steps}"
    assert sorted(p.name for p in (ckpt / f"global_step{steps}").glob("zero_pp_rank_*_optim_states.pt")) == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]

    model = AutoModelForMaskedLM.from_pretrained(out / "hf")
    tokenizer = AutoTokenizer.from_pretrained(out / "hf")
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size >= len(tokenizer)
    assert tokenizer.mask_token == "[MASK]" and tokenizer.pad_token_id == model.config.pad_token_id

    metrics = json.loads((out / "metrics.json").read_text())
    assert [p["step"] for p in metrics["loss_curve"]] == list(range(1, steps + 1))
    assert metrics["world_size"] == 2 and metrics["attn_implementation"] == "sdpa" and metrics["attention"] == "row" and metrics["precision"] == "fp32"
    assert metrics["last_loss"] < metrics["first_loss"] - 0.5, (metrics["first_loss"], metrics["last_loss"])
    geometry = metrics["token_embeddings"]  # a dozen steps leave the rows near their random start
    assert geometry["rows"] == model.config.vocab_size and not geometry["collapsed"], geometry
    assert (out / "tensorboard").is_dir()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [4, 8, 12] and [r["kind"] for r in records].count("valid") == 1
    for r in train:
        assert {"loss", "mlm_accuracy", "tokens_per_s", "samples_per_s", "lr", "grad_norm", "peak_rss_mb",
                "elapsed_s"} <= r.keys(), r
        assert 0 <= r["mlm_accuracy"] <= 1 and r["grad_norm"] > 0 and r["peak_rss_mb"] > 50 and r["tokens_per_s"] > 0
    assert train[-1]["mlm_accuracy"] > train[0]["mlm_accuracy"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(out / "tensorboard"))
    ea.Reload()
    assert {"train/loss", "train/mlm_accuracy", "train/grad_norm", "train/tokens_per_s", "valid/loss"} <= set(
        ea.Tags()["scalars"])


def test_resume_after_a_crash_matches_the_uninterrupted_run(zero2, tmp_path):
    """The shared run saved every 4 steps. A copy of its output as a crash after step 12's save would
    have left it, with damaged checkpoints: global_step12 (what `latest` names) truncated and global_step8 with one
    bit flipped. --resume must pass over both, naming them, continue from global_step4 and end with weights,
    loss curve and loader state equal to the uninterrupted run's (torch AdamW, per-rank dropout RNG restored)."""
    import shutil

    import torch
    from safetensors.torch import load_file

    tok, shards, full = zero2
    assert sorted(p.name for p in (full / "checkpoints").glob("global_step*")) == [
        "global_step12", "global_step4", "global_step8"]
    assert all((full / "checkpoints" / t / "lmforge-sha256.json").exists() for t in ("global_step4", "global_step12"))

    crashed = tmp_path / "crashed"
    shutil.copytree(full / "checkpoints", crashed / "checkpoints")
    newest = crashed / "checkpoints" / "global_step12" / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    flipped = crashed / "checkpoints" / "global_step8" / "mp_rank_00_model_states.pt"
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    resumed = launch_pretrain(PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(crashed), resume=True,
                                             **BASE), nproc=2)
    log = (crashed / "launch.log").read_text()
    assert "skipping checkpoint global_step12" in log and "zero_pp_rank_1_mp_rank_00_optim_states.pt does not match" in log
    assert "skipping checkpoint global_step8" in log and "resumed from" in log and "at step 4" in log

    a, b = load_file(full / "hf" / "model.safetensors"), load_file(resumed / "hf" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:5]
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (full, resumed))
    assert mb["loss_curve"] == ma["loss_curve"] and mb["valid_loss"] == ma["valid_loss"]
    assert mb["resumed_from_step"] == 4 and ma["resumed_from_step"] is None
    assert read_manifest(resumed)["counts"]["tokens"] == read_manifest(full)["counts"]["tokens"]
    state = [json.loads((d / "checkpoints" / "global_step12" / "lmforge-state.json").read_text()) for d in (full, resumed)]
    assert state[0]["loader"] == state[1]["loader"] and state[0]["step"] == state[1]["step"] == 12


def _crash_after(run, step: int, to):
    """A copy of `run` as a crash right after checkpoint `step` would leave it: that tag, `latest`, no later tag,
    no manifest, and the metrics.jsonl lines written up to then and beyond (the resume drops the latter)."""
    import shutil

    shutil.copytree(run / "checkpoints" / f"global_step{step}", to / "checkpoints" / f"global_step{step}")
    (to / "checkpoints" / "latest").write_text(f"global_step{step}")
    shutil.copy(run / "metrics.jsonl", to / "metrics.jsonl")
    return to


class _Payload:
    """Pickles as a call that writes `marker`: what a planted checkpoint file would run when unpickled."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def test_a_planted_checkpoint_runs_no_code_on_resume_or_conversion(zero2, tmp_path):
    """Issue 50: a run folder's checkpoint is a pickle whoever can write the folder can replace, digests and all.
    A copy of the shared run's global_step4 with rank 0's optimizer file holding its real state plus a payload,
    its digests rewritten. The resume's load (pretrain.restore, with DeepSpeed's own checkpoint engine doing the
    torch.load its engine does) stops with one line naming the file; the universal conversion that another world
    size runs (DeepSpeed's ds_to_universal, in its own process) refuses it too; the payload's marker never
    appears. The real checkpoints of the resume tests above and below load through the same rule."""
    from types import SimpleNamespace

    import torch
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

    from training.pretraining import checkpoint
    from training.pretraining.pretrain import restore
    from training.pretraining.safe_load import weights_only_loads

    tok, shards, full = zero2
    planted = _crash_after(full, 4, tmp_path / "planted")
    victim = planted / "checkpoints" / "global_step4" / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    marker = tmp_path / "PAYLOAD_RAN"
    state = torch.load(victim, weights_only=False)  # the test's own, trusted copy
    state["planted"] = _Payload(str(marker))
    torch.save(state, victim)
    checkpoint.write_digests(victim.parent)
    assert checkpoint.verify_tag(victim.parent) is None  # the digests pass: they are no signature

    engine = SimpleNamespace(load_checkpoint=lambda folder, tag: (TorchCheckpointEngine().load(str(victim)), None))
    s = SimpleNamespace(resumed=SimpleNamespace(load_tag="global_step4", state={}), engine=engine,
                        ckpt_dir=planted / "checkpoints")
    with pytest.raises(SystemExit) as e:
        restore(s, None)
    assert str(e.value).startswith(f"pretrain --resume: {victim}: not loaded, it holds more than weights")
    assert "(Unsupported global: GLOBAL exec)" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(RuntimeError, match="not loaded, it holds more than weights"):
        checkpoint.to_universal(planted / "checkpoints", "global_step4", workers=1)
    assert not marker.exists()
    with weights_only_loads():  # the file as DeepSpeed wrote it loads under the rule
        assert "optimizer_state_dict" in TorchCheckpointEngine().load(str(full / "checkpoints" / "global_step4" / victim.name))


@pytest.mark.parametrize("before,after", [(2, 1), (1, 2)])
def test_resume_on_another_world_size_continues_the_loss_curve(tmp_path, before, after):
    """A checkpoint saved on `before` processes resumes on `after` through DeepSpeed's universal checkpoint. The
    global batch stays 8 (2 x 4, or 1 x 4 with 2 accumulation steps), the loader continues at the same sample,
    so steps 5-8 see the same data as the uninterrupted run; their losses agree within 0.05 (the per-micro-batch
    loss means and the reduction order differ, nothing else; no dropout)."""
    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    base = dict(shards=str(shards), tokenizer=str(tok), model="tiny", steps=8, micro_batch_size=4, lr=3e-3,
                log_every=2, zero_stage=2, seed=0, save_every=4, eval_batches=2, dropout=0.0, tensorboard=False)
    shape = {2: {}, 1: {"grad_accum": 2}}
    full = launch_pretrain(PretrainConfig(output=str(tmp_path / "full"), **base, **shape[before]), nproc=before)
    crashed = _crash_after(full, 4, tmp_path / "crashed")
    resumed = launch_pretrain(PretrainConfig(output=str(crashed), resume=True, **base, **shape[after]), nproc=after)

    assert f"saved on {before} processes, this run has {after}" in (crashed / "launch.log").read_text()
    assert (crashed / "checkpoints" / "global_step4_universal" / "lmforge-sha256.json").exists()
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (full, resumed))
    assert mb["world_size"] == after and mb["resumed_from_world_size"] == before
    assert mb["loss_curve"][:4] == ma["loss_curve"][:4]  # carried over from the checkpoint
    for x, y in zip(ma["loss_curve"][4:], mb["loss_curve"][4:], strict=True):
        assert x["step"] == y["step"] and x["lr"] == pytest.approx(y["lr"]) and abs(x["loss"] - y["loss"]) < 0.05, (x, y)
    assert abs(ma["valid_loss"] - mb["valid_loss"]) < 0.05
    assert read_manifest(resumed)["counts"]["sequences"] == read_manifest(full)["counts"]["sequences"] == 8 * 8
    steps = [(r["kind"], r["step"]) for r in map(json.loads, (crashed / "metrics.jsonl").read_text().splitlines())]
    assert [s for k, s in steps if k == "train"] == [2, 4, 6, 8]  # the dead run's lines after step 4 were dropped


def test_zero3_from_a_config_file_exports_the_gathered_weights(tmp_path):
    """--deepspeed-config infra/deepspeed/zero3_cpu.json: ZeRO-3 on 2 processes (parameters partitioned as the
    model is built, through HfDeepSpeedConfig; the sinusoidal position start written through a gather), then the
    export gathers them: the hf/ model loads with every weight and reproduces the run's own validation loss on the
    same batches."""
    from pathlib import Path

    import torch
    from transformers import AutoModelForMaskedLM

    from training.models.model import SparseMLM, sinusoid_table
    from training.pretraining.data import RankLoader, ShardSet

    root = Path(__file__).resolve().parents[2]
    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    cfg = PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "z3"), model="tiny", steps=8,
                         lr=3e-3, log_every=4, seed=0, eval_batches=2, eval_every=4, position_init="sinusoidal",
                         deepspeed_config=str(root / "infra" / "deepspeed" / "zero3_cpu.json"))
    assert cfg.zero_stage == 3 and cfg.micro_batch_size == 4  # from the file
    out = launch_pretrain(cfg, nproc=2)
    m = read_manifest(out)
    assert m["extra"]["deepspeed"]["zero_optimization"]["stage3_max_live_parameters"] == 100000000
    metrics = json.loads((out / "metrics.json").read_text())
    model, info = AutoModelForMaskedLM.from_pretrained(out / "hf", output_loading_info=True)
    assert not any(info.values()), info
    assert metrics["num_parameters"] == sum(p.numel() for p in model.parameters())
    # the sinusoidal start was written into the partitioned table: rows past the 32-token rows never train
    want = sinusoid_table(512, 64)
    want *= 0.02 / want.pow(2).mean().sqrt()
    torch.testing.assert_close(model.bert.embeddings.position_embeddings.weight.detach()[64:], want[64:].float(),
                               rtol=1e-3, atol=1e-6)

    s = ShardSet.open(shards)
    sums = [0.0, 0]
    mlm = SparseMLM(model.eval())
    for rank in range(2):  # the run's validation: each rank's first 2 batches of 4
        for i, batch in enumerate(RankLoader(s.read("valid"), rank, 2, 4, 0, s.num_variants).epoch(0)):
            if i == 2:
                break
            with torch.no_grad():
                loss = mlm(**batch).item()
            sums[0] += loss * mlm.last_counted.item()
            sums[1] += mlm.last_counted.item()
    assert sums[0] / sums[1] == pytest.approx(metrics["valid_loss"], abs=1e-4)
    valid = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"valid"' in line]
    assert [v["step"] for v in valid] == [4, 8]

    # continued pretraining under ZeRO-3: from_pretrained builds the model partitioned (HfDeepSpeedConfig first)
    # and every weight of the export is loaded: the first loss is near the exported model's, not a fresh init's
    cont = launch_pretrain(PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "z3-cont"),
                                          init_from=str(out / "hf"), steps=2, lr=1e-4, log_every=1, seed=0,
                                          eval_batches=0, zero_stage=3, micro_batch_size=4), nproc=2)
    first = json.loads((cont / "metrics.json").read_text())["loss_curve"][0]["loss"]
    assert "every weight loaded" in (cont / "launch.log").read_text()
    assert abs(first - metrics["valid_loss"]) < 0.5 < metrics["first_loss"] - first, (first, metrics)


def test_bf16_cosine_on_one_process_uses_every_core_and_exports_the_fp32_master_weights(tmp_path):
    """bf16 under ZeRO-1 and the cosine schedule: the loss falls, the learning rates are the schedule's, one
    process gets every core, and the export is the optimizer's fp32 master weights (DeepSpeed's own
    zero_to_fp32 reading of the final checkpoint), not the bf16 module upcast (the old export)."""
    import torch
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    from safetensors.torch import load_file

    from training.runtime.recipe import lr_factor

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    cfg = PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "bf16"), model="tiny", steps=16,
                         micro_batch_size=8, lr=3e-3, log_every=4, seed=0, bf16=True, zero_stage=1, eval_batches=2,
                         schedule="cosine")
    out = launch_pretrain(cfg, nproc=1)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 1 and metrics["last_loss"] < metrics["first_loss"] - 0.3
    warmup = int(0.06 * 16)
    assert [p["lr"] for p in metrics["loss_curve"]] == pytest.approx([3e-3 * lr_factor("cosine", s, warmup, 16)
                                                                      for s in range(16)])
    assert "AdamW, cosine schedule" in (out / "launch.log").read_text()
    assert read_manifest(out)["extra"]["deepspeed"]["bf16"] == {"enabled": True, "check_grad_overflow": False}
    assert metrics["precision"] == "bf16"
    import os

    assert metrics["torch_threads"] == len(os.sched_getaffinity(0))  # one process gets every core

    exported = load_file(out / "hf" / "model.safetensors")
    assert {t.dtype for t in exported.values()} == {torch.float32}
    masters = get_fp32_state_dict_from_zero_checkpoint(str(out / "checkpoints"), tag="global_step16")
    masters = {k.removeprefix("mlm."): v for k, v in masters.items()}
    compared = rounded_away = 0
    for name, value in exported.items():
        if name not in masters:  # the tied decoder weight is saved once, under the embedding's name
            continue
        assert torch.equal(value, masters[name].float()), name
        compared += 1
        rounded_away += not torch.equal(value, value.bfloat16().float())
    assert compared >= 20 and rounded_away >= compared // 2, (compared, rounded_away)


def test_lamb_trains_in_fp32_without_zero_and_is_refused_where_zero_flattens(tmp_path):
    """LAMB's trust ratio is per tensor: at ZeRO-0 (fp32, or bf16 as torch autocast) the client optimizer sees the
    model's tensors and trains; under ZeRO-1/2 (bf16 or not) the config is refused before anything launches."""
    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    for refused in ({"zero_stage": 2}, {"zero_stage": 1, "bf16": True}):
        with pytest.raises(ValueError, match="lamb needs per-tensor norms"):
            PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "x"), optimizer="lamb",
                           **refused)
    cfg = PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "lamb"), model="tiny", steps=12,
                         micro_batch_size=8, lr=3e-3, log_every=4, seed=0, zero_stage=0, eval_batches=0,
                         optimizer="lamb")
    out = launch_pretrain(cfg, nproc=2)
    metrics = json.loads((out / "metrics.json").read_text())
    assert "Lamb" in (out / "launch.log").read_text()
    assert metrics["last_loss"] < metrics["first_loss"] - 0.2  # 5.58 -> 5.29 when written


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

    from training.launch.torchrun import free_port

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


def _tree(pid: int) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


@pytest.mark.slow
def test_kill_9_of_the_launcher_takes_every_worker_within_5_seconds(tmp_path):
    """`lmforge pretrain` killed with SIGKILL (it cannot clean up): torchrun's agent and both workers, which torch
    starts in a session of their own, must be gone within 5 s (parent-death signals, training.launch.torchrun)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import psutil

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    out = tmp_path / "pretrain"
    cmd = [sys.executable, "-m", "lmforge.cli", "pretrain", "--shards", str(shards), "--tokenizer", str(tok),
           "--output", str(out), "--model", "tiny", "--steps", "100000", "--micro-batch-size", "4", "--log-every", "5",
           "--nproc", "2"]
    launcher = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text():
            assert launcher.poll() is None and time.time() < deadline, "training never started"
            time.sleep(0.5)
        procs = _tree(launcher.pid)
        cmdlines = {p: " ".join(psutil.Process(p).cmdline()) for p in procs}
        workers = [p for p, c in cmdlines.items() if "training.pretraining.pretrain" in c and "torch.distributed.run" not in c]
        assert len(workers) == 2, cmdlines
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        t0 = time.time()
        while time.time() - t0 < 5 and any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                           for p in procs):
            time.sleep(0.1)
        alive = [p for p in procs if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        assert not alive, f"still running {time.time() - t0:.1f} s after kill -9: {alive}"
    finally:
        for p in [launcher.pid, *(_tree(launcher.pid) if psutil.pid_exists(launcher.pid) else [])]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_two_nodes_through_a_deepspeed_hostfile_and_a_clear_error_without_a_shared_output(tmp_path):
    """The DeepSpeed launcher route: a hostfile of two simulated nodes (localhost and 127.0.0.1, one slot each),
    each node running `lmforge pretrain --hostfile H --node-rank i` (no ssh). Then two static nodes
    (--node-rank, --master-addr) given different output directories, as nodes without a shared file system
    would have: both stop with the shared-file-system message instead of training apart."""
    import subprocess
    import sys
    from pathlib import Path

    from training.launch.torchrun import free_port

    root = Path(__file__).resolve().parents[2]
    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64, valid_rows=16)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=1\n127.0.0.1 slots=1\n")
    base = [sys.executable, "-m", "lmforge.cli", "pretrain", "--shards", str(shards), "--tokenizer", str(tok),
            "--model", "tiny", "--steps", "6", "--micro-batch-size", "4", "--log-every", "3"]

    def run_nodes(cmds):
        nodes = [subprocess.Popen(c, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in cmds]
        return [(n.communicate(timeout=600)[0], n.returncode) for n in nodes]

    out = tmp_path / "ds"
    port = str(free_port())
    logs = run_nodes([[*base, "--output", str(out), "--hostfile", str(hostfile), "--node-rank", str(r),
                       "--master-addr", "127.0.0.1", "--master-port", port] for r in range(2)])
    assert [code for _, code in logs] == [0, 0], logs
    m = read_manifest(out)
    assert m["extra"]["world_size"] == 2 and m["counts"]["sequences"] == 6 * 4 * 2
    assert "deepspeed.launcher.runner" in next(out.glob("launch-*.log")).read_text().splitlines()[0]

    port = str(free_port())
    logs = run_nodes([[*base, "--output", str(tmp_path / f"node{r}"), "--nproc", "1", "--nnodes", "2",
                       "--node-rank", str(r), "--master-addr", "127.0.0.1", "--master-port", port] for r in range(2)])
    assert all(code != 0 for _, code in logs), logs
    assert any("is not the same directory on every process" in text for text, _ in logs), logs


@pytest.mark.slow
def test_a_second_run_into_a_busy_output_stops_before_writing(tmp_path):
    """Two `lmforge pretrain` runs into one --output would interleave checkpoints: rank 0 holds the folder's
    stage lock (as every stage does) and a run that finds it taken stops on every rank, naming the holder."""
    import subprocess
    import sys
    from pathlib import Path

    from schemas.manifest import stage_lock

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=32, valid_rows=8)
    out = tmp_path / "pretrain"
    cmd = [sys.executable, "-m", "lmforge.cli", "pretrain", "--shards", str(shards), "--tokenizer", str(tok),
           "--output", str(out), "--model", "tiny", "--steps", "2", "--micro-batch-size", "4", "--nproc", "2"]
    with stage_lock(out, what="the first run"):
        busy = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert busy.returncode != 0
    assert "another process is writing this stage directory" in busy.stderr and "the first run" in busy.stderr
    assert not (out / "checkpoints").exists() and not (out / "manifest.json").exists()
    done = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # free again once the holder is gone
    assert read_manifest(out)["counts"]["steps"] == 2
