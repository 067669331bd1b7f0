"""`lmforge bench gpu` on the CPU: the smoke run of the GPU benchmark's code (data stages, a real `lmforge pretrain`
with its profile window, the plain loop, the HF Trainer, the report and gpu.json), in seconds per variant."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("objective,variants", [("mlm", ["lmforge", "plain", "hf_trainer"]),
                                                ("causal", ["lmforge", "plain"])])  # the Trainer's causal: bench train
def test_bench_gpu_smoke_run_on_the_cpu(tmp_path, objective, variants):
    from bench.train.gpu import main
    from training.doctor.checks import vader_corpus

    # a corpus stage's output from the bundled VADER sentences (real text; the crawl's corpus needs Beam)
    corpus = vader_corpus(tmp_path / "corpus")
    report = tmp_path / "BENCHMARKS.md"
    assert main(["--corpus", str(corpus), "--work", str(tmp_path / "work"), "--variants", *variants,
                 "--out", str(report), "--objective", objective]) == 0
    assert not report.exists()  # a CPU run measures nothing: docs stay as they are
    doc = json.loads((tmp_path / "work" / "gpu.json").read_text())
    assert doc["device"] == "cpu" and set(doc["variants"]) == set(variants)
    for name, v in doc["variants"].items():
        assert "error" not in v, (name, v)
        assert v["tokens_per_s"] > 0 and v["micro_batch_size"] == 4
    full = json.loads((tmp_path / "work" / "report.json").read_text())
    prof = full["results"]["lmforge"]["profile"]
    assert prof["ops_per_step"] > 0 and prof["window"] == [3, 4]
    assert full["results"]["lmforge"]["plan"]["zero_stage"] == 0
    assert full["sizes"]["objective"] == objective
    head = full["results"]["lmforge"]["head_share"]
    assert head == 1.0 if objective == "causal" else 0 < head < 0.3  # a decoder's head at every position
    shards = json.loads(next((tmp_path / "work").glob(f"shards-{objective}-*/manifest.json")).read_text())
    assert shards["extra"]["objective"] == objective
