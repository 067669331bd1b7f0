"""bench gpu's and bench attention's reports (pure): figures, goals and the JSON a script reads."""
from __future__ import annotations

from dataclasses import asdict

import pytest

from bench.train.attention import render as render_attention
from bench.train.attention import verdict
from bench.train.gpu import Sizes
from bench.train.gpu_report import figures, gpu_json, render


def _report(device="NVIDIA H100 80GB HBM3", lm_ms=100.0, peer_ms=60.0, failed=("hf_trainer_compiled",)):
    prof = {"wall_ms_per_step": 110.0, "gpu_busy_ms_per_step": 99.0, "gpu_busy_share": 0.9, "kernels_per_step": 700.0,
            "ops_per_step": 900.0, "top_ops": [["aten::mm", 148.0]],
            "kernel_kinds": [["matrix products", 60.0], ["attention", 20.0]], "top_kernels": [["nvjet_gemm_x", 30.0]]}
    results = {
        "lmforge": {"seconds_per_step": lm_ms / 1e3, "rows_per_step": 512, "seq_len": 128, "micro_batch_size": 512,
                    "head_share": 0.15, "profile": prof, "peak_memory_gb": 40.0, "compile": {"regions": ["a", "b"]},
                    "micro_batch_probe": {"fitted": 512, "usable_gb": 72.0, "tried": [[256, 2e10], [1024, None]]}},
        "lmforge_mb64": {"seconds_per_step": 0.012, "rows_per_step": 64, "seq_len": 128, "micro_batch_size": 64,
                         "head_share": 0.15, "profile": prof, "peak_memory_gb": 6.0},
        "plain": {"seconds_per_step": peer_ms / 1e3, "rows_per_step": 64, "seq_len": 128, "micro_batch_size": 64,
                  "head_share": 1.0, "profile": None, "peak_memory_gb": 7.0},
        **{name: {"error": "RuntimeError: boom"} for name in failed},
    }
    return {"machine": {"device": device, "torch": "2.11.0", "cuda": "13.0", "python": "3.12"},
            "sizes": asdict(Sizes.gpu()),
            "results": results, "wall_seconds": 400.0, "measured_utc": "2026-11-26 12:00 UTC"}


def test_gpu_figures_mfu_and_goals():
    report = _report()
    fig = figures(report)
    lm = fig["lmforge"]
    assert lm["tokens_per_s"] == pytest.approx(512 * 128 / 0.1)
    # bert_base at 128 tokens, 30,522 pieces, head at 15% of positions: ~0.545 GFLOP a token; 655k tokens/s on 989 TF
    assert 0.53e3 < lm["mflop_per_token"] < 0.56e3 and lm["mfu"] == pytest.approx(655360 * lm["mflop_per_token"] * 1e6 / 989e12)
    text = render(report)
    assert "MFU of lmforge's defaults at least 40%: **NOT MET**" in text  # 36%
    assert "lmforge at least 1.2x the best peer at micro batch 64: **MET** (5.00x plain PyTorch loop, eager; 1 of 4" in text
    assert "Did not run to the end: HF Trainer, bf16, torch_compile: RuntimeError: boom" in text
    assert "256: 20.0 GB, 1024: out of memory -> 512" in text
    assert "by kind of kernel: matrix products 60.0, attention 20.0; the longest: `nvjet_gemm_x` 30.0." in text
    doc = gpu_json(report)
    assert doc["device"] == "NVIDIA H100 80GB HBM3"
    assert set(doc["variants"]["lmforge"]) == {"tokens_per_s", "mfu", "micro_batch_size", "gpu_busy_share",
                                               "kernels_per_step", "peak_memory_gb"}
    assert doc["variants"]["hf_trainer_compiled"] == {"error": "RuntimeError: boom"}


def test_cpu_smoke_report_judges_nothing():
    text = render(_report(device="cpu"))
    assert text.startswith("**CPU smoke run") and "not judged: a CPU smoke run" in text and "**MET**" not in text


def _runs(row_doc, doc_doc, row_s=0.17, doc_s=0.18):
    runs = []
    for seed, (a, b) in enumerate(zip(row_doc, doc_doc)):
        runs.append({"trained_with": "row", "seed": seed, "seconds_per_step": row_s, "eval": {"row": 6.8, "document": a}})
        runs.append({"trained_with": "document", "seed": seed, "seconds_per_step": doc_s,
                     "eval": {"row": 6.8, "document": b}})
        runs.append({"trained_with": "untrained", "seed": seed, "eval": {"row": 9.0, "document": 9.0}})
    return runs


def test_attention_verdict_follows_gain_against_spread():
    inside = verdict(_runs([6.80, 6.84], [6.79, 6.83]))
    assert "inside the spread" in inside and "`--attention row` stays the default" in inside and "+6%" in inside
    assert "document attention pays here" in verdict(_runs([6.80, 6.81], [6.60, 6.61]))
    text = render_attention({"rows": {"rows": 10, "documents_per_row": 1.3, "tokens_sharing_a_row": 0.26},
                             "runs": _runs([6.80, 6.84], [6.79, 6.83]), "steps": 300, "seeds": [0, 1],
                             "verdict": "v"})
    assert "| untrained | - | 9.000 ± 0.000 | 9.000 ± 0.000 |" in text and "1.30 documents" in text


def test_profile_summary_splits_gpu_time_by_kernel_kind():
    from types import SimpleNamespace as NS

    from training.pretraining.step_profile import kernel_kind, summarize

    def cuda(name, start, end):
        return NS(name=name, device_type="DeviceType.CUDA", activity_type="kernel",
                  time_range=NS(start=start, end=end), cpu_parent=None)

    events = [cuda("sm90_xmma_gemm_bf16bf16_bf16f32", 0, 600), cuda("triton_per_fused_add_native_layer_norm_0", 600, 800),
              cuda("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 800, 1000),
              cuda("void at::native::vectorized_elementwise_kernel<4, GeluCUDA>", 1000, 1100),
              cuda("multi_tensor_apply_kernel<FusedAdamMathFunctor>", 1100, 1500)]
    out = summarize(events, steps=2, wall_s=0.004)
    assert out["kernels_per_step"] == 2.5 and out["gpu_busy_ms_per_step"] == pytest.approx(0.75)
    assert dict(out["kernel_kinds"]) == pytest.approx({"matrix products": 0.3, "optimizer": 0.2, "compiled (inductor)": 0.1,
                                                       "attention": 0.1, "eager elementwise": 0.05})
    assert out["top_kernels"][0] == ["sm90_xmma_gemm_bf16bf16_bf16f32", 0.3]
    assert kernel_kind("void at::native::(anonymous)::indexing_backward_kernel") == "embedding"
    assert kernel_kind("something new") == "other"
