"""`lmforge finetune` end to end on real sentences with a tiny model: every task kind, seeds, controls, outputs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.finetune import FinetuneMetrics
from schemas.manifest import read_manifest, verify_outputs
from tests.fixtures import tiny_bert_dir, tiny_llama_dir
from tests.unit.test_finetune_data import vader_rows, write_jsonl


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_bert_dir(tmp_path_factory.mktemp("model"))


def finetune(argv: list[str]) -> None:
    from lmforge.cli import main

    assert main(["finetune", "--epochs", "1", "--batch-size", "16", "--lr", "1e-3", "--max-length", "48", *argv]) == 0


def split_reviews(path: Path, n: int) -> tuple[list[dict], Path]:
    """n real VADER sentences with a split column: every 10th test, the next validation, the rest train."""
    rows = vader_rows(n)
    for k, r in enumerate(rows):
        r["split"] = "test" if k % 10 == 0 else "validation" if k % 10 == 1 else "train"
    return rows, write_jsonl(path, rows)


def test_three_class_jsonl_with_split_column_in_one_command(tmp_path, model_dir):
    rows, data = split_reviews(tmp_path / "reviews.jsonl", 400)
    out = tmp_path / "ft"
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(out), "--seeds", "1", "2",
              "--init", "pretrained", "scratch"])
    m = FinetuneMetrics.read(out / "metrics.json")
    assert m.labels == ["negative", "neutral", "positive"] and m.primary_metric == "accuracy"
    assert set(m.rows) == {"pretrained", "scratch", "majority", "tfidf_lr"}
    acc = m.rows["pretrained"].scores["test"]["accuracy"]
    assert set(acc.per_seed) == {"1", "2"} and acc.sd is not None and 0 <= acc.mean <= 1
    assert m.counts["test_examples"] == 40 and m.counts["validation_examples"] == 40
    majority = m.rows["majority"].scores["test"]["accuracy"].mean
    top = max(("negative", "neutral", "positive"), key=lambda c: sum(r["label"] == c for r in rows if r["split"] == "train"))
    assert majority == pytest.approx(sum(r["label"] == top for r in rows[::10]) / 40)
    assert m.saved["row"] == "pretrained" and m.saved["seed"] in (1, 2)
    verify_outputs(out)
    assert read_manifest(out)["extra"]["primary_metric"] == "accuracy"

    from transformers import AutoModelForSequenceClassification, pipeline

    model = AutoModelForSequenceClassification.from_pretrained(out / "hf")
    assert model.config.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    clf = pipeline("text-classification", model=str(out / "hf"), tokenizer=str(out / "hf"))
    assert clf("What a wonderful day")[0]["label"] in {"negative", "neutral", "positive"}


def test_pairs_and_regression(tmp_path, model_dir):
    rows = vader_rows(300)
    pairs = [{"id": r["id"], "a": r["text"], "b": rows[(k + 1) % len(rows)]["text"],
              "same": int(r["label"] == rows[(k + 1) % len(rows)]["label"]), "score": r["score"]}
             for k, r in enumerate(rows)]
    data = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    out = tmp_path / "pair"
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(out), "--text-column", "a",
              "--text-pair-column", "b", "--label-column", "same"])
    m = FinetuneMetrics.read(out / "metrics.json")
    assert m.labels == ["0", "1"] and m.rows["tfidf_lr"].scores["test"]["mcc"].mean is not None
    out = tmp_path / "reg"
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(out), "--text-column", "a",
              "--task", "regression", "--label-column", "score", "--no-controls", "--bf16"])
    m = FinetuneMetrics.read(out / "metrics.json")
    assert m.primary_metric == "pearson" and set(m.rows) == {"pretrained"}
    assert m.rows["pretrained"].scores["test"]["mse"].mean > 0
    cfg = json.loads((out / "hf" / "config.json").read_text())
    assert cfg["problem_type"] == "regression" and cfg["id2label"] == {"0": "score"}


def test_bad_input_is_a_clear_cli_error(tmp_path, model_dir, capsys):
    from lmforge.cli import main

    data = write_jsonl(tmp_path / "d.jsonl", [{"sentence": r["text"], "label": r["label"]} for r in vader_rows(30)])
    code = main(["finetune", "--model", str(model_dir), "--data", str(data), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and f"{data}:1: no column 'text'" in err


def test_token_tagging_on_real_wsj_pos_tags(tmp_path, model_dir):
    from pipelines.labeled.registry import prepare

    root = Path(__file__).resolve().parents[1] / "data" / "labeled" / "pattern"
    prepared = prepare("wsj_pos", tmp_path / "wsj", root)
    out = tmp_path / "pos"
    finetune(["--config", str(prepared / "finetune.json"), "--model", str(model_dir), "--output", str(out),
              "--epochs", "2"])
    m = FinetuneMetrics.read(out / "metrics.json")
    assert m.task == "tokens" and m.primary_metric == "token_accuracy" and "NNP" in m.labels
    assert set(m.rows["pretrained"].scores["test"]) == {"token_accuracy"}  # POS tags are not BIO spans
    # the most-frequent-tag-per-word control is strong on WSJ even from 60-odd sentences
    assert m.rows["majority"].scores["test"]["token_accuracy"].mean > 0.5
    assert m.rows["tfidf_lr"].scores["test"]["token_accuracy"].mean > 0.5

    from transformers import AutoModelForTokenClassification

    model = AutoModelForTokenClassification.from_pretrained(out / "hf")
    assert set(model.config.id2label.values()) == set(m.labels)


def test_lr_grid_keeps_each_inits_best_mean_validation(tmp_path, model_dir):
    _, data = split_reviews(tmp_path / "reviews.jsonl", 300)
    out = tmp_path / "ft"
    # 1e-9 cannot move the weights off a random head; 1e-3 learns something
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(out), "--seeds", "1", "2",
              "--init", "pretrained", "scratch", "--lr-grid", "1e-9", "--no-controls"])
    m = FinetuneMetrics.read(out / "metrics.json")
    for init in ("pretrained", "scratch"):
        d = m.rows[init].details
        search = d["lr_search"]
        assert set(search) == {"0.001", "1e-09"}
        chosen = max(search, key=lambda k: search[k])
        assert d["lr"] == float(chosen)
        # the row's scores are those of the chosen rate: its validation mean is the search's best
        assert m.rows[init].scores["validation"]["accuracy"].mean == pytest.approx(search[chosen])
        assert set(m.rows[init].scores["test"]["accuracy"].per_seed) == {"1", "2"}
    assert m.saved["lr"] == m.rows["pretrained"].details["lr"]
    assert (out / "hf" / "config.json").exists() and not list(out.glob(".hf-lr*"))
    verify_outputs(out)


def test_min_steps_adds_epochs_only_where_the_data_is_small():
    from training.finetuning.trainer import Recipe, epochs_for

    assert epochs_for(Recipe(epochs=3, batch_size=32, min_steps=600), 811) == 24  # 26 steps an epoch
    assert epochs_for(Recipe(epochs=3, batch_size=32, min_steps=600), 100_000) == 3
    assert epochs_for(Recipe(epochs=3, batch_size=32), 811) == 3


def test_early_stopping_waits_for_min_steps(tmp_path, model_dir):
    from training.finetuning.trainer import Recipe, stop_early

    assert stop_early(Recipe(patience=2), stale=2, step=10)
    assert not stop_early(Recipe(patience=2, min_steps=800), stale=2, step=132)  # a flat start is not a failure
    assert stop_early(Recipe(patience=2, min_steps=800), stale=2, step=800)
    assert not stop_early(Recipe(patience=0), stale=50, step=10_000)
    _, data = split_reviews(tmp_path / "reviews.jsonl", 300)
    out = tmp_path / "ft"
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(out), "--lr", "1e-9",
              "--patience", "1", "--min-steps", "20", "--no-controls"])
    d = FinetuneMetrics.read(out / "metrics.json").rows["pretrained"].details["1"]
    assert d["planned_steps"] > 3 * 5 and d["steps"] >= 20  # more than 3 epochs, none of them cut short


def test_lr_grid_must_not_repeat_lr(tmp_path, model_dir, capsys):
    from lmforge.cli import main

    data = write_jsonl(tmp_path / "r.jsonl", vader_rows(60))
    with pytest.raises(SystemExit) as e:
        main(["finetune", "--model", str(model_dir), "--data", str(data), "--output", str(tmp_path / "o"),
              "--lr", "1e-3", "--lr-grid", "1e-3"])
    assert e.value.code != 0 and "lr_grid must hold distinct positive rates" in capsys.readouterr().err


def test_soft_label_loss_is_hintons_kl_on_labelled_positions():
    import torch
    import torch.nn.functional as F

    from training.finetuning.trainer import soft_label_loss

    torch.manual_seed(0)
    s, t = torch.randn(4, 3), torch.randn(4, 3)
    want = (F.softmax(t / 2, -1) * (F.log_softmax(t / 2, -1) - F.log_softmax(s / 2, -1))).sum(-1).mean() * 4
    assert torch.allclose(soft_label_loss(s, t, torch.zeros(4, dtype=torch.long), 2.0), want)
    assert soft_label_loss(t, t, torch.zeros(4, dtype=torch.long), 2.0).abs() < 1e-6
    # tagging: only positions with a label count
    s3, t3 = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    labels = torch.tensor([[0, -100, 1, -100, 2], [-100, 1, -100, -100, -100]])
    keep = labels != -100
    assert torch.allclose(soft_label_loss(s3, t3, labels, 1.0), soft_label_loss(s3[keep], t3[keep], labels[keep], 1.0))


def test_regression_distils_to_the_teachers_prediction():
    import torch

    from training.finetuning.trainer import soft_label_loss

    s, t = torch.tensor([[0.2], [0.9]]), torch.tensor([[0.4], [0.5]])
    assert torch.isclose(soft_label_loss(s, t, torch.tensor([0.0, 1.0]), 2.0), torch.tensor((0.2**2 + 0.4**2) / 2))


def test_task_level_distillation_from_a_fine_tuned_teacher(tmp_path, model_dir, capsys):
    from lmforge.cli import main

    rows, data = split_reviews(tmp_path / "reviews.jsonl", 300)
    teacher = tmp_path / "teacher"
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(teacher), "--no-controls"])
    student = tmp_path / "student"
    finetune(["--model", str(model_dir), "--data", str(data), "--output", str(student), "--no-controls",
              "--teacher", str(teacher / "hf"), "--distill-alpha", "0.7"])
    m = FinetuneMetrics.read(student / "metrics.json")
    assert 0 <= m.rows["pretrained"].scores["test"]["accuracy"].mean <= 1
    assert read_manifest(student)["config"]["teacher"] == str(teacher / "hf")
    # a teacher of other labels is refused before any training
    other = write_jsonl(tmp_path / "other.jsonl", [{**r, "label": "x" if r["label"] == "neutral" else r["label"]}
                                                   for r in rows])
    code = main(["finetune", "--model", str(model_dir), "--data", str(other), "--output", str(tmp_path / "bad"),
                 "--teacher", str(teacher / "hf")])
    assert code == 2 and "distil from a model fine-tuned on the same labelled data" in capsys.readouterr().err


def test_teacher_tokenizer_identity_ignores_saved_truncation_and_padding(tmp_path, model_dir):
    """An adopted tokenizer saves its row length (truncation and padding) in tokenizer.json; the ids are the
    same, so a teacher fine-tuned from the original tokenizer still matches; another vocabulary does not."""
    from training.finetuning.finetune import tokenizer_identity

    spec = json.loads(Path(model_dir, "tokenizer.json").read_text())
    for name, extra in (("padded", {"truncation": {"direction": "Right", "max_length": 128, "strategy": "LongestFirst",
                                                   "stride": 0},
                                    "padding": {"strategy": {"Fixed": 128}, "direction": "Right", "pad_id": 0}}),
                        ("other", {"model": {**spec["model"], "vocab": {**spec["model"]["vocab"], "zzzq": 99999}}})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "tokenizer.json").write_text(json.dumps({**spec, **extra}))
    assert tokenizer_identity(tmp_path / "padded") == tokenizer_identity(model_dir)
    assert tokenizer_identity(tmp_path / "other") != tokenizer_identity(model_dir)
    assert tokenizer_identity(tmp_path) is None


def test_a_llama_decoder_fine_tunes_as_a_classifier_and_a_tagger(tmp_path):
    """What causal shards train (a Llama-style decoder) fine-tunes through the same command: a sequence classifier
    pooled on the last token (LlamaForSequenceClassification) that opens in pipeline("text-classification"), and a
    tagger; each beside the majority and TF-IDF controls on the same splits."""
    from transformers import pipeline

    model = tiny_llama_dir(tmp_path / "model")
    _, data = split_reviews(tmp_path / "reviews.jsonl", 200)
    finetune(["--model", str(model), "--data", str(data), "--output", str(tmp_path / "clf"), "--seeds", "1"])
    m = FinetuneMetrics.read(tmp_path / "clf" / "metrics.json")
    assert set(m.rows) == {"pretrained", "majority", "tfidf_lr"}
    clf = pipeline("text-classification", model=str(tmp_path / "clf" / "hf"))
    assert type(clf.model).__name__ == "LlamaForSequenceClassification"
    assert clf("What a wonderful day")[0]["label"] in {"negative", "neutral", "positive"}
    tags = Path(__file__).resolve().parents[2] / "tests" / "data" / "labeled" / "pattern"
    from pipelines.labeled.registry import prepare

    prepared = prepare("wsj_pos", tmp_path / "wsj", tags)
    finetune(["--config", str(prepared / "finetune.json"), "--model", str(model), "--output", str(tmp_path / "tag"),
              "--seeds", "1"])
    t = FinetuneMetrics.read(tmp_path / "tag" / "metrics.json")
    assert t.primary_metric == "token_accuracy" and 0 <= t.rows["pretrained"].scores["test"]["token_accuracy"].mean <= 1
