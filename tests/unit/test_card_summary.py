"""The card's opening verdict, the corpus's warning lines and the console's line per stage, from the records they read."""
from __future__ import annotations

import json

from common.stats import proportion_interval
from training.evaluation.card_summary import verdict


def _row(key: str, per_seed: dict[str, float], n_test: int = 300, metric: str = "accuracy") -> dict:
    from statistics import mean

    m = mean(per_seed.values())
    low, high = (proportion_interval(m, n_test) if len(per_seed) == 1 and metric == "accuracy" else (None, None))
    return {"row": key, "mean": m, "low": low, "high": high, "per_seed": per_seed}


def test_the_verdict_pairs_seeds_and_names_the_controls_ahead():
    paid = [_row("pretrained", {"1": 0.80, "2": 0.82, "3": 0.81}), _row("scratch", {"1": 0.70, "2": 0.71, "3": 0.69}),
            _row("tfidf_lr", {"null": 0.90}), _row("majority", {"null": 0.40})]
    v = verdict("accuracy", paid)
    assert v.startswith("Pretraining paid: the fine-tuned model beat its random-init twin by +0.110 (95% interval")
    assert "3 paired seeds" in v and "TF-IDF + LR (0.900) is ahead of both" in v and "majority" not in v
    lost = [_row("pretrained", {"1": 0.60, "2": 0.61, "3": 0.59}), _row("scratch", {"1": 0.70, "2": 0.71, "3": 0.69})]
    assert verdict("accuracy", lost).startswith("Pretraining did not pay")
    noisy = [_row("pretrained", {"1": 0.60, "2": 0.80}), _row("scratch", {"1": 0.70, "2": 0.69})]
    assert verdict("accuracy", noisy).startswith("Pretraining made no difference these seeds can show")
    # a loss: lower is better, so the same numbers read the other way
    assert verdict("mse", lost).startswith("Pretraining paid")
    # both models predicting the majority class at every seed: the same scores, said plainly, beside the majority
    alike = [_row("pretrained", {"1": 0.317, "2": 0.317}), _row("scratch", {"1": 0.317, "2": 0.317}),
             _row("majority", {"null": 0.317})]
    assert verdict("macro_f1", alike) == ("Pretraining made no difference: the fine-tuned model and its random-init twin "
                                          "scored the same at each of 2 seeds (0.317 on average); neither beats the "
                                          "majority class (0.317).")


def test_one_seed_reads_the_test_set_interval_and_a_missing_twin_says_so():
    close = [_row("pretrained", {"1": 0.46}), _row("scratch", {"1": 0.47}), _row("majority", {"null": 0.47})]
    v = verdict("accuracy", close)
    assert "within each other's test-set intervals: no verdict on pretraining" in v
    assert "neither beats the majority class (0.470)" in v
    apart = [_row("pretrained", {"1": 0.90}), _row("scratch", {"1": 0.50})]
    assert verdict("accuracy", apart).startswith("From one seed, pretraining paid")
    assert "No random-init twin" in verdict("accuracy", [_row("pretrained", {"1": 0.9})])
    no_interval = [_row("pretrained", {"1": 0.3}, metric="pearson"), _row("scratch", {"1": 0.2}, metric="pearson")]
    assert verdict("pearson", no_interval).endswith("with no interval: no verdict on pretraining.")


def test_a_reason_dropping_over_a_quarter_warns_with_the_languages_it_took():
    from pipelines.corpus.report import languages_table, warnings

    counts = {"in": 600, "kept": 97, "dropped": {"language_not_kept": 446, "too_short": 40},
              "quarantined_by_reason": {"missing_text": 17}, "duplicates": 0,
              "dropped_by_language": {"fr": {"language_not_kept": 250, "too_short": 10}, "de": {"language_not_kept": 196},
                                      "en": {"too_short": 30}},
              "cleaned_by_language": {}}
    assert warnings(counts) == ["446 of 600 documents (74%) dropped as language_not_kept (fr 250, de 196; "
                                "--languages chooses)"]
    rows = languages_table(counts, {"en": 97})
    assert [r["language"] for r in rows] == ["fr", "de", "en"] and rows[2] == {
        "language": "en", "kept": 97, "passed_cleaning": None, "dropped": 30, "dropped_by_reason": {"too_short": 30}}


def test_a_class_no_score_sees_is_named(tmp_path):
    from tests.fixtures import tweets_csv
    from training.finetuning.dataset import Columns, load_task
    from training.finetuning.prepare import unscored_classes

    f = tmp_path / "tweets.csv"
    tweets_csv(f, n=200)
    lines = f.read_text(encoding="utf-8").splitlines()
    text, _, label = lines[1].rpartition(",")
    f.write_text("\n".join([*lines, f"{text},sarcastic"]) + "\n", encoding="utf-8")  # one tweet again, a class alone
    data = load_task("classification", Columns(text="tweet", label="sentiment"), data=[str(f)], split_seed=0)
    assert unscored_classes(data, "classification") == [
        "class 'sarcastic' has 1 row: none in validation or test, so no score sees it"]
    assert unscored_classes(data, "regression") == []


def test_the_console_line_of_a_stage_is_its_key_counts(tmp_path):
    from flows.stages.lines import stage_summary

    (tmp_path / "manifest.json").write_text(json.dumps({
        "stage": "corpus", "counts": {"in": 195, "kept": 160, "kept_by_language": {"fr": 68, "de": 80, "en": 12}},
        "extra": {"warnings": ["x"]}}))
    assert stage_summary("corpus", tmp_path) == "kept 160 of 195 documents (de 80, fr 68, en 12); 1 warning above"
    (tmp_path / "manifest.json").write_text(json.dumps({
        "stage": "finetune", "counts": {}, "extra": {"primary_metric": "accuracy", "test": {
            "majority": 0.46, "pretrained": 0.5, "tfidf_lr": 0.52}}}))
    assert stage_summary("finetune", tmp_path) == "test accuracy: fine-tuned 0.500, TF-IDF + LR 0.520, majority 0.460"
    assert stage_summary("corpus", tmp_path / "missing") == "written"


def test_what_each_language_lost_reads_commonest_first():
    from training.evaluation.card_summary import losses_text

    lost = {"en": {"too_short": 2}, "fr": {"gopher_alpha_words": 14, "too_short": 8}, "none": {"empty_text": 1}}
    assert losses_text(lost) == "fr 22 (gopher_alpha_words 14), en 2 (too_short 2), none 1 (empty_text 1)"
    assert losses_text(lost, most=1) == "fr 22 (gopher_alpha_words 14) and 2 more"


def test_the_ablation_report_says_the_cards_sentence_for_its_baseline_arm():
    from flows.ablation.report import pretraining_verdicts

    report = {"arms": {"baseline": {"tasks": {"vader": {"metric": "accuracy", "test_examples": 2302,
                                                        "by_seed": {1: 0.50, 2: 0.52, 3: 0.47}}}}},
              "controls": {"vader": {"metric": "accuracy", "scratch_by_seed": {1: 0.60, 2: 0.61, 3: 0.58},
                                     "majority": 0.44, "tfidf_lr": 0.626},
                           "reuters": {"metric": "macro_f1", "scratch_by_seed": {}}}}  # no baseline score: left out
    said = pretraining_verdicts(report)
    assert said == ["vader (baseline arm, test accuracy): Pretraining did not pay: the fine-tuned model trailed its "
                    "random-init twin by -0.100 (95% interval -0.125 to -0.075, 3 paired seeds); TF-IDF + LR (0.626) "
                    "is ahead of both."], said
    report["arms"]["baseline"] = {"error": "stage pretrain failed"}
    assert pretraining_verdicts(report) == []


def test_not_run_lists_each_part_the_run_skipped_with_why():
    """The card's "Not run": probing not asked, the task score's absence, and what the run says it skipped
    (`evaluate --not-run`, e.g. a decoder's head pruning)."""
    from types import SimpleNamespace

    from training.evaluation.card_summary import skipped_parts

    cfg = SimpleNamespace(probe_corpus="", task_config="t.json", task_note="",
                          not_run=["the pruned model: head pruning is for BERT-style encoders"])
    out = skipped_parts([], cfg)
    assert out[0].startswith("probing and pseudo-perplexity: not asked") and out[-1] == cfg.not_run[0]
    assert skipped_parts([], SimpleNamespace(probe_corpus="c", task_config="t.json", task_note="", not_run=[])) == []
