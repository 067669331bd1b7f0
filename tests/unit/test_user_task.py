"""A user's labelled file as a task folder (training/finetuning/prepare.py), its seeded stratified split, the card's
probing languages read from the corpus, a failed stage's one line, and defaults that name no sample."""
from __future__ import annotations

import csv
import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VADER = ROOT / "samples" / "labeled" / "vader" / "movieReviewSnippets_GroundTruth.txt"


def reviews_csv(path: Path, n: int = 400, split: bool = False) -> list[dict]:
    """Real movie-review snippets (VADER) with a user's column names; every 7th a duplicate of the one before."""
    from pipelines.labeled.vader import label_of

    rows = []
    for i, line in enumerate(VADER.read_text(encoding="utf-8").splitlines()[:n]):
        _, score, text = line.split("\t", 2)
        rows.append(dict(rows[-1]) if i % 7 == 6 else {"review": text.strip(), "stars": label_of(float(score)),
                                                         **({"part": "test" if i % 5 == 0 else "train"} if split else {})})
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def test_file_without_splits_is_split_seeded_and_stratified(tmp_path):
    from training.finetuning.dataset import Columns, load_task
    from training.finetuning.prepare import prepare_file

    reviews_csv(tmp_path / "r.csv")
    out = prepare_file(tmp_path / "r.csv", tmp_path / "task", "classification", Columns(text="review", label="stars"))
    rows = [json.loads(line) for line in (out / "data.jsonl").open()]
    distinct = {(r["text"], r["label"]): r["split"] for r in rows}
    by = Counter((split, label) for (_, label), split in distinct.items())
    for label in {r["label"] for r in rows}:  # each class 10% test, 10% validation, of its distinct texts
        n = sum(v for (s, lab), v in by.items() if lab == label)
        assert by["test", label] == round(n / 10) and by["validation", label] == round(n / 10)
    split_of = {}
    for r in rows:  # identical texts (no id column: the text's digest is the id) share a split
        assert split_of.setdefault(r["text"], r["split"]) == r["split"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["extra"]["source"]["sha256"] and m["counts"]["test_examples"] == sum(r["split"] == "test" for r in rows)
    assert "stratified by label, by a hash seeded 0" in m["extra"]["splits_from"]["test"]
    # the folder reads back as a task with the same splits, and another seed splits otherwise
    spec = json.loads((out / "finetune.json").read_text())
    again = load_task(spec["task"], Columns(text="text", label="label"), data=spec["data"])
    assert [ex.text for ex in again.test] == [r["text"] for r in rows if r["split"] == "test"]
    other = load_task("classification", Columns(text="review", label="stars"), data=[str(tmp_path / "r.csv")], split_seed=1)
    assert {ex.text for ex in other.test} != {ex.text for ex in again.test}


def test_file_with_its_own_split_keeps_it_and_bad_columns_fail_in_one_line(tmp_path):
    from training.finetuning.dataset import Columns
    from training.finetuning.prepare import prepare_file
    from training.finetuning.readers import DataError

    rows = reviews_csv(tmp_path / "r.csv", n=300, split=True)
    out = prepare_file(tmp_path / "r.csv", tmp_path / "task", "classification",
                       Columns(text="review", label="stars", split="part"))
    prepared = [json.loads(line) for line in (out / "data.jsonl").open()]
    assert sum(r["split"] == "test" for r in prepared) == sum(r["part"] == "test" for r in rows)
    with pytest.raises(DataError, match=r"r\.csv:2: no column 'label' \(columns: review, stars, part\)"):
        prepare_file(tmp_path / "r.csv", tmp_path / "bad", "classification", Columns(text="review"))


def test_probe_languages_are_the_corpus_languages(tmp_path):
    from training.evaluation.probing import probe_languages

    corpus = tmp_path / "corpus"
    for lang in ("en", "de"):
        (corpus / "data" / lang).mkdir(parents=True)
    (corpus / "manifest.json").write_text(json.dumps({"schema": "lmforge.manifest/v1", "stage": "corpus", "counts": {"kept_by_language": {"en": 900, "de": 7}}}))
    assert probe_languages(corpus, []) == (["en"], {"de": "7 de documents kept, fewer than 20"})
    langs, skipped = probe_languages(corpus, ["en", "ru"])
    assert langs == ["en"] and skipped["ru"].startswith("no ru documents in the corpus (it kept: en 900, de 7)")


def test_failure_reason_is_the_stages_own_error_line(tmp_path):
    from flows.stages.runner import StageFailed, failure_reason

    log = tmp_path / "finetune.log"
    log.write_text("step 1\nTraceback (most recent call last):\n  File x\nValueError: boom\n"
                   "lmforge finetune: error: data.csv:3: no column 'label'\n")
    assert failure_reason(log) == "data.csv:3: no column 'label'"
    log.write_text("Traceback (most recent call last):\n  File x\nKeyError: 'x'\n")
    assert failure_reason(log) == "KeyError: 'x'"
    assert str(StageFailed("finetune", "boom", log, 1)) == f"stage finetune failed: boom (log: {log})"


def test_defaults_name_no_sample_unless_the_run_is_the_demo(checkout_root):
    from flows.params import DEMO_CRAWL, DEMO_LABELED, DagParams, RefreshParams, TrainOnlyParams
    from flows.presets import RUN_PRESETS
    from training.evaluation.evaluate import EvaluateConfig

    assert DagParams().labeled == DEMO_LABELED and DagParams().crawl == DEMO_CRAWL  # the demo
    assert DagParams(crawl=["tests/data/tiny"]).labeled == ""
    assert TrainOnlyParams().labeled == "" and RefreshParams().labeled == ""
    probe = next(f for f in dataclasses.fields(EvaluateConfig) if f.name == "probe_languages")
    assert probe.default_factory() == []
    for name, preset in RUN_PRESETS.items():  # no preset names a language, a task or the sample's files
        text = json.dumps(preset())
        assert not any(s in text for s in ('"en"', '"ru"', "vader", "samples/")), (name, text)


# Defaults that name a language on purpose, and why: none is the sample's choice of what to keep.
LANGUAGE_DEFAULTS_ALLOWED = {
    ("corpus", "char_shingle_languages"): "scripts written without spaces: shingled by characters",
    ("corpus", "gopher_quality.stop_words_languages"): "the stop-word rule's list is English's (Gopher A.1.1)",
}


def _defaults(cls: type, prefix: str = "") -> dict[str, object]:
    """Every option of a config dataclass with its default, nested configs' as `family.option`."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(value):
            out.update(_defaults(type(value), f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = value
    return out


def test_no_stage_default_keeps_only_the_sample_languages_task_or_files():
    """The sweep: every option of every stage the flows wire, read from its config class. A list of language codes as
    a default decides what a user's crawl keeps (the corpus's `languages` was ["en", "ru"], the sample's, and dropped
    74% of a French and German crawl): only the ones named above, each with its reason, may have one."""
    from flows.params import WIRED, DagParams, stage_config

    found = []
    for stage in WIRED:
        for name, value in _defaults(stage_config(stage)).items():
            items = value if isinstance(value, list) else [value]
            langs = [v for v in items if isinstance(v, str) and len(v) == 2 and v.isalpha() and v.islower()]
            if "language" in name and langs and (stage, name) not in LANGUAGE_DEFAULTS_ALLOWED:
                found.append((stage, name, value))
            if any(isinstance(v, str) and any(s in v for s in ("vader", "samples/", "wsj", "reuters")) for v in items):
                found.append((stage, name, value))
    assert not found, found
    assert DagParams().languages == ["auto"]
    from pipelines.corpus.config import CorpusConfig

    assert CorpusConfig(input=["x"], output="y").auto_languages


def test_labeled_columns_are_declared_once():
    """schemas/finetune.py LABELED_COLUMNS is the one list of a labelled file's columns: finetune's options, the
    `Columns` it reads with, `lmforge labeled file`'s and `lmforge run`'s flags and the flows' form follow it."""
    from flows.dag import LABELED_FILE_KEYS, TASK_KEYS
    from flows.params import FLOW_PARAMS
    from lmforge.cli import main
    from schemas.finetune import LABELED_COLUMNS, LABELED_FILE_OPTIONS
    from training.finetuning.dataset import Columns
    from training.finetuning.finetune import FinetuneConfig

    fields = {f.name: f for f in dataclasses.fields(FinetuneConfig)}
    columns = [n for n in fields if n.endswith("_column")]
    assert columns == [c.option for c in LABELED_COLUMNS]
    for c in LABELED_COLUMNS:
        assert (fields[c.option].default, fields[c.option].metadata["help"]) == (c.default, c.help)
        assert getattr(Columns(), c.key) == (c.default or None)
    assert Columns.of({"text_column": "t", "text_pair_column": ""}) == Columns(text="t")
    assert LABELED_FILE_KEYS == LABELED_FILE_OPTIONS == TASK_KEYS[:len(LABELED_FILE_OPTIONS)]
    for model in FLOW_PARAMS.values():
        for c in LABELED_COLUMNS:
            assert (model.model_fields[c.option].default, model.model_fields[c.option].description) == ("", c.form)
    for argv in (["labeled", "file", "--help"], ["run", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)


def test_launcher_and_flow_share_the_cluster_defaults():
    """The claim, image and mount defaults are ClusterSpec's; the flow's empty cluster_mount is the data root, as its
    paths are the worker's (flows/params.py), and reaches the launcher as --mount."""
    from flows.params import TrainParams
    from training.launch.cluster import ClusterSpec
    from training.launch.command import LaunchOptions

    o = LaunchOptions()
    assert (o.image, o.shared_pvc, o.mount, o.job_name) == (ClusterSpec.image, ClusterSpec.shared_pvc,
                                                          ClusterSpec.mount, ClusterSpec.job)
    fields = TrainParams.model_fields
    assert (fields["cluster_image"].default, fields["cluster_pvc"].default) == (ClusterSpec.image,
                                                                                 ClusterSpec.shared_pvc)
