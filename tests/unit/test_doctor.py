"""lmforge doctor (training/doctor/node.py): the peak table and MFU arithmetic, nccl-tests' bus bandwidth, the resume
checks and the plan text, all pure; the CPU report of this GPU-less machine; and the GPU pretraining check's
composition (which runs, on how many processes, compared how) with the launcher replaced by a recorder, since
no GPU runs here. The 2-process CPU pretraining smoke is in tests/integration/test_torchrun_stages.py."""
from __future__ import annotations

import json
import math
import re

import pytest
import torch

from lmforge.cli import main as lmforge_main
from training.doctor import checks as probe
from training.doctor import node as doctor
from training.models.flops import ModelShape
from training.runtime.accelerator import Machine, launch_plan

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU report is checked on a machine without CUDA")


@pytest.mark.parametrize("name,tflops", [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.0),
    ("NVIDIA H200", 989.0), ("NVIDIA H200 NVL", 835.0), ("NVIDIA A100-SXM4-80GB", 312.0),
    ("NVIDIA A100 80GB PCIe", 312.0), ("NVIDIA L40S", 362.05), ("NVIDIA A10G", 125.0),
    ("NVIDIA GeForce RTX 4090", 165.2), ("Tesla T4", None), ("NVIDIA GeForce RTX 3090", None),
])
def test_gpu_peak_by_the_name_torch_gives(name, tflops):
    peak = doctor.gpu_peak(name)
    assert (peak and peak.tflops) == tflops
    if peak:
        assert peak.source and ("datasheet" in peak.source or "whitepaper" in peak.source)
        assert peak.checked == (peak.match != "a10g")  # the one figure no vendor page confirms


def test_mfu_is_model_flops_over_the_gpus_peak():
    # tiny preset (L 2, H 64, I 256), vocab 2,000, 64 positions, the head on 15% of them:
    # blocks 6 * 2 * (4 * 64^2 + 2 * 64 * 256) = 589,824; attention 12 * 2 * 64 * 64 = 98,304;
    # head 6 * (64^2 + 64 * 2,000) * 0.15 = 118,886.4; 807,014.4 FLOPs per position
    shape = ModelShape(layers=2, hidden=64, intermediate=256, vocab=2000, seq_len=64)
    got = doctor.training_mfu(1e6, shape, 0.15, "NVIDIA H100 80GB HBM3", gpus=2)
    assert got["flops_per_token"] == pytest.approx(807_014.4)
    assert got["mfu"] == pytest.approx(1e6 * 807_014.4 / (2 * 989e12))
    assert got["model_tflops"] == pytest.approx(0.807_014_4)
    assert got["peak_tflops_per_gpu"] == 989.0 and got["peak_checked"]
    unknown = doctor.training_mfu(1e6, shape, 0.15, "Tesla T4", gpus=1)
    assert unknown["mfu"] is None and "not in training.doctor.node.GPU_PEAKS" in unknown["why"]


def test_bus_bandwidth_is_nccl_tests_definition():
    algbw, busbw = doctor.bus_bandwidth(256 * 2**20, 0.002, 8)
    assert algbw == pytest.approx(268_435_456 / 0.002)
    assert busbw == pytest.approx(algbw * 2 * 7 / 8)  # 2(n-1)/n
    assert doctor.bus_bandwidth(2**20, 1e-3, 2)[1] == pytest.approx(2**20 / 1e-3)  # 2 ranks: busbw = algbw
    assert doctor.bus_bandwidth(2**20, 1e-3, 1)[1] == 0.0
    with pytest.raises(ValueError):
        doctor.bus_bandwidth(2**20, 0.0, 2)


@pytest.mark.parametrize("n,other", [(1, None), (2, 1), (3, 1), (4, 2), (6, 3), (8, 4)])
def test_resume_world_keeps_the_global_batch(n, other):
    assert doctor.resume_world(n) == other
    if other:
        assert n % other == 0  # grad_accum n / other keeps micro batch x accumulation x world


def _curve(losses):
    return [{"step": i + 1, "loss": x, "lr": 1e-3} for i, x in enumerate(losses)]


def test_compare_resumed_names_what_differs():
    full = {"loss_curve": _curve([5.0, 4.0, 3.0, 2.5])}
    good = {"loss_curve": _curve([5.0, 4.0, 3.05, 2.45]), "resumed_from_step": 2, "world_size": 4,
            "resumed_from_world_size": 8}
    assert doctor.compare_resumed(full, good, 2, 4, 8, tolerance=0.1) == []
    bad = {**good, "loss_curve": _curve([5.0, 4.1, 3.5, math.nan]), "world_size": 8}
    problems = doctor.compare_resumed(full, bad, 2, 4, 8, tolerance=0.1)
    assert any("world size 8 -> 8, expected 8 -> 4" in p for p in problems)
    assert any("up to step 2 is not the checkpoint's" in p for p in problems)
    assert any("2 step(s) after the resume differ by more than 0.1" in p and "step 4: 2.5000 vs nan" in p
               for p in problems)
    short = {**good, "loss_curve": _curve([5.0, 4.0, 3.0])}
    assert "differ from the uninterrupted run's" in doctor.compare_resumed(full, short, 2, 4, 8, 0.1)[0]


def test_plan_text_without_and_with_gpus():
    cpu = doctor.plan_checks(launch_plan("cpu", machine=Machine(2)).as_dict(), [])
    assert cpu[0].startswith(doctor.NO_CUDA) and "would" in cpu[0]
    assert any("NCCL all-reduce" in line for line in cpu) and any("MFU" in line for line in cpu)
    eight = doctor.plan_checks(launch_plan("cuda", machine=Machine(64, ((9, 0),) * 8)).as_dict(),
                               ["NVIDIA H100 80GB HBM3"] * 8)
    text = "\n".join(eight)
    assert "8 x NVIDIA H100 80GB HBM3: nccl, bf16, 8 CPU threads" in text
    assert "across 8 GPUs" in text and "resumed from step 10 on 8 and on 4" in text and "989 TFLOPS" in text
    one = "\n".join(doctor.plan_checks(launch_plan("cuda", machine=Machine(8, ((7, 5),))).as_dict(), ["Tesla T4"]))
    assert "1 x Tesla T4: nccl, fp16" in one and "skipped, needs 2 GPUs" in one
    assert "needs 2 GPUs)" in one and "MFU: not reported" in one


@no_cuda
def test_cpu_report_says_the_gpu_checks_did_not_run(tmp_path, capsys):
    assert doctor.main(["--report", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "doctor.json").read_text())
    assert report["schema"] == doctor.SCHEMA and report["verdict"] == "ok"
    assert report["gpu_checks"] == doctor.NO_CUDA
    f = report["facts"]
    assert f["torch"] == torch.__version__ and f["cuda_build"] == torch.version.cuda and not f["cuda_available"]
    assert {"cudnn", "nccl", "driver", "gpus", "notes"} <= f.keys()
    assert report["plan"]["accelerator"] == "cpu" and report["plan"]["backend"] == "gloo"
    opt = report["checks"]["optimizers"]
    assert opt["status"] == "ok" and [r["name"] for r in opt["rows"]] == ["adamw", "lamb"]
    assert all(r["device"] == "cpu" and r["class"] and r["error"] is None for r in opt["rows"])
    for name in ("nccl_allreduce", "pretrain_gpu", "pretrain_cpu"):
        assert report["checks"][name]["status"] == "not run", name
    md = (tmp_path / "doctor.md").read_text()
    assert f"**{doctor.NO_CUDA}**" in md and "| adamw |" in md and "would" in md
    assert doctor.NO_CUDA in capsys.readouterr().out


@no_cuda
def test_gpu_run_asked_for_without_cuda_fails(tmp_path):
    assert lmforge_main(["doctor", "--gpu-run", "--report", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "doctor.json").read_text())
    assert report["gpu_checks"] == f"{doctor.NO_CUDA} (--gpu-run asked for them)"
    assert report["checks"]["pretrain_gpu"]["status"] == "failed" and report["verdict"] == "failed"


def test_help_explains_each_check(capsys):
    with pytest.raises(SystemExit) as e:
        lmforge_main(["doctor", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for words in ("torch.version.cuda", "nvidia-smi", "launch_plan", "build_optimizer", "bus bandwidth",
                  "resumed from step 10", "MFU", "--cpu-run", "--no-gpu-run", "--report"):
        assert words in out, words


def test_gpu_pretrain_check_on_8_gpus_resumes_on_8_and_4(tmp_path, monkeypatch):
    """The GPU path with the launcher replaced: a full run of 20 steps saving at 10, then the copy of a crash
    after step 10 resumed on 8 processes, then on 4 with 2 accumulation steps (the same global batch)."""
    shards, tok = tmp_path / "shards", tmp_path / "tok"
    shards.mkdir()
    (shards / "manifest.json").write_text(json.dumps({"extra": {"vocab_size": 2000}}))
    launched, copied = [], []
    curve = _curve([6.0 - 0.1 * i for i in range(20)])

    def fake_launch(cfg, nproc, accelerator):
        launched.append((cfg.output.rsplit("/", 1)[-1], nproc, accelerator, cfg.resume, cfg.grad_accum, cfg.bf16,
                         cfg.save_every, cfg.steps))
        m = {"loss_curve": curve, "first_loss": 6.0, "last_loss": 4.1, "valid_loss": 4.0, "steps": 20,
             "seq_len": 64, "world_size": nproc, "resumed_from_step": 10 if cfg.resume else None,
             "resumed_from_world_size": launched[0][1] if cfg.resume else None}
        return {"metrics": m, "counts": {"masked_tokens": 15, "sequences": 1, "tokens": 64}, "seconds": 1.0,
                "last_record": {"tokens_per_s": 5e5, "samples_per_s": 1e4}}

    monkeypatch.setattr(probe, "build_tiny_data", lambda work, seq_len: (shards, tok))
    monkeypatch.setattr(probe, "pretrain_once", fake_launch)
    monkeypatch.setattr(probe, "crash_copy", lambda run, step, to: copied.append((run.name, step)) or to)
    got = doctor.pretrain_check(tmp_path, 8, "cuda", 20, "tiny", "bf16", "NVIDIA H100 80GB HBM3")
    assert launched == [("cuda-full", 8, "cuda", False, 1, True, 10, 20),
                        ("cuda-resume-8-to-8", 8, "cuda", True, 1, True, 10, 20),
                        ("cuda-resume-8-to-4", 4, "cuda", True, 2, True, 10, 20)]
    assert copied == [("cuda-full", 10), ("cuda-full", 10)]
    assert got["status"] == "ok" and [r["status"] for r in got["runs"]] == ["ok", "ok", "ok"]
    assert [r["world"] for r in got["runs"]] == [8, 8, 4]
    # 1e4 sequences/s x 64 positions x 807,014.4 FLOPs (head share 15 / 64) over 8 x 989 TFLOPS
    shape = ModelShape(layers=2, hidden=64, intermediate=256, vocab=2000, seq_len=64)
    full = got["runs"][0]
    assert full["mfu"]["mfu"] == pytest.approx(doctor.training_mfu(6.4e5, shape, 15 / 64, "NVIDIA H100", 8)["mfu"])
    assert full["tokens_per_s"] == 5e5 and full["positions_per_s"] == 6.4e5

    # a resume that lost its place: the losses after step 10 jump, and the check says where
    def lost(cfg, nproc, accelerator):
        r = fake_launch(cfg, nproc, accelerator)
        if cfg.resume:
            r["metrics"]["loss_curve"] = curve[:10] + _curve([9.0] * 20)[10:]
        return r

    monkeypatch.setattr(probe, "pretrain_once", lost)
    launched.clear()
    got = doctor.pretrain_check(tmp_path, 2, "cuda", 20, "tiny", "bf16", "NVIDIA A100-SXM4-80GB")
    assert got["status"] == "failed" and [r["world"] for r in got["runs"]] == [2, 2, 1]
    assert got["runs"][1]["problems"] == ["10 step(s) after the resume differ by more than 0.1: step 11: 5.0000 vs "
                                          "9.0000, step 12: 4.9000 vs 9.0000, step 13: 4.8000 vs 9.0000"]
    md = doctor.render_markdown({"verdict": "failed", "host": "h", "created": "now", "gpu_checks": None,
                                 "facts": {"torch": "2.13.0+cu128", "cuda_build": "12.8", "cudnn": 91000,
                                           "nccl": "2.27.3", "driver": "570.1", "cuda_available": True, "notes": [],
                                           "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_gib": 79.3,
                                                     "capability": "8.0"}]},
                                 "plan_checks": ["plan"], "checks": {"pretrain_gpu": got, "nccl_allreduce": {
                                     "status": "ok", "rows": [{"bytes": 2**20, "seconds": 1e-4, "algbw": 1e10,
                                                               "busbw": 1e10}]}}})
    assert "| 1 MiB | 0.100 ms | 10.0 GB/s | 10.0 GB/s |" in md and "### pretrain_gpu: failed" in md
    assert re.search(r"resumed at step 10 on 1: failed; 1 process\(es\); 500,000 tokens/s; MFU 0\.\d\d%; 10 step", md)


def test_gpu_pretrain_check_on_one_gpu_says_another_count_needs_two(tmp_path, monkeypatch):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "manifest.json").write_text(json.dumps({"extra": {"vocab_size": 2000}}))
    monkeypatch.setattr(probe, "build_tiny_data", lambda work, seq_len: (shards, tmp_path / "tok"))
    monkeypatch.setattr(probe, "pretrain_once", lambda cfg, nproc, accelerator: {"error": "boom", "seconds": 0.1})
    got = doctor.pretrain_check(tmp_path, 1, "cuda", 20, "tiny", "bf16", "NVIDIA H100 PCIe")
    assert got["status"] == "failed" and got["runs"] == [
        {"name": "20 steps on 1", "status": "failed", "world": 1, "problems": ["boom"]}]
    assert doctor.nccl_check(1, 256, tmp_path)["status"] == "skipped"
