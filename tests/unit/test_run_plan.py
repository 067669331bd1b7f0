"""The run's plan (training.pretraining.run_plan, training.pretraining.memory_plan, training.pretraining.micro_batch) and the lean stage-0 step
(training.pretraining.engine.TrainStep): pure numbers, a simulated device memory, a tiny model on the CPU."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from training.models.model import SparseMLM, bert_config, build_model, preset, sparse_targets
from training.pretraining.compiled import (
    compile_choice,
    compile_mode_choice,
    compile_regions,
    eval_stance,
    kernel_tuning_choice,
)
from training.pretraining.config import PretrainConfig
from training.pretraining.engine import TrainStep
from training.pretraining.memory_plan import fit_micro_batch, plan_zero_stage, split_global_batch, state_bytes
from training.pretraining.micro_batch import StepProbe, check_micro_batch
from training.pretraining.run_plan import CPU_MICRO_BATCH, estimate_parameters, resolve
from training.runtime.ds_config import deepspeed_config

GB = 1e9
BERT_BASE = estimate_parameters(768, 12, 3072, 30522, 512)


def _cfg(**kw) -> PretrainConfig:
    return PretrainConfig(**{"shards": "s", "tokenizer": "t", "output": "o", **kw})


def test_zero_stage_costs_nothing_where_it_buys_nothing():
    # one process: nothing to partition, whatever the size
    assert plan_zero_stage("auto", 1, 80 * GB, 20_000_000_000).stage == 0
    # bert_base on 8 GPUs: 1.8 GB of model states fit -> plain data parallel
    choice = plan_zero_stage("auto", 8, 80 * GB, BERT_BASE)
    assert choice.stage == 0 and "fit" in choice.reason
    # 3B on 8 x 80 GB: 48 GB at stage 0 is over half the GPU; ZeRO-1 (4 + 4 + 8/8 bytes) holds 27 GB
    assert plan_zero_stage("auto", 8, 80 * GB, 3_000_000_000).stage == 1
    # 7B: ZeRO-1 63 GB, ZeRO-2 (4 + 12/8) 38.5 GB fits in 40
    assert plan_zero_stage("auto", 8, 80 * GB, 7_000_000_000).stage == 2
    # 18B: only ZeRO-3 (16/8 = 2 bytes) fits: 36 GB
    assert plan_zero_stage("auto", 8, 80 * GB, 18_000_000_000).stage == 3
    assert "expect out-of-memory" in plan_zero_stage("auto", 8, 80 * GB, 60_000_000_000).reason
    assert plan_zero_stage(2, 1, 80 * GB, BERT_BASE).stage == 2  # asked for: kept
    assert state_bytes(1000, 3, 4) == 16 * 1000 / 4
    with pytest.raises(ValueError, match="zero_stage must be"):
        plan_zero_stage(5, 1, None, 1)


def test_resolve_fills_in_stage_micro_batch_and_compile():
    cfg, plan = resolve(_cfg(), world=1, accelerator="cpu", device_bytes=24 * GB, params=BERT_BASE)
    assert (cfg.zero_stage, cfg.micro_batch_size, cfg.compile) == (0, CPU_MICRO_BATCH, False)
    assert plan.clip.startswith("lmforge")
    cfg, plan = resolve(_cfg(bf16=True), world=1, accelerator="cuda", device_bytes=80 * GB, params=BERT_BASE)
    assert cfg.micro_batch_size == "auto" and cfg.compile is True and "autocast" in plan.precision
    cfg, _ = resolve(_cfg(micro_batch_size=32, global_batch_size=256), world=2, accelerator="cuda",
                     device_bytes=80 * GB, params=BERT_BASE)
    assert (cfg.micro_batch_size, cfg.grad_accum) == (32, 4)
    cfg, plan = resolve(_cfg(zero_stage=3), world=2, accelerator="cuda", device_bytes=80 * GB, params=BERT_BASE)
    assert cfg.compile is False and "ZeRO-3" in plan.compile_reason
    assert compile_choice(True, "cpu", 0) == (True, "asked for (--compile)")
    with pytest.raises(ValueError, match="give --global-batch-size or --grad-accum"):
        resolve(_cfg(global_batch_size=64, grad_accum=2), 1, "cpu", None, BERT_BASE)


def test_compile_mode_auto_is_cuda_graphs_only_where_they_were_measured():
    """One GPU, ZeRO-0, no accumulation: reduce-overhead; any other case: default; an asked-for mode stays."""
    assert compile_mode_choice("auto", "cuda", 1, 0, 1)[0] == "reduce-overhead"
    for accelerator, world, zero, accum in (("cuda", 2, 0, 1), ("cuda", 1, 2, 1), ("cuda", 1, 0, 4), ("cpu", 1, 0, 1)):
        assert compile_mode_choice("auto", accelerator, world, zero, accum)[0] == "default"
    assert compile_mode_choice("default", "cuda", 1, 0, 1) == ("default", "asked for (--compile-mode)")
    assert _cfg().compile_mode == "auto"
    with pytest.raises(ValueError, match="compile mode must be one of default, reduce-overhead"):
        compile_regions(torch.nn.Linear(2, 2), "auto")  # resolved before the regions compile


def test_kernel_tuning_auto_tunes_gpu_kernels_only_and_sets_inductors_flag():
    import torch._inductor.config as inductor

    before = inductor.coordinate_descent_tuning
    try:
        assert kernel_tuning_choice("auto", "cuda")[0] is True and inductor.coordinate_descent_tuning is True
        assert kernel_tuning_choice("auto", "cpu")[0] is False and inductor.coordinate_descent_tuning is False
        assert kernel_tuning_choice("coordinate-descent", "cpu") == (True, "asked for (--kernel-tuning)")
        assert kernel_tuning_choice("heuristic", "cuda")[0] is False
    finally:
        inductor.coordinate_descent_tuning = before
    with pytest.raises(ValueError, match="kernel_tuning must be one of auto, heuristic, coordinate-descent"):
        _cfg(kernel_tuning="fast")


def test_eval_under_cuda_graphs_runs_the_compiled_regions_eagerly():
    """reduce-overhead: validation must not replay CUDA graphs outside autograd (an H100 run failed there); the
    stance makes a compiled module run its eager code: no frame compiles under it."""
    compiled = []

    def backend(gm, example_inputs):  # counts the graphs dynamo hands over; runs them as traced
        compiled.append(gm)
        return gm.forward

    class Block(torch.nn.Module):  # dynamo does not trace torch.nn's own modules as a top frame
        def forward(self, x):
            return x * 2 + 1

    torch._dynamo.reset()
    lin = Block()
    lin.compile(backend=backend)
    with eval_stance("reduce-overhead"), torch.no_grad():
        lin(torch.ones(2, 3))
    assert compiled == []
    with eval_stance("default"), torch.no_grad():
        lin(torch.ones(2, 3))
    assert len(compiled) == 1


def test_stage0_deepspeed_config_leaves_clipping_and_bf16_to_lmforge():
    ds = deepspeed_config(_cfg(zero_stage=0, micro_batch_size=8, bf16=True))
    assert ds["gradient_clipping"] == 0.0 and ds["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}
    assert ds["bf16"] == {"enabled": False}
    ds = deepspeed_config(_cfg(zero_stage=2, micro_batch_size=8, bf16=True))
    assert ds["gradient_clipping"] == 1.0 and "torch_autocast" not in ds
    assert ds["bf16"] == {"enabled": True, "check_grad_overflow": False}


def test_split_global_batch():
    assert split_global_batch(256, 1, None, fitted=100) == (64, 4)  # the largest divisor of 256 under 100
    assert split_global_batch(256, 2, 32) == (32, 4)
    with pytest.raises(ValueError, match="not a multiple of micro batch 48"):
        split_global_batch(256, 2, 48)


def test_fit_micro_batch_under_a_simulated_memory_limit():
    """A device of 80 GB, 10% kept free: 3 GB of model state plus 0.25 GB a row fits 276 rows; past 300 rows
    the allocator fails outright. The search finds the largest size within an eighth of the threshold."""
    budget = 0.9 * 80 * GB
    probed = []

    def probe(size):
        probed.append(size)
        return None if size > 300 else 3 * GB + 0.25 * GB * size

    fit = fit_micro_batch(probe, budget, largest=1024)
    assert 276 - 276 // 8 <= fit.size <= 276 and 3 * GB + 0.25 * GB * fit.size <= budget
    assert len(probed) <= 12
    with pytest.raises(MemoryError, match="not even a micro batch of 1"):
        fit_micro_batch(lambda size: None, budget, largest=64)
    assert fit_micro_batch(probe, budget, largest=16).size == 16  # capped by the rows a step needs


def _tiny_mlm(seed: int = 0) -> SparseMLM:
    torch.manual_seed(seed)
    return SparseMLM(build_model(bert_config(dataclasses.replace(preset("tiny"), dropout=0.0), 300, 0, 64)))


def _batch(size: int, seq: int = 32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(size)
    ids = torch.randint(5, 300, (size, seq), generator=g)
    labels = torch.where(torch.rand(size, seq, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    return sparse_targets({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels})


def test_step_probe_and_the_one_line_error_for_a_size_that_does_not_fit():
    """The real probe on the CPU (it counts weights, gradients and the tensors saved for backward) under a
    simulated device: the fitted size fits, twice it does not, and asking for 4x fails in one line naming a
    size that fits."""
    module = _tiny_mlm()
    probe = StepProbe(module, _batch, torch.device("cpu"), optimizer_bytes=8 * sum(p.numel() for p in module.parameters()))
    small, large = probe(4), probe(64)
    assert small is not None and large > small  # memory grows with the batch
    budget = (probe(16) + probe(32)) / 2  # 16 rows fit, 32 do not
    fit = fit_micro_batch(probe, budget, largest=256)
    assert 14 <= fit.size < 32
    assert all(p.grad is None for p in module.parameters())  # the probe leaves no gradients behind
    with pytest.raises(ValueError) as e:
        check_micro_batch(128, probe, budget, "a simulated device")
    said = str(e.value)
    assert "\n" not in said and "--micro-batch-size 128 does not fit on a simulated device" in said
    assert f"--micro-batch-size {fit_micro_batch(probe, budget, largest=127).size} does" in said
    check_micro_batch(fit.size, probe, budget)  # fits: no error


class _Engine:
    """What TrainStep uses of a DeepSpeed engine, around a plain module and optimizer (stage 0, world 1)."""

    def __init__(self, module, optimizer):
        self.module, self.optimizer, self.device = module, optimizer, torch.device("cpu")

    def __call__(self, **batch):
        return self.module(**batch)

    def backward(self, loss):
        loss.backward()

    def is_gradient_accumulation_boundary(self):
        return True

    def step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def get_global_grad_norm(self):
        return None


@pytest.mark.parametrize("lr,max_norm", [(1e-3, 1e3), (1e-3, 1e-3)])
def test_lean_clip_equals_torch_clip_then_adamw(lr, max_norm, tmp_path):
    """lmforge's stage-0 clip (one fused norm, the scale inside fused AdamW) updates the weights as
    clip_grad_norm_ followed by AdamW does, with the norm unclipped and on the device; clipped or not."""
    (tmp_path / "ds.json").write_text(json.dumps({"gradient_clipping": max_norm}))
    cfg = _cfg(zero_stage=0, deepspeed_config=str(tmp_path / "ds.json"))
    ours, ref = _tiny_mlm(), _tiny_mlm()
    opt = torch.optim.AdamW(ours.parameters(), lr=lr, fused=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=lr, fused=True)
    step = TrainStep(_Engine(ours, opt), cfg)
    assert step.in_optimizer
    for i in range(3):
        batch = _batch(8 + i)
        step.forward_backward(batch)
        norm = step.update()
        ref(**batch).backward()
        ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), max_norm)
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
        assert isinstance(norm, torch.Tensor) and torch.allclose(norm, ref_norm, rtol=1e-5)
        for a, b in zip(ours.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # 1e-3 of an Adam step of lr 1e-3
    clipped = max_norm < ref_norm.item()
    assert clipped == (max_norm == 1e-3)


def test_compile_watch_refuses_a_run_that_recompiles_every_step(monkeypatch):
    """dynamo's counters as a run would see them: compiles in the first steps are the compile; one in most steps
    after is an error naming the way out; one late compile (validation's eval mode) is fine."""
    import training.pretraining.compiled as compiled

    frames = {"n": 0}
    monkeypatch.setattr(compiled, "dynamo_counters", lambda: {"frames_compiled": frames["n"], "graph_breaks": 0,
                                                              "recompiles": 0, "unique_graphs": 1})
    calm = compiled.CompileWatch()
    for step in range(1, 21):
        frames["n"] += 3 if step <= 2 else int(step == 10)
        calm.after_step(step)
        calm.check(step)
    assert calm.summary()["steps_with_recompiles"] == 1
    busy = compiled.CompileWatch()
    with pytest.raises(RuntimeError, match="recompiled in 4 of the 4 steps before step 6.*--no-compile"):
        for step in range(1, 21):
            frames["n"] += 1
            busy.after_step(step)
            busy.check(step)


def test_fit_on_device_probes_the_real_rows_under_a_simulated_gpu(tmp_path, monkeypatch):
    """pretrain's set-up step for a GPU, run on the CPU with a simulated device: the probe builds its batches from
    the shards' real rows (fixed masked count when compiled), finds the largest micro batch under the limit,
    makes the global batch by accumulation, caches the answer, and an asked-for size that does not fit fails in
    one line."""
    import torch.distributed as dist

    import training.pretraining.micro_batch as mb
    from tests.fixtures import make_shards, make_tokenizer
    from training.pretraining.data import ShardSet
    from training.pretraining.module import build_module
    from training.pretraining.setup import fit_on_device

    tok = make_tokenizer(tmp_path / "tokenizer")
    shards = ShardSet.open(make_shards(tmp_path / "shards", tok, seq_len=32, num_variants=2, train_rows=64,
                                      valid_rows=8))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Simulated GPU")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        cfg = _cfg(shards=str(shards.root), tokenizer=str(tok), model="tiny", zero_stage=0, global_batch_size=64,
                   dropout=0.0)
        module = build_module(cfg, shards, None, {})
        train = shards.read("train")
        cpu = torch.device("cpu")
        # the simulated device holds a step of about 12 rows: between the probe's peaks at 8 and 16 on these rows
        from training.pretraining.data import RankLoader
        from training.pretraining.setup import prepare_batch

        view = RankLoader(train, 0, 1, 1, 0, shards.num_variants).view

        def rows(n):
            return prepare_batch(module, view.batch(np.arange(n) % train.num_rows, 0), n, view.most_masks_per_row(), True)

        trainable = sum(p.numel() for p in module.parameters())
        peaks = [StepProbe(module, rows, cpu, optimizer_bytes=8 * trainable)(n) for n in (8, 16)]
        monkeypatch.setattr(mb, "budget_bytes", lambda device: sum(peaks) / 2)
        given = cfg
        cfg, plan = resolve(given, 1, "cuda", None, 1_000_000)  # as a GPU worker plans it: compiled, micro batch auto
        assert plan.compile and plan.micro_batch == "auto"
        (micro, accum), notes = fit_on_device(cfg, plan, module, train, shards, cpu, 1)
        assert 8 <= notes["fitted"] < 16 and micro * accum == 64
        assert 64 % micro == 0 and micro <= notes["fitted"]
        assert any(p is not None for _, p in notes["tried"]) and (tmp_path / "cache" / "lmforge" / "micro_batch.json").exists()
        again, notes2 = fit_on_device(cfg, plan, module, train, shards, cpu, 1)  # from the cache
        assert again == (micro, accum) and notes2["tried"] == notes["tried"]
        # the plan made again from the given config with the probe's answer (CUDA graphs only without accumulation)
        cfg2, plan2 = resolve(given, 1, "cuda", None, 1_000_000, probed=(micro, accum))
        assert (plan2.micro_batch, plan2.grad_accum, cfg2.micro_batch_size, cfg2.grad_accum) == (micro, accum, micro, accum)
        assert plan2.compile_mode == ("reduce-overhead" if accum == 1 else "default") == cfg2.compile_mode
        assert "probed on the GPU" in plan2.micro_batch_reason and f"{accum} accumulation" in plan2.micro_batch_reason
        with pytest.raises(ValueError, match=r"--micro-batch-size 64 does not fit on Simulated GPU .*--micro-batch-size \d+ does"):
            fit_on_device(dataclasses.replace(cfg, micro_batch_size=64, global_batch_size=0), plan, module, train,
                          shards, cpu, 1)
    finally:
        dist.destroy_process_group()


def test_bf16_on_a_cpu_without_bf16_instructions_says_it_is_emulated(tmp_path, monkeypatch):
    from training.pretraining import run_plan

    (tmp_path / "without").write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n")
    (tmp_path / "with").write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert run_plan.cpu_bf16_instructions(str(tmp_path / "without")) is False
    assert run_plan.cpu_bf16_instructions(str(tmp_path / "with")) is True
    assert run_plan.cpu_bf16_instructions(str(tmp_path / "absent")) is None
    monkeypatch.setattr(run_plan, "cpu_bf16_instructions", lambda: False)
    _, plan = resolve(_cfg(bf16=True), world=2, accelerator="cpu", device_bytes=None, params=BERT_BASE)
    assert "bf16 is emulated" in plan.precision and "--no-bf16" in plan.precision
    monkeypatch.setattr(run_plan, "cpu_bf16_instructions", lambda: True)
    _, plan = resolve(_cfg(bf16=True), world=2, accelerator="cpu", device_bytes=None, params=BERT_BASE)
    assert "emulated" not in plan.precision
