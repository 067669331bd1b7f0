"""`lmforge ablate` end to end at the tiny preset with decoders (`objective: causal`, as FineWeb and DCLM rank data:
held-out perplexity and few-shot accuracy beside the fine-tuned score): two arms over the tiny crawl plus a page that
copies a reference text and a third arm whose corpus ends empty, two seeds, one downstream task, the demo's
reference set (newspaper4k's gold texts); the two arms that differ only in dedup share one cleaning, whose documents
are checked against one corpus stage over the crawl; then the same command again. The masked-LM ablation differs
only in its objective's stage options and its report's two decoder columns (the bench's `bench ablate` runs it). The command runs in this process
(`lmforge.cli.main`, as the console script calls it: its flow on the session's Prefect server, its stages as the
subprocesses they always are), on a token budget of 10 pretraining steps; the bad-arms answers are real processes.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLD = ROOT / "samples" / "gold" / "newspaper4k"
TOKEN_BUDGET = 10 * 8 * 64
"""10 pretraining steps of the tiny preset's global batch (8 rows of 64 positions on 1 process): the checks are of
equal budgets and shared inputs, not of what the models learn."""

pytestmark = pytest.mark.usefixtures("prefect_api")  # each `lmforge ablate` talks to the session's server


def ablate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmforge.cli", "ablate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200)


def ablate_here(capsys, *args: str) -> subprocess.CompletedProcess:
    """`lmforge ablate ARGS` in this process (no interpreter, torch and Prefect start-up): its exit code and output.
    The data root the command widens with its typed paths (flows/data_root.py trust_paths) is put back after it, as
    its process's exit would."""
    import os

    from flows.data_root import DATA_ROOT_ENV
    from lmforge.cli import main

    capsys.readouterr()
    before = os.environ.get(DATA_ROOT_ENV)
    try:
        code = main(["ablate", *args])
    finally:
        if before is None:
            os.environ.pop(DATA_ROOT_ENV, None)
        else:
            os.environ[DATA_ROOT_ENV] = before
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["lmforge", "ablate", *args], code, out, err)


def kept_docs(corpus: Path) -> dict[str, tuple]:
    import pyarrow.parquet as pq

    return {r["id"]: (r["url"], r["text"], r["language"], r["language_score"])
            for f in sorted((corpus / "data").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()}


@pytest.mark.slow
def test_arms_compare_on_equal_tokens_one_tokenizer_a_decontaminated_reference_and_shared_task_splits(tmp_path, capsys,
                                                                                                     monkeypatch):
    from schemas.manifest import read_manifest

    # a crawled page that quotes a reference article: every arm must drop it
    quoted = (GOLD / "time_001.txt").read_text()
    (tmp_path / "quoting.jsonl").write_text(json.dumps({"id": "quoting", "url": "https://blog.example/q",
                                                        "text": "Our blog quotes this story in full.\n\n" + quoted}) + "\n")
    # an arm of its own crawl whose corpus keeps nothing: that arm fails with the reason, the others are reported
    (tmp_path / "short.jsonl").write_text(json.dumps({"id": "s", "url": "https://x.example/", "text": "Too short."}) + "\n")
    cfg = {"crawl": [str(ROOT / "tests/data/tiny/tiny.warc.gz"), str(tmp_path / "quoting.jsonl")],
           "reference": str(ROOT / "samples/reference/news-en.jsonl"),
           "arms": ["baseline", "no-near-dedup", {"name": "empty", "crawl": [str(tmp_path / "short.jsonl")]}],
           "seeds": [1, 2], "tasks": ["vader"], "parallel_arms": 3, "name": "abl", "runs_dir": str(tmp_path / "runs"),
           "preset": "tiny", "token_budget": TOKEN_BUDGET, "objective": "causal"}
    (tmp_path / "ablation.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(ROOT)
    r = ablate_here(capsys, "--config", str(tmp_path / "ablation.json"))
    assert r.returncode == 1 and ("lmforge ablate: arm empty failed (stage corpus failed: ValueError: kept none of its 1 "
                                  "documents (dropped c4_no_lines_left 1); the first: ") in r.stderr, (
        r.stdout + r.stderr)[-4000:]
    root = tmp_path / "runs" / "abl"
    report = json.loads((root / "report.json").read_text())
    arms = report["arms"]
    # each arm its own subflow run
    assert {a: arms[a]["flow_run"]["name"] for a in arms} == {a: f"abl-{a}" for a in arms}
    assert len({arms[a]["flow_run"]["id"] for a in arms}) == 3
    assert set(arms) == {"baseline", "no-near-dedup", "empty"} and "kept none of its 1 documents" in arms["empty"]["error"]
    # the same tokens for every arm and seed, one tokenizer, the reference held out of every arm's corpus
    assert arms["baseline"]["positions_trained"] == arms["no-near-dedup"]["positions_trained"] > 0
    test_sets = set()
    for arm in ("baseline", "no-near-dedup"):
        for seed in (1, 2):
            m = read_manifest(root / "arms" / arm / f"seed-{seed}" / "pretrain")
            assert m["config"]["tokenizer"] == str(root / "tokenizer") and m["config"]["seed"] == seed
            # every position a token but the padding at a few documents' ends
            assert 0.98 * arms[arm]["positions_trained"] <= m["counts"]["tokens"] <= arms[arm]["positions_trained"]
            assert arms[arm]["tokens_trained_by_seed"][str(seed)] == m["counts"]["tokens"]
            # the fine-tune read the one prepared task, and scored the same test split
            ft = root / "arms" / arm / f"seed-{seed}" / "tasks" / "vader" / "finetune"
            assert read_manifest(ft)["config"]["data"] == [str(root / "labeled" / "vader" / "data.jsonl")]
            test_sets.add(json.loads((ft / "metrics.json").read_text())["counts"]["test_examples"])
        assert read_manifest(root / "arms" / arm / "shards")["config"]["tokenizer"] == str(root / "tokenizer")
        assert arms[arm]["reference_pages_dropped"] == 1
        assert arms[arm]["epochs"] == pytest.approx(arms[arm]["tokens_trained"] / arms[arm]["train_tokens"])
        assert arms[arm]["tasks"]["vader"]["n"] == 2 and arms[arm]["tasks"]["vader"]["metric"] == "accuracy"
    assert len(test_sets) == 1
    # every reference text scored: the eval read both splits of the reference shards
    ref = read_manifest(root / "reference" / "shards")["counts"]
    ev = read_manifest(root / "arms" / "baseline" / "seed-1" / "eval")["counts"]
    assert ev["valid_rows"] == ref["train_rows"] + ref["valid_rows"]
    # beside the reference loss, what each arm's corpus's token frequencies alone score on the same tokens
    assert all(a["reference_unigram_control"] > 0 for a in arms.values() if "error" not in a)
    assert "| control: token frequencies alone (baseline's corpus) |" in (root / "report.md").read_text()
    # what the arm changed shows in its counts, and its differences have intervals over the two seeds
    assert arms["baseline"]["duplicates_by_kind"].get("near", 0) > 0 and "near" not in arms["no-near-dedup"]["duplicates_by_kind"]
    for d in (arms["no-near-dedup"]["reference_loss"]["diff_to_baseline"],
              arms["no-near-dedup"]["tasks"]["vader"]["diff_to_baseline"]):
        assert d["n"] == 2 and d["ci_low"] <= d["mean"] <= d["ci_high"]
    assert len(report["sentences"]) == 3  # reference loss, few-shot accuracy, fine-tuned accuracy
    # decoders: one byte-level BPE, the reference perplexity, and each model prompted with the task (few-shot) over
    # the seeds, paired against the baseline, beside the majority class on the same items
    assert read_manifest(root / "tokenizer")["config"]["model"] == "byte_bpe" and report["decoder"]
    for arm in ("baseline", "no-near-dedup"):
        f = arms[arm]["few_shot"]["vader"]
        assert f["n"] == 2 and set(f["by_seed"]) == {"1", "2"} and f["shots"] == 3 and 0 <= f["majority"] <= 1
        assert arms[arm]["reference_perplexity"] > 1
    d = arms["no-near-dedup"]["few_shot"]["vader"]["diff_to_baseline"]
    assert d["n"] == 2 and d["ci_low"] <= d["mean"] <= d["ci_high"]
    assert any(s.startswith("no-near-dedup: ") and "vader few-shot accuracy" in s for s in report["sentences"])
    # the controls beside the task scores: the random-init twin over the seeds, majority and TF-IDF
    c = report["controls"]["vader"]
    assert c["scratch"]["n"] == 2 and 0 <= c["majority"] <= 1 and 0 <= c["tfidf_lr"] <= 1
    # baseline and no-near-dedup differ only in dedup: they read one cleaning of the crawl, and the documents the
    # baseline keeps through it are those one corpus stage over the crawl keeps
    cleaned = root / "cleaned" / "baseline" / "corpus"
    assert arms["baseline"]["cleaned"] == arms["no-near-dedup"]["cleaned"] == str(cleaned)
    assert read_manifest(cleaned)["config"]["exact_dedup"] is False and arms["empty"].get("cleaned") is None
    direct = {**report["stage_options"]["corpus"], "decontaminate": {"files": [str(root / "reference.jsonl")]},
              "input": cfg["crawl"], "output": str(tmp_path / "direct")}
    (tmp_path / "direct.json").write_text(json.dumps(direct))
    r = subprocess.run([sys.executable, "-m", "lmforge.cli", "corpus", "--config", str(tmp_path / "direct.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert kept_docs(tmp_path / "direct") == kept_docs(root / "arms" / "baseline" / "corpus")
    assert read_manifest(tmp_path / "direct")["counts"]["dropped"] == arms["baseline"]["dropped_by_reason"]
    md = (root / "report.md").read_text()
    assert "baseline, no-near-dedup read one cleaning of the crawl" in md
    assert "| reference perplexity | vader (few-shot) | vs baseline | vader (test) |" in md
    assert "| control: majority class (vader, few-shot items) |" in md
    assert "| no-near-dedup |" in md and "| control: TF-IDF + LR (vader) |" in md and "| empty | failed: stage corpus failed: ValueError: kept none of its 1 documents" in md
    assert "<table>" in (root / "report.html").read_text() and (root / "report.png").read_bytes()[:4] == b"\x89PNG"

    # the same command again: every stage that finished is skipped, nothing of it is rewritten (the empty arm's corpus
    # failed, so it runs again and fails again)
    stages = sorted(p for p in root.rglob("manifest.json") if "arms/empty/" not in p.as_posix())
    before = {p: p.stat().st_mtime_ns for p in stages}
    r = ablate_here(capsys, "--config", str(tmp_path / "ablation.json"))
    assert r.returncode == 1 and "arm empty failed" in r.stderr, (r.stdout + r.stderr)[-4000:]
    assert {p: p.stat().st_mtime_ns for p in stages} == before


@pytest.mark.slow  # two `lmforge ablate` processes
def test_bad_arms_fail_before_anything_runs_in_one_line(tmp_path):
    (tmp_path / "ref.jsonl").write_text(json.dumps({"id": "r", "text": "a reference text"}) + "\n")
    base = {"crawl": [str(ROOT / "tests/data/tiny/tiny.warc.gz")], "reference": str(tmp_path / "ref.jsonl"),
            "runs_dir": str(tmp_path / "runs")}
    for arms, said in ((["baseline", {"name": "x", "corpus": {"gopher_qualty": {"enabled": False}}}],
                        "no corpus option 'gopher_qualty_enabled'; did you mean 'gopher_quality_enabled'?"),
                       (["baseline", {"name": "again", "corpus": {}}], "are the same configuration")):
        (tmp_path / "a.json").write_text(json.dumps({**base, "arms": arms}))
        r = ablate("--config", str(tmp_path / "a.json"))
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "runs").exists()
