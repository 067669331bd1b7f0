"""bench transfer's pure parts: the corpus builder's text formats, the goals and the report."""
from __future__ import annotations

import gzip
import json

from bench.kit.real_text import _b64, dictd_entries, pod_text
from bench.transfer.payoff_report import goals, plot, render


def test_pod_text_keeps_prose_and_drops_code():
    pod = ("=head1 NAME\n\nperlintro - a brief B<introduction> to C<perl>\n\n=head2 Running\n\n"
           "    print \"Hello\";\n\nRun it with L<perlrun>.\n\n=cut\n")
    assert pod_text(pod) == "NAME\n\nperlintro - a brief introduction to perl\n\nRunning\n\nRun it with perlrun."


def test_dictd_index_points_into_the_gzipped_dictionary(tmp_path):
    body = "apple\n  A fruit.\nbanana\n  Another fruit.\n"
    (tmp_path / "x.dict.dz").write_bytes(gzip.compress(body.encode()))
    # dictd's base64 numbers: "A" = 0, "BA" = 64; entries at 0 (17 bytes) and 17 (23 bytes)
    assert _b64("BA") == 64 and _b64("R") == 17
    (tmp_path / "x.index").write_text("00-database-info\tA\tB\napple\tA\tR\nbanana\tR\tX\nbananas\tR\tX\n")
    assert dictd_entries(tmp_path / "x.index") == ["apple\n  A fruit.", "banana\n  Another fruit."]


def _task(kind, primary, means):
    rows = {r: {"test": {primary: {"per_seed": {"1": m, "2": m}, "mean": m, "sd": 0.01}}} for r, m in means.items()}
    return {"task": kind, "primary": primary, "labels": ["a", "b"], "plan": {"max_train": 0, "max_length": 64, "epochs": 3},
            "counts": {"train_examples": 10, "validation_examples": 2, "test_examples": 3}, "rows": rows}


RES = {
    "config": {"seeds": [1, 2], "model": "bert_mini", "budget_minutes": 60, "nproc": 2, "mask_rate": 0.15, "lr": 1e-3,
               "ft_lr_small": 3e-4, "cpt_minutes": 15, "cpt_lr": 1e-4, "ft_lr_minilm": 1e-4, "probe_minutes": 4},
    "corpus": {"counts": {"in": 100, "kept": 80, "duplicates": 5, "quarantined": 0}, "words": {"en": 2e6, "ru": 1e6},
               "sources": {"fortunes": {"version": "1.99", "language": "en", "records": 3, "licence": "BSD"}}},
    "pretraining": {}, "in_domain": {"minilm_cpt": {"loss": 2.1, "masked_tokens": 900}, "minilm_probe": {"loss": 3.4}},
    "tasks": {
        "vader": _task("classification", "accuracy", {"lmforge": 0.70, "lmforge_scratch": 0.65, "minilm": 0.80,
                                                     "tfidf_lr": 0.75, "majority": 0.44}),
        "reuters": _task("classification", "macro_f1", {"lmforge": 0.60, "lmforge_scratch": 0.59, "minilm": 0.70,
                                                       "tfidf_lr": 0.72, "majority": 0.32}),
        "wsj_pos": _task("tokens", "token_accuracy", {"lmforge": 0.90, "lmforge_scratch": 0.80, "tfidf_lr": 0.93}),
    },
}


def test_goals_are_judged_from_the_means(tmp_path):
    g = {name: (met, ev) for name, met, ev in goals(RES)}
    twin, minilm, domain = list(g.values())
    assert twin == (True, "vader +5.0, reuters +1.0, wsj_pos +10.0")
    assert minilm[0] is False and "reuters 70.0 vs 72.0" in minilm[1]  # loses on one task: not met
    assert domain[0] is True and "2.100 after vs 3.400" in domain[1]
    md = render(RES)
    # the card's sentence opens the section, per task: here both seeds of each row score alike (a paired interval of
    # zero width), vader's pretrained model 5 points above its twin and TF-IDF above both
    said = md[:md.index("### Goals")]
    assert ("- vader (test accuracy): Pretraining paid: the fine-tuned model beat its random-init twin by +0.050 "
            "(95% interval +0.050 to +0.050, 2 paired seeds); TF-IDF + LR (0.750) is ahead of both.") in said, said
    assert "- wsj_pos (test token_accuracy): Pretraining paid" in said and "neither beats" not in said
    assert "| lmforge architecture, random init | 65.0 ± 1.0 |" in md and "| fortunes 1.99 | en | 3 | BSD |" in md
    assert plot(RES, tmp_path / "t.png").stat().st_size > 5000
    timed = render({**RES, "timings": {"corpus": 120.0, "pretrain": 3600.0}, "wall_seconds": 300.0})
    assert "the steps took 62 minutes in all" in timed and "pretrain 60.0" in timed and "invocation 5 minutes" in timed


def test_resume_reruns_a_step_whose_settings_changed_and_what_reads_it(tmp_path):
    """bench.kit.steps.Steps, as bench transfer runs it: a step of the bench before .flow-key.json (its command in
    .bench-argv.json) is kept while its command is the same and nothing it reads ran again."""
    from bench.kit.steps import LEGACY_ARGV_FILE, Steps

    s = Steps("transfer", tmp_path / "w" / "logs", resume=True, keep_partial=True, append_logs=True)
    a, b = tmp_path / "w" / "a", tmp_path / "w" / "b"
    for d, argv in ((a, ["finetune", "--lr", "1e-3", "--resume"]), (b, ["finetune", "--model", str(a / "hf")])):
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"schema": "lmforge.manifest/v1", "stage": "finetune", "wall_seconds": 12.0}))
        (d / LEGACY_ARGV_FILE).write_text(json.dumps([x for x in argv if x != "--resume"]))
    assert s.stale(a, ["finetune", "--lr", "1e-3"]) == ""  # --resume is not a setting
    assert "settings changed" in s.stale(a, ["finetune", "--lr", "3e-4"])
    assert s.run("a", a, ["finetune", "--lr", "1e-3", "--resume"]) == a and s.timings["a"] == 12.0  # kept, not run
    assert (a / ".flow-key.json").exists()  # its key from now on: the same rule as the flows'
    assert s.stale(b, ["finetune", "--model", str(a / "hf")]) == ""
    s.ran_outputs.append(str(a))
    assert "which ran again" in s.stale(b, ["finetune", "--model", str(a / "hf")])
    c = tmp_path / "w" / "c"
    c.mkdir()
    (c / "manifest.json").write_text("{}")
    (c / LEGACY_ARGV_FILE).write_text(json.dumps(["finetune", "--model", str(a) + "_cpt/hf"]))
    assert s.stale(c, ["finetune", "--model", str(a) + "_cpt/hf"]) == ""  # a prefix of a name is not a path below it
    # with its key: a step it reads whose manifest changed (it ran again) runs it again
    s.ran_outputs.clear()
    s.run("b", b, ["finetune", "--model", str(a / "hf")])
    assert s.stale(b, ["finetune", "--model", str(a / "hf")]) == ""
    (a / "manifest.json").write_text(json.dumps({"schema": "lmforge.manifest/v1", "stage": "finetune", "wall_seconds": 13.0}))
    assert "which ran again" in s.stale(b, ["finetune", "--model", str(a / "hf")])
    assert "settings changed" in s.stale(b, ["finetune", "--model", str(a / "hf"), "--lr", "1e-4"])


def test_steps_fail_in_one_line_with_the_log(tmp_path):
    """A step that exits non-zero: the bench stops with its own error line and its log, no tail of 30 lines."""
    import pytest

    from bench.kit.steps import Steps

    s = Steps("transfer", tmp_path / "logs")
    with pytest.raises(SystemExit) as e:
        s.run("finetune", tmp_path / "ft", ["finetune", "--no-such-option"])
    msg = str(e.value)
    assert msg.startswith("bench transfer: stage finetune failed: ") and "--no-such-option" in msg, msg
    assert str(tmp_path / "logs" / "finetune.log") in msg and "\n" not in msg


def _cost(per_s, disk, peak=300 * 2**20):
    run = {"inputs_per_second_median": per_s, "latency_ms_p50": 1000 / per_s, "latency_ms_p95": 1200 / per_s}
    return {"parameters": {"total": 22_000_000, "without_embeddings": 10_000_000}, "disk_bytes": disk,
            "peak_rss_bytes": peak, "with_head": run, "encoder_only": run}


def _comp_task(teacher, student, fp32, int8, pruned):
    def sc(m):
        return {"mean": m, "sd": 0.005, "per_seed": {"1": m, "2": m}}

    return {"primary": "accuracy", "teacher": sc(teacher), "student": sc(student), "fp32": fp32, "int8": int8,
            "pruned": {k: {"score": v, "heads_removed": int(float(k) * 72), "heads_total": 72} for k, v in pruned.items()}}


COMP = {
    "config": {"distill_steps": 600, "tasks": ["vader", "reuters"], "prune_shares": [0.1, 0.3, 0.5],
               "cost_inputs": 1000, "cost_repeats": 3, "seeds": [1, 2]},
    "families": {"minilm": {
        "distill": {"steps": 600, "tokens_seen": 1_200_000, "copied_layers": [0, 3, 5], "teacher_layers": 6,
                    "student_layers": 3, "teacher_parameters": 22.7e6, "student_parameters": 17.4e6,
                    "student_valid_mlm_loss": 3.1, "teacher_valid_mlm_loss": 2.9, "fit_seconds": 900},
        "tasks": {"vader": _comp_task(0.75, 0.74, 0.76, 0.757, {"0.10": 0.755, "0.30": 0.752, "0.50": 0.70}),
                  "reuters": _comp_task(0.60, 0.57, 0.62, 0.60, {"0.10": 0.615, "0.30": 0.59, "0.50": 0.55})},
        "cost": {"task": "vader", "max_length": 64, "models": {
            "teacher": _cost(100, 90e6), "student": _cost(190, 70e6), "int8": _cost(130, 40e6),
            "pruned 0.10": _cost(105, 88e6), "pruned 0.30": _cost(118, 85e6), "pruned 0.50": _cost(135, 80e6)}}}},
}


def test_compression_goals_and_tables(tmp_path):
    from bench.transfer.compression import best_prune_share
    from bench.transfer.compression import goals as comp_goals
    from bench.transfer.compression import plot as comp_plot
    from bench.transfer.compression import render as comp_render

    g = comp_goals(COMP)
    student, int8, prune = g
    # vader keeps 98.7%, reuters 95.0%: one task below 97% fails the goal although the speed-up is 1.9x
    assert student[1] is False and "vader 98.7%" in student[2] and "reuters 95.0%" in student[2] and "1.90x" in student[2]
    # int8: 99.6% and 96.8% of the same fp32 model; 2.25x smaller; 1.30x faster: reuters breaks the 99% goal
    assert int8[1] is False and "reuters 96.8%" in int8[2] and "2.25x smaller" in int8[2] and "1.30x" in int8[2]
    # pruning: the largest share within 1 point of fp32 (vader 0.30 at -0.8 points; reuters 0.10 at -0.5, 0.30 at -3)
    assert best_prune_share(COMP["families"]["minilm"]["tasks"]["vader"]) == (0.3, 0.752)
    assert best_prune_share(COMP["families"]["minilm"]["tasks"]["reuters"]) == (0.1, 0.615)
    assert prune[1] is True and "vader 30%" in prune[2]
    md = comp_render(COMP)
    assert "| minilm | vader (accuracy) | 75.0 ± 0.5 | 74.0 ± 0.5 | 98.7% | 76.0 | 75.7 | 99.6% |" in md
    assert "| minilm | student | 3 (teacher's 0, 3, 5) |" in md and "1.90x" in md
    assert "6, 51/72 heads" in md  # pruned 0.30: 21 of 72 removed, 51 left
    assert comp_plot(COMP, tmp_path / "c.png").stat().st_size > 5000
    assert comp_render({}) == "" and comp_goals({}) == []
    full = render({**RES, "compression": COMP})
    assert "### Compression" in full and "benchmarks/compression.png" in full
    assert "vader TF-IDF + LR 75.0, majority 44.0; reuters TF-IDF + LR 72.0, majority 32.0" in full


def test_an_experiment_lists_its_model_seeds_and_each_tasks_pair():
    exp = {"work": "runs/bench-transfer-demo", "model": "demo", "prenorm": True, "dropout": 0.0, "bf16": True,
           "global_batch": 32, "lr": 1e-3, "mask_rate": 0.15, "budget_minutes": 60, "steps": 9000,
           "tokens_seen": 36_864_000, "valid_loss": 4.2, "seeds": [1, 2, 3],
           "tasks": {"vader": {"primary": "accuracy", "lmforge": 0.58, "lmforge_scratch": 0.56, "tfidf_lr": 0.63}},
           "verdicts": ["vader (test accuracy): Pretraining paid: ..."], "machine": "a CPU, 2 cores",
           "measured_utc": "2026-11-29 01:43 UTC"}
    md = render({**RES, "experiments": [exp]})
    assert "| run | model | seeds | layout | dropout | precision | batch x 128 | budget | steps | tokens |" in md
    assert "| bench-transfer-demo | demo | 3 | pre-LN | 0.0 | bf16 | 32 | 60 min | 9,000 | 36.9M | 4.200 | - | " \
           "the task's epochs | 58.0 vs 56.0 |" in md
    untied = {**exp, "work": "runs/untied", "untied": True, "ft_min_steps": 800,
              "token_embeddings": {"mean_cosine": 0.1234, "effective_rank": 120.0}}
    md = render({**RES, "experiments": [exp, untied]})
    assert "| untied | demo | 3 | pre-LN, untied | 0.0 | bf16 | 32 | 60 min | 9,000 | 36.9M | 4.200 | 0.12 | " \
           "at least 800 | 58.0 vs 56.0 |" in md
    assert "- bench-transfer-demo, vader (test accuracy): Pretraining paid: ..." in md
    assert "bench-transfer-demo: measured 2026-11-29 01:43 UTC on a CPU, 2 cores." in md


def test_an_experiments_embedding_geometry_comes_from_its_metrics_or_its_export(tmp_path):
    import json

    from bench.transfer.payoff import token_embeddings

    pre = tmp_path / "pretrain"
    pre.mkdir()
    assert token_embeddings(pre) is None  # neither metrics nor an export
    (pre / "metrics.json").write_text(json.dumps({"token_embeddings": {"mean_cosine": 0.8}}))
    assert token_embeddings(pre) == {"mean_cosine": 0.8}
