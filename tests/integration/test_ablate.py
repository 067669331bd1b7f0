"""`lmforge ablate` end to end at the tiny preset: two arms over the tiny crawl plus a page that copies a reference
text, two seeds, news articles (newspaper4k's gold texts) as the reference set; then the same command again."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLD = ROOT / "samples" / "gold" / "newspaper4k"
ENGLISH = ("cnn_001", "cnn_002", "cnn_article", "cnn_test_nlp", "cleveland.com1", "fox13now_001", "time_001",
           "wired_001", "video_article_01", "video_article_02", "article_with_br", "article_with_divs")


def ablate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmforge.cli", "ablate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200)


@pytest.mark.slow
def test_two_arms_compare_on_equal_tokens_one_tokenizer_and_a_decontaminated_reference(tmp_path):
    from schemas.manifest import read_manifest

    with (tmp_path / "reference.jsonl").open("w") as f:
        for name in ENGLISH:
            f.write(json.dumps({"id": name, "url": f"https://news.example/{name}",
                                "text": (GOLD / f"{name}.txt").read_text()}) + "\n")
    # a crawled page that quotes a reference article: every arm must drop it
    quoted = (GOLD / "time_001.txt").read_text()
    (tmp_path / "quoting.jsonl").write_text(json.dumps({"id": "quoting", "url": "https://blog.example/q",
                                                        "text": "Our blog quotes this story in full.\n\n" + quoted}) + "\n")
    cfg = {"crawl": [str(ROOT / "tests/data/tiny/tiny.warc.gz"), str(tmp_path / "quoting.jsonl")],
           "reference": str(tmp_path / "reference.jsonl"), "arms": ["baseline", "no-near-dedup"], "seeds": [1, 2],
           "name": "abl", "runs_dir": str(tmp_path / "runs"), "preset": "tiny"}
    (tmp_path / "ablation.json").write_text(json.dumps(cfg))
    r = ablate("--config", str(tmp_path / "ablation.json"))
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    root = tmp_path / "runs" / "abl"
    report = json.loads((root / "report.json").read_text())
    arms = report["arms"]
    assert set(arms) == {"baseline", "no-near-dedup"}
    # the same tokens for every arm and seed, one tokenizer, the reference held out of every arm's corpus
    assert arms["baseline"]["positions_trained"] == arms["no-near-dedup"]["positions_trained"] > 0
    for arm in arms:
        for seed in (1, 2):
            m = read_manifest(root / "arms" / arm / f"seed-{seed}" / "pretrain")
            assert m["config"]["tokenizer"] == str(root / "tokenizer") and m["config"]["seed"] == seed
            # every position a token but the padding at a few documents' ends
            assert 0.98 * arms[arm]["positions_trained"] <= m["counts"]["tokens"] <= arms[arm]["positions_trained"]
            assert arms[arm]["tokens_trained_by_seed"][str(seed)] == m["counts"]["tokens"]
        assert read_manifest(root / "arms" / arm / "shards")["config"]["tokenizer"] == str(root / "tokenizer")
        assert arms[arm]["reference_pages_dropped"] == 1
        assert arms[arm]["epochs"] == pytest.approx(arms[arm]["tokens_trained"] / arms[arm]["train_tokens"])
    # what the arm changed shows in its counts, and its difference has an interval over the two seeds
    assert arms["baseline"]["duplicates_by_kind"].get("near", 0) > 0 and "near" not in arms["no-near-dedup"]["duplicates_by_kind"]
    d = arms["no-near-dedup"]["reference_loss"]["diff_to_baseline"]
    assert d["n"] == 2 and d["ci_low"] <= d["mean"] <= d["ci_high"] and report["sentences"]
    assert "| no-near-dedup |" in (root / "report.md").read_text()

    # the same command again: every stage is skipped, nothing is rewritten
    stages = sorted(root.rglob("manifest.json"))
    before = {p: p.stat().st_mtime_ns for p in stages}
    r = ablate("--config", str(tmp_path / "ablation.json"))
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert {p: p.stat().st_mtime_ns for p in stages} == before


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
