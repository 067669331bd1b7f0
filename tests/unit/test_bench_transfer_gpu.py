"""bench transfer --gpu's pure parts: time to quality from two held-out curves, the verdict and the report."""
from __future__ import annotations

import gzip
import json

from bench.transfer.gpu import compare, gzipped, main
from bench.transfer.gpu_report import LOSES, PAYS, TIE, goals, render, sentence, task_verdict


def test_time_to_quality_is_each_systems_first_time_at_the_trainers_best_loss():
    ours = [{"step": 100, "loss": 6.0, "train_s": 30.0}, {"step": 200, "loss": 5.0, "train_s": 40.0},
            {"step": 300, "loss": 4.4, "train_s": 50.0}]
    hf = [{"step": 100, "loss": 6.2, "train_s": 50.0}, {"step": 200, "loss": 4.9, "train_s": 80.0}]
    q = compare(ours, hf)
    assert q["target"] == 4.9 and q["hf_s"] == 80.0
    assert q["lmforge_s"] == 50.0 and q["ratio"] == 50.0 / 80.0  # 5.0 at 40 s is not yet 4.9
    assert q["same_steps"] == [{"step": 100, "lmforge": 6.0, "hf": 6.2}, {"step": 200, "lmforge": 5.0, "hf": 4.9}]
    never = compare(ours[:1], hf)
    assert never["lmforge_s"] is None and never["ratio"] is None
    assert compare([], hf) == {"target": None}


def _task(pre: dict[int, float], twin: dict[int, float], tfidf: float, ci: tuple[float, float] | None):
    def row(per):
        vals = list(per.values())
        return {"test": {"accuracy": {"per_seed": {str(k): v for k, v in per.items()}, "mean": sum(vals) / len(vals),
                                      "sd": 0.01}}, "lr": 1e-4}
    return {"primary": "accuracy", "labels": 3, "counts": {"train_examples": 30, "test_examples": 9},
            "rows": {"pretrained": row(pre), "scratch": row(twin), "tfidf_lr": row({0: tfidf}),
                     "majority": row({0: 0.4})},
            "paired": None if ci is None else {"mean": 100 * (sum(pre.values()) - sum(twin.values())) / len(pre),
                                               "ci_low": ci[0], "ci_high": ci[1]}}


def test_verdict_follows_the_paired_interval_and_the_sentence_counts_tasks():
    paid = _task({1: 0.8, 2: 0.82}, {1: 0.6, 2: 0.61}, 0.7, (15.0, 25.0))
    lost = _task({1: 0.5, 2: 0.52}, {1: 0.6, 2: 0.61}, 0.7, (-12.0, -7.0))
    tie = _task({1: 0.6, 2: 0.62}, {1: 0.6, 2: 0.61}, 0.7, (-3.0, 4.0))
    one_seed = _task({1: 0.6}, {1: 0.5}, 0.7, None)
    assert [task_verdict(t) for t in (paid, lost, tie, one_seed)] == [PAYS, LOSES, TIE, TIE]
    res = {"tasks": {"a": paid, "b": lost, "c": tie, "d": {"error": "stage finetune_d failed"}}}
    text = sentence(res)
    assert "paid on 1 of 3 tasks (a)" in text and "lost on 1 (b)" in text and "TF-IDF + logistic regression on 1 (a)" in text
    rows = "\n".join(goals(res))
    assert "| pretrained never below its twin (paired 95% interval) | no | b |" in rows
    assert "by >= 5 points on >= 2 tasks (paired interval above 0) | no |" in rows


def test_report_renders_a_run_whose_time_to_quality_did_not_run():
    res = {"device": "cpu", "config": {"model": "tiny", "budget_minutes": 0.25, "lr": 5e-4, "seeds": [1], "ft_lr": 1e-4,
                                       "ft_lr_grid": [], "eval_every": 5},
           "data": {"train_tokens": 1000, "valid_tokens": 100, "kept_by_language": {"en": 3}},
           "pretraining": {"num_parameters": 10, "steps": 7, "global_batch": 16, "seq_len": 128, "tokens_seen": 14336,
                           "precision": "bf16", "valid_loss": 7.5, "first_loss": 7.6, "last_loss": 7.5,
                           "curve": [{"step": 5, "loss": 7.6, "train_s": 9.0}]},
           "tasks": {"vader": _task({1: 0.4}, {1: 0.43}, 0.47, None)},
           "time_to_quality": {"error": "not run: 5 s of the run's 6 minutes were left"}, "wall_seconds": 200}
    text = render(res)
    assert text.startswith("_A CPU smoke run") and "Did pretraining pay?" in text
    # the card's sentence, per task, before the goals: one seed of 9 test items, intervals overlapping
    assert ("- vader (test accuracy): From one seed, the fine-tuned model (0.400) and its random-init twin (0.430) are "
            "within each other's test-set intervals: no verdict on pretraining") in text.split("### Goals")[0]
    assert "not run: 5 s of the run's 6 minutes were left" in text and "**vader** (3 labels; 30 train / 9 test" in text


def test_labelled_files_travel_gzipped_and_read_back(tmp_path):
    src = tmp_path / "data.jsonl"
    src.write_text(json.dumps({"text": "hi", "label": "pos"}) + "\n")
    gz = gzipped(src)
    assert gz.name == "data.jsonl.gz" and not src.exists()
    assert json.loads(gzip.decompress(gz.read_bytes())) == {"text": "hi", "label": "pos"}


def test_prepare_names_the_missing_stage(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit, match="is not a finished corpus stage"):
        main(["--prepare", "--transfer-data", str(tmp_path), "--data", str(tmp_path / "out")])
