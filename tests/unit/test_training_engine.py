"""The training engine's pure parts: schedules and optimizers (training.runtime.recipe), checkpoint digests and the
choice of a good tag (training.pretraining.checkpoint), metrics.jsonl and TensorBoard (training.runtime.telemetry), presets and
positions (training.models.model), multi-node commands (training.launch.torchrun) and the resume check across world sizes."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import pytest
import torch

from training.pretraining import checkpoint
from training.runtime.recipe import (
    build_optimizer,
    check_optimizer,
    fused_op_loads,
    lr_factor,
    optimizer_choice,
    param_groups,
    schedule_fn,
)

# ---- schedules and optimizers ---------------------------------------------------------------------


def test_linear_schedule_is_transformers_one_term_for_term():
    from transformers import get_linear_schedule_with_warmup

    p = torch.nn.Parameter(torch.zeros(1))
    ours = torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD([p], lr=1.0), schedule_fn("linear", 6, 100))
    theirs = get_linear_schedule_with_warmup(torch.optim.SGD([p], lr=1.0), 6, 100)
    for _ in range(100):
        assert ours.get_last_lr() == theirs.get_last_lr()
        ours.optimizer.step(), theirs.optimizer.step()
        ours.step(), theirs.step()


@pytest.mark.parametrize("schedule", ["linear", "cosine", "inverse_sqrt"])
def test_every_schedule_warms_up_then_decays(schedule):
    f = [lr_factor(schedule, s, 10, 100) for s in range(101)]
    assert f[0] == 0 and f[5] == pytest.approx(0.5) and f[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[10:], f[11:]))  # non-increasing after the warm-up
    if schedule == "inverse_sqrt":
        assert f[40] == pytest.approx(math.sqrt(10 / 40)) and f[100] > 0  # open-ended
    else:
        assert f[100] == pytest.approx(0.0, abs=1e-12)
    if schedule == "cosine":
        assert f[55] == pytest.approx(0.5)  # half-way through the decay
    with pytest.raises(ValueError, match="schedule must be one of"):
        lr_factor("step", 1, 1, 2)


def test_optimizer_choice_needs_no_compiler_and_lamb_trains_here():
    # AdamW: torch's fused kernel everywhere (DeepSpeed's FusedAdam JIT-compiles with nvcc: the pinned deepspeed
    # ships no prebuilt ops); LAMB: DeepSpeed's FusedLamb on CUDA only where its op loads, else pytorch-optimizer's
    assert optimizer_choice("adamw", "cuda") == optimizer_choice("adamw", "cpu") == "torch.optim.AdamW(fused)"
    assert optimizer_choice("lamb", "cuda", fused_lamb=True) == "deepspeed.ops.lamb.FusedLamb"
    assert optimizer_choice("lamb", "cuda", fused_lamb=False) == "pytorch_optimizer.Lamb"
    assert optimizer_choice("lamb", "cuda") == "pytorch_optimizer.Lamb"  # here: no CUDA, so the op cannot load
    assert not fused_op_loads("FusedLambBuilder") and not fused_op_loads("NoSuchBuilder")
    assert build_optimizer("adamw", param_groups(torch.nn.Linear(2, 2), 0.01), lr=1e-3).defaults["fused"] is True
    with pytest.raises(ValueError, match="lamb needs per-tensor norms"):
        check_optimizer("lamb", zero_stage=1, fp16=False)
    with pytest.raises(ValueError, match="lamb needs per-tensor norms"):
        check_optimizer("lamb", zero_stage=0, fp16=True)
    check_optimizer("lamb", zero_stage=0, fp16=False)
    check_optimizer("adamw", zero_stage=3, fp16=True)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        optimizer_choice("sgd", "cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1))
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    opt = build_optimizer("lamb", param_groups(model, 0.01), lr=1e-2)
    assert type(opt).__name__ == "Lamb" and [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    first = None
    for _ in range(50):
        loss = torch.nn.functional.mse_loss(model(x), y)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.7 * first


# ---- checkpoints ------------------------------------------------------------------------------------


def _tag(root, step, files=None):
    d = root / checkpoint.tag_for(step)
    d.mkdir(parents=True)
    for name, data in (files or {"mp_rank_00_model_states.pt": b"weights" * 100, "rng_rank0.pt": b"rng"}).items():
        (d / name).write_bytes(data)
    checkpoint.write_digests(d)
    return d


def test_the_newest_good_tag_is_chosen_and_damaged_ones_are_named(tmp_path):
    for step in (4, 8, 12):
        _tag(tmp_path, step)
    (tmp_path / "latest").write_text("global_step12")
    assert checkpoint.choose_tag(tmp_path) == ("global_step12", [])

    newest = tmp_path / "global_step12" / "mp_rank_00_model_states.pt"
    newest.write_bytes(newest.read_bytes()[:-10])  # truncated
    middle = tmp_path / "global_step8" / "rng_rank0.pt"
    middle.write_bytes(bytes([middle.read_bytes()[0] ^ 1]) + middle.read_bytes()[1:])  # one bit flipped
    tag, notes = checkpoint.choose_tag(tmp_path)
    assert tag == "global_step4"
    assert "global_step12" in notes[0] and "mp_rank_00_model_states.pt does not match its sha256" in notes[0]
    assert "global_step8" in notes[1] and "rng_rank0.pt" in notes[1]

    (tmp_path / "global_step4" / checkpoint.DIGESTS).unlink()  # a save that never finished
    with pytest.raises(checkpoint.NoGoodCheckpoint, match="global_step4.*is missing"):
        checkpoint.choose_tag(tmp_path)


def test_a_missing_file_fails_and_universal_conversions_are_not_candidates(tmp_path):
    d = _tag(tmp_path, 3)
    _tag(tmp_path, 2)
    (tmp_path / "global_step3_universal").mkdir()
    assert checkpoint.candidate_tags(tmp_path) == ["global_step3", "global_step2"]
    (d / "rng_rank0.pt").unlink()
    assert "rng_rank0.pt is missing" in checkpoint.verify_tag(d)
    assert checkpoint.choose_tag(tmp_path)[0] == "global_step2"


# ---- telemetry ---------------------------------------------------------------------------------------


def test_metrics_jsonl_streams_and_tensorboard_gets_the_same_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from training.runtime.telemetry import Telemetry, peak_rss_mb, read_metrics

    t = Telemetry(tmp_path, enabled=True, tensorboard=True)
    for step in (10, 20, 30):
        t.write("train", step, loss=7.0 - step / 10, mlm_accuracy=step / 100, grad_norm=None, peak_rss_mb=peak_rss_mb())
        assert len(read_metrics(tmp_path / "metrics.jsonl")) == step // 10  # flushed at once
    t.write("valid", 30, loss=3.5, mlm_accuracy=0.4)
    t.close()
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["kind"], r["step"]) for r in records] == [("train", 10), ("train", 20), ("train", 30), ("valid", 30)]
    assert records[0]["peak_rss_mb"] > 10
    ea = EventAccumulator(str(tmp_path / "tensorboard"))
    ea.Reload()
    assert [e.value for e in ea.Scalars("train/loss")] == pytest.approx([6.0, 5.0, 4.0])
    assert [e.step for e in ea.Scalars("valid/mlm_accuracy")] == [30]
    assert "train/grad_norm" not in ea.Tags()["scalars"]  # None is left out, not written as 0

    # a resumed run drops what the dead run wrote after its checkpoint, and a torn line is skipped
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"kind": "train", "st')
    t2 = Telemetry(tmp_path, enabled=True, tensorboard=False, resume_step=20)
    t2.write("train", 30, loss=4.1)
    t2.close()
    assert [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "metrics.jsonl")] == [(10, 6.0), (20, 5.0), (30, 4.1)]


# ---- presets and positions ---------------------------------------------------------------------------


@pytest.mark.parametrize("name,objective,cls,blocks", [
    ("roberta_base", "mlm", "RobertaForMaskedLM", 12),
    ("gpt2", "causal", "GPT2LMHeadModel", 12),
    ("smollm_135m", "causal", "LlamaForCausalLM", 30),
    ("t5_small", "t5_span", "T5ForConditionalGeneration", 6),
    ("bert_mini", "mlm", "BertForMaskedLM", 4),
])
def test_presets_build_their_family_and_refuse_other_objectives(name, objective, cls, blocks):
    from training.models.model import build_for_objective, preset

    m = preset(name)
    module = build_for_objective(objective, m, vocab_size=512, pad_id=0, eos_id=2, seq_len=128)
    assert type(module.hf).__name__ == cls and module.hf.config.num_hidden_layers == blocks
    if objective != "t5_span":
        assert module.hf.config.max_position_embeddings >= 512  # not the rows' 128
    if m.family != "any":
        other = "causal" if objective != "causal" else "mlm"
        with pytest.raises(ValueError, match=f"a {m.family} preset trains on"):
            build_for_objective(other, m, vocab_size=512, pad_id=0, eos_id=2, seq_len=128)


def test_max_position_is_independent_of_the_training_length():
    import dataclasses

    from training.models.model import build_for_objective, preset

    module = build_for_objective("mlm", preset("tiny"), vocab_size=300, pad_id=0, eos_id=None, seq_len=32)
    assert module.hf.config.max_position_embeddings == 512
    ids = torch.randint(5, 300, (1, 300))  # longer than the rows it would train on
    assert module.hf(input_ids=ids).logits.shape == (1, 300, 300)
    with pytest.raises(ValueError, match="max_position 16 is shorter than the shards' rows"):
        build_for_objective("mlm", dataclasses.replace(preset("tiny"), max_position=16), 300, 0, None, 32)


@pytest.mark.parametrize("prenorm", [False, True])
def test_untied_embeddings_keep_their_own_output_matrix_through_export(tmp_path, prenorm):
    import dataclasses

    from transformers import AutoModelForMaskedLM

    from training.models.model import build_for_objective, preset
    from training.pretraining.module import model_config

    assert not preset("tiny").tie_embeddings and preset("bert_base").tie_embeddings  # CPU presets untie
    tied = build_for_objective("mlm", dataclasses.replace(preset("tiny"), prenorm=prenorm, tie_embeddings=True),
                               300, 0, None, 32).hf
    assert tied.get_output_embeddings().weight.data_ptr() == tied.get_input_embeddings().weight.data_ptr()
    hf = build_for_objective("mlm", dataclasses.replace(preset("tiny"), prenorm=prenorm), 300, 0, None, 32).hf
    assert hf.get_output_embeddings().weight.data_ptr() != hf.get_input_embeddings().weight.data_ptr()
    extra = sum(p.numel() for p in hf.parameters()) - sum(p.numel() for p in tied.parameters())
    assert extra in (300 * 64, 300 * 65)  # the decoder's matrix (BERT's class also unties the decoder's bias)
    if not prenorm:  # the ZeRO plan's estimate before the model is built: exact for BERT's class
        from training.pretraining.run_plan import estimate_parameters

        assert estimate_parameters(64, 2, 256, 300, 512, tied=False) == sum(p.numel() for p in hf.parameters())
        assert estimate_parameters(64, 2, 256, 300, 512) == sum(p.numel() for p in tied.parameters())
    # pretrain --embeddings: the preset's layout, or either one asked for
    ns = argparse.Namespace(model="tiny", prenorm=prenorm, max_position=0, dropout=-1.0)
    assert not model_config(argparse.Namespace(**vars(ns), embeddings="preset")).tie_embeddings
    assert model_config(argparse.Namespace(**vars(ns), embeddings="tied")).tie_embeddings
    assert model_config(argparse.Namespace(model="bert_base", prenorm=False, max_position=0, dropout=-1.0,
                                           embeddings="untied")).tie_embeddings is False
    with torch.no_grad():
        hf.get_output_embeddings().weight.mul_(3.0)  # the export must keep the two matrices apart
    hf.save_pretrained(tmp_path)
    back = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert not back.config.tie_word_embeddings
    torch.testing.assert_close(back.get_output_embeddings().weight, hf.get_output_embeddings().weight)
    torch.testing.assert_close(back.get_input_embeddings().weight, hf.get_input_embeddings().weight)


@pytest.mark.parametrize("objective,prenorm,family", [("mlm", False, "any"), ("mlm", True, "any"),
                                                      ("causal", False, "gpt2")])
def test_sinusoidal_position_start_depends_only_on_distance_and_keeps_the_init_scale(objective, prenorm, family):
    import dataclasses

    from training.models.model import build_for_objective, preset
    from training.pretraining.config import PretrainConfig
    from training.pretraining.module import model_config

    m = dataclasses.replace(preset("tiny"), prenorm=prenorm, family=family)
    tables = {}
    for start in ("random", "sinusoidal"):
        torch.manual_seed(0)
        module = build_for_objective(objective, dataclasses.replace(m, position_init=start), 300, 1, 2, 32)
        [(name, table)] = [(n, e) for n, e in module.named_modules()
                           if isinstance(e, torch.nn.Embedding) and n.rsplit(".", 1)[-1] in ("position_embeddings", "wpe")]
        tables[start] = table.weight.detach()
        first = 0 if table.padding_idx is None else table.padding_idx + 1  # RoBERTa counts from pad_id + 1
    sin = tables["sinusoidal"][first:]
    assert abs(sin.pow(2).mean().sqrt().item() - 0.02) < 1e-6  # the random table's scale
    dots = [(sin[p] @ sin[p + 7]).item() for p in (0, 40, 300)]  # a dot product set by the distance alone
    assert max(dots) - min(dots) < 1e-7 and dots[0] > (sin[0] @ sin[200]).item()
    rnd = tables["random"][first:]
    assert abs((rnd[0] @ rnd[7]).item() - (rnd[40] @ rnd[47]).item()) > 1e-5  # a random table has no such property
    torch.testing.assert_close(tables["sinusoidal"][:first], tables["random"][:first])  # rows before RoBERTa's first kept
    # the pretrain option reaches the model config; rotary positions and --init-from refuse it
    ns = argparse.Namespace(model="tiny", prenorm=prenorm, max_position=0, dropout=-1.0, embeddings="preset")
    assert model_config(argparse.Namespace(**vars(ns), position_init="sinusoidal")).position_init == "sinusoidal"
    assert model_config(argparse.Namespace(**vars(ns), position_init="preset")).position_init == "random"
    with pytest.raises(ValueError, match="no learned position table"):
        build_for_objective("causal", dataclasses.replace(preset("tiny"), position_init="sinusoidal"), 300, 1, 2, 32)
    with pytest.raises(ValueError, match="position_init"):
        PretrainConfig(shards="s", tokenizer="t", output="o", position_init="cosine")
    with pytest.raises(ValueError, match="init-from"):
        PretrainConfig(shards="s", tokenizer="t", output="o", position_init="sinusoidal", init_from="m")


def test_embedding_geometry_tells_a_collapsed_matrix_from_a_random_one():
    from training.models.embedding_geometry import embedding_geometry, geometry_line

    g = torch.Generator().manual_seed(0)
    fresh = embedding_geometry(torch.randn(2000, 64, generator=g) * 0.02)
    assert abs(fresh["mean_cosine"]) < 0.01 and fresh["effective_rank"] > 55 and not fresh["collapsed"]
    rows = torch.randn(2000, 64, generator=g)
    shared = torch.randn(64, generator=g)
    collapsed = embedding_geometry(0.3 * rows + 3.0 * shared)  # one direction dominates every row
    unit = torch.nn.functional.normalize(0.3 * rows + 3.0 * shared, dim=1)
    pairs = (unit @ unit.T).sum() - 2000
    assert collapsed["mean_cosine"] == pytest.approx(float(pairs / (2000 * 1999)), abs=1e-4)
    assert collapsed["collapsed"] and "--embeddings untied" in geometry_line(collapsed)
    assert "untie" not in geometry_line(fresh)


def test_sparse_mlm_reports_top1_accuracy_at_masked_positions():
    from training.models.model import build_for_objective, preset

    torch.manual_seed(0)
    module = build_for_objective("mlm", preset("tiny"), vocab_size=50, pad_id=0, eos_id=None, seq_len=8)
    ids = torch.randint(5, 50, (2, 8))
    labels = torch.full_like(ids, -100)
    labels[:, 2] = ids[:, 2]
    module(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
    logits = module.hf(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert module.last_counted.item() == 2
    assert module.last_correct.item() == (logits[:, 2].argmax(-1) == ids[:, 2]).sum().item()


# ---- multi-node commands, resume across world sizes -------------------------------------------------


def test_static_and_hostfile_launch_commands(tmp_path):
    from training.launch.torchrun import Nodes, read_hostfile, torchrun_command

    static = torchrun_command("training.pretraining.pretrain", ["--steps", "3"], 2, 1234, Nodes(2, node_rank=1, master_addr="n0",
                                                                                      master_port=29600))
    assert "--node_rank=1" in static and "--master_addr=n0" in static and "--master_port=29600" in static
    assert not any(a.startswith("--rdzv_conf") for a in static)  # torchrun's own default unless asked
    # a late node (an image still pulling) joins within the run's collective timeout, not torchrun's 600 s
    late = torchrun_command("training.pretraining.pretrain", [], 2, 1234, Nodes(2, node_rank=0, master_addr="n0"), 1800)
    assert "--rdzv_conf=timeout=1800" in late
    c10d = torchrun_command("training.pretraining.pretrain", [], 2, 1234, Nodes(2, rdzv_endpoint="n0:29400"), 1800)
    assert "--rdzv_conf=join_timeout=1800" in c10d
    with pytest.raises(ValueError, match="--node-rank must be in 0..1"):
        Nodes(2, node_rank=2, master_addr="n0")
    with pytest.raises(ValueError, match="need --rdzv-endpoint"):
        Nodes(2)

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# two nodes\nnode0 slots=4\nnode1 slots=2  # smaller\n")
    assert read_hostfile(str(hostfile)) == [("node0", 4), ("node1", 2)]
    nodes = Nodes(hostfile=str(hostfile), node_rank=1)
    assert nodes.nnodes == 2 and nodes.slots() == 2
    cmd = torchrun_command("training.pretraining.pretrain", ["--steps", "3"], 2, 1234, nodes)
    assert cmd[:3] == [sys.executable, "-m", "deepspeed.launcher.runner"]
    assert cmd[cmd.index("--node_rank") + 1] == "1" and cmd[cmd.index("--master_addr") + 1] == "node0"
    assert "--no_ssh" in cmd and cmd[-3:] == ["training.pretraining.pretrain", "--steps", "3"]
    with pytest.raises(ValueError, match="give each its --node-rank"):
        Nodes(hostfile=str(hostfile))
    hostfile.write_text("node0 slots=four\n")
    with pytest.raises(ValueError, match="line 1: expected 'HOST slots=N'"):
        read_hostfile(str(hostfile))


def test_resume_on_another_world_size_may_reshape_the_batch_but_not_the_global_batch():
    from common.config import config_to_dict
    from training.pretraining.pretrain import PretrainConfig
    from training.pretraining.resume import resume_mismatch

    saved = config_to_dict(PretrainConfig(shards="s", tokenizer="t", output="o", steps=10, micro_batch_size=8))
    same_global = config_to_dict(PretrainConfig(shards="s", tokenizer="t", output="o", steps=10, micro_batch_size=8,
                                                grad_accum=2))
    assert resume_mismatch(saved, same_global, saved_world=2, world=1) == {}
    assert resume_mismatch(saved, saved, saved_world=2, world=1) == {}  # allowed: the global batch halves
    assert resume_mismatch(saved, same_global, saved_world=2, world=2) == {"grad_accum": (1, 2), "global_batch": (16, 32)}
    assert "grad_accum" in resume_mismatch(saved, same_global)  # no world sizes: any change is named


def test_deepspeed_file_with_its_own_optimizer_is_refused(tmp_path):
    from training.pretraining.pretrain import PretrainConfig

    f = tmp_path / "ds.json"
    f.write_text(json.dumps({"optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 3}}))
    with pytest.raises(ValueError, match="remove 'optimizer'"):
        PretrainConfig(shards="s", tokenizer="t", output="o", deepspeed_config=str(f))
    with pytest.raises(ValueError, match="no such file"):
        PretrainConfig(shards="s", tokenizer="t", output="o", deepspeed_config=str(tmp_path / "none.json"))


def test_die_with_parent_sets_the_parent_death_signal():
    """A child that asked for SIGKILL on its parent's death is gone once the parent is killed."""
    import subprocess
    import time

    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'from training.runtime.processes import die_with_parent; "
            "die_with_parent(); import time; time.sleep(60)'])\n"
            "print(child.pid, flush=True); time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # the child has called prctl
    parent.kill()
    parent.wait()
    deadline = time.time() + 5
    while time.time() < deadline and _alive(child):
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_heldout_loss_is_per_token_not_a_mean_of_batch_means():
    from training.runtime.recipe import heldout_loss

    batches = [{"loss": 2.0, "n": 1, "hits": 1}, {"loss": 5.0, "n": 3, "hits": 0}, {"loss": 9.0, "n": 9, "hits": 9}]
    held = heldout_loss(lambda b: (b["loss"], b["n"], b["hits"]), batches, limit=2)
    assert held.loss == pytest.approx((2.0 * 1 + 5.0 * 3) / 4) and held.tokens == 4 and held.accuracy == 0.25
    assert heldout_loss(lambda b: (b["loss"], b["n"], 0), batches).tokens == 13  # limit 0: every batch
    assert heldout_loss(lambda b: (0.0, 0, 0), batches).loss is None


def test_deepspeed_arch_list_drops_suffixes_deepspeed_cannot_parse():
    from training.runtime.recipe import deepspeed_arch_list

    assert deepspeed_arch_list("9.0a") == "9.0"
    assert deepspeed_arch_list("8.0 9.0a;9.0+PTX") == "8.0;9.0;9.0+PTX"
    assert deepspeed_arch_list("10.0f;9.0a;9.0") == "10.0;9.0"
    assert deepspeed_arch_list("7.5;8.6") == "7.5;8.6"


def test_check_finite_stops_a_diverged_window():
    from training.pretraining.step_stats import check_finite

    window = {"loss_sum": 6.0, "micro_batches": 2.0}
    check_finite(1, 10, window, [1.5, 2.0])  # finite: nothing
    with pytest.raises(FloatingPointError, match=r"steps 11-20: loss nan.*--resume"):
        check_finite(11, 20, {"loss_sum": float("nan"), "micro_batches": 2.0}, [1.0])
    with pytest.raises(FloatingPointError, match="gradient norm inf"):
        check_finite(11, 20, window, [1.0, float("inf")])
