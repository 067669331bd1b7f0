"""`lmforge run` on a user's own data, as a user types it: an English-only JSONL crawl (the tiny slice's English
pages as id/url/text) and a labelled CSV of tweets with its own column names and no split column (VADER's tweets),
some of whose test and train items were planted into the crawl. One whole-DAG run at the tiny preset; a failing
run counts its lines."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny"
TWEETS = ROOT / "samples" / "labeled" / "vader" / "tweets_GroundTruth.txt"


def english_pages() -> list[dict]:
    """The tiny slice's English pages (its manifest's lang column), as the corpus stage would extract them."""
    from pipelines.corpus.readers import read_file
    from pipelines.corpus.text import decode_html, html_to_text
    from schemas.records import RawDocument

    lang = {r["url"]: r["lang"] for r in csv.DictReader((TINY / "manifest.tsv").open(), delimiter="\t")}
    pages = []
    for doc in read_file(str(TINY / "tiny.warc.gz")):
        if isinstance(doc, RawDocument) and doc.html and lang.get(doc.url) == "en":
            text = html_to_text(decode_html(doc.html, doc.charset).text)
            if len(text.split()) > 50:
                pages.append({"id": f"page-{len(pages)}", "url": doc.url, "text": text})
    return pages


def tweets_csv(path: Path, n: int = 900) -> None:
    """VADER's tweets with a user's column names and no split column (label: VADER's 3 classes)."""
    from pipelines.labeled.vader import label_of

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["tweet", "sentiment"])
        for line in TWEETS.read_text(encoding="utf-8").splitlines()[:n]:
            _, score, text = line.split("\t", 2)
            w.writerow([text.strip(), label_of(float(score))])


def lmforge_run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmforge.cli", "run", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=1500, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    from training.tasks.dataset import Columns, load_task

    work = tmp_path_factory.mktemp("mine")
    tweets_csv(work / "tweets.csv")
    # the split the labeled stage will make (seeded, stratified: training.tasks.prepare), to plant from
    task = load_task("classification", Columns(text="tweet", label="sentiment"), data=[str(work / "tweets.csv")],
                     split_seed=0)
    long_enough = [ex for ex in task.test if len(ex.text.split()) >= 16], [ex for ex in task.train
                                                                           if len(ex.text.split()) >= 16]
    planted = {"test": long_enough[0][:2], "train": long_enough[1][:2]}
    pages = english_pages()
    for split, items in planted.items():
        for i, ex in enumerate(items):
            page = pages[len(pages) // 2 + 3 * i + (1 if split == "train" else 0)]
            page["text"] += "\n\nShared on our wall today: " + ex.text
            page["planted"] = split
    with (work / "wiki.jsonl").open("w", encoding="utf-8") as f:
        for p in pages:
            f.write(json.dumps({k: p[k] for k in ("id", "url", "text")}) + "\n")
    r = lmforge_run("--name", "mine", "--runs-dir", str(work / "runs"), "--crawl", str(work / "wiki.jsonl"),
                    "--labeled", str(work / "tweets.csv"), "--text-column", "tweet", "--label-column", "sentiment",
                    "--preset", "tiny", "--nproc", "1", "--param", 'overrides={"card": {"probe": true}}', cwd=work)
    return {"r": r, "run": work / "runs" / "mine", "pages": pages, "planted": planted}


@pytest.mark.slow
def test_user_crawl_and_labelled_file_run_to_the_card(user_run):
    from schemas.manifest import read_manifest

    r, run = user_run["r"], user_run["run"]
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "finished" in r.stdout and "Traceback" not in r.stdout + r.stderr
    # the labelled file, a task folder like a known source's: its splits made and written down, its checksum kept
    lab = read_manifest(run / "labeled" / "tweets")
    assert lab["config"]["columns"]["text"] == "tweet" and len(lab["extra"]["source"]["sha256"]) == 64
    assert "stratified by label" in lab["extra"]["splits_from"]["test"]
    rows = [json.loads(line) for line in (run / "labeled" / "tweets" / "data.jsonl").open()]
    split_of = {row["text"]: row["split"] for row in rows}
    for split, items in user_run["planted"].items():
        assert all(split_of[ex.text] == split for ex in items)
    # its validation and test items checked against the crawl without any option: planted test pages dropped
    corpus = read_manifest(run / "corpus")
    found = corpus["counts"]["contamination"]["tweets"]
    assert found["found_by_split"].get("test", 0) == 2 and found["found_by_split"].get("train", 0) == 0
    assert found["pages_dropped"] == 2
    kept = {row["id"] for f in (run / "corpus" / "data").rglob("*.parquet")
            for row in __import__("pyarrow.parquet").parquet.read_table(f, columns=["id"]).to_pylist()}
    for p in user_run["pages"]:
        if p.get("planted") == "test":
            assert p["id"] not in kept
        if p.get("planted") == "train":
            assert p["id"] in kept
    assert set(corpus["counts"]["kept_by_language"]) == {"en"}
    # the card: fine-tuned on the user's task with its controls, contamination stated, probing in the corpus's
    # languages only (no Russian in it: skipped, with the reason)
    card = json.loads((run / "card" / "report.json").read_text())
    teacher = next(e for e in card["models"] if e["name"] == "teacher")["quality"]
    probed = set(teacher.get("probing") or {}) | set(teacher.get("probing_skipped") or {})
    assert probed == {"en"}, teacher.get("probing_skipped")
    text = (run / "card" / "report.md").read_text()
    assert "tweets" in text and ("Probing skipped: en:" in text or "Probing teacher (en" in text)
    report = json.loads((run / "eval" / "report.json").read_text())
    assert set(report["finetune"]["test"]) >= {"pretrained", "scratch", "majority", "tfidf_lr"}


@pytest.mark.slow
def test_a_failed_stage_is_reported_in_a_few_lines(tmp_path):
    tweets_csv(tmp_path / "tweets.csv", n=200)
    r = lmforge_run("--name", "bad", "--runs-dir", str(tmp_path / "runs"), "--crawl", str(TINY / "tiny.warc.gz"),
                    "--labeled", str(tmp_path / "tweets.csv"), "--label-column", "stars", "--preset", "tiny",
                    cwd=tmp_path)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    failure = [line for line in out.splitlines() if "fail" in line.lower() or "error" in line.lower()]
    assert "Traceback" not in out and 1 <= len(failure) <= 3, out
    assert failure[0].startswith("lmforge run: stage labeled failed:") and "'stars'" in failure[0]
    assert f"log: {tmp_path / 'runs' / 'bad' / 'logs' / 'labeled.log'}" in failure[0]
    assert "Traceback" in (tmp_path / "runs" / "bad" / "logs" / "flow.log").read_text()
