"""`lmforge run` on a user's own data, as a user types it, each case one whole-DAG run at the tiny preset to the card:
- a Russian-only WET file (the sample's Russian pages as WET conversion records) and a sentence-pair task (Lee's
  rated document pairs, a regression, as a JSONL file with its own split column);
- the tiny slice's WARC and a token-tagging task (WSJ part-of-speech tags as a JSONL file of tokens and tags);
- a French and German WARC (the GIMP manual's pages) with no language option, and Reuters topics as a Parquet file with
  its own column names (body, topic), no split column and a class of one row;
and a failing run, whose lines are counted. The English JSONL crawl with a labelled CSV of tweets (tests/integration/
user_case.py) is the session's shared run (test_dag_e2e), which the deployment submits again."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import english_pages, pages_in, tweets_csv

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny"
LABELED = ROOT / "tests" / "data" / "labeled"
PATHS = ["--param", 'overrides={"finetune": {"max_train": 300, "max_test": 200, "max_validation": 100, '
         '"init": ["pretrained"]}, "card": {"probe": true, "cost_repeats": 1, "probe_min_per_class": 5}}']
"""The tiny preset, a smaller fine-tune, one cost repeat, probing on (the card picks the corpus's languages; 5 held-out
sentences per class, as the tiny corpora hold few); the cases test the DAG's paths, not scores: no random-init control
run."""
MATRIX = {"russian_wet_pairs": ({"ru"}, "regression"), "english_warc_tagging": ({"en", "ru"}, "tokens"),
          "french_german_warc_topics": ({"fr", "de"}, "classification")}
"""Case: (the corpus's languages, the task kind)."""
FR_DE = ROOT / "tests" / "data" / "fr-de" / "gimp-fr-de.warc.gz"
"""The GIMP manual's French and German pages (and a few English ones) as a WARC: tests/data/fr-de/README.md."""


def wet_file(path: Path, pages: list[dict]) -> None:
    """Pages as a WET file: one WARC `conversion` record of plain text each (Common Crawl's layout)."""
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as f:
        w = WARCWriter(f, gzip=False)
        for p in pages:
            w.write_record(w.create_warc_record(p["url"], "conversion", payload=__import__("io").BytesIO(
                p["text"].encode()), warc_headers_dict={"Content-Type": "text/plain"}))


def lmforge_run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lmforge.cli", "run", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, prefect_api) -> dict[str, dict]:
    """Every case's whole-DAG run, started together (the 2 cores overlap one run's start-ups and waits with
    another's work: about 0.6x the time of one after another); each case's inputs, output and run folder."""
    cases: dict[str, dict] = {}
    for case in MATRIX:
        work = tmp_path_factory.mktemp(case)
        args = matrix_case(case, work)
        proc = lmforge_run("--name", case, "--runs-dir", str(work / "runs"), *args, "--preset", "tiny", "--nproc", "1",
                           cwd=work)
        cases[case] = {"proc": proc, "args": args, "run": work / "runs" / case}
    for c in cases.values():
        c["out"] = c["proc"].communicate(timeout=2400)[0]
        c["rc"] = c["proc"].returncode
    return cases


def matrix_case(case: str, work: Path) -> list[str]:
    """The case's `lmforge run` arguments, its inputs written under `work`."""
    from pipelines.labeled.registry import prepare

    if case == "russian_wet_pairs":
        from pipelines.corpus.text import identify_language

        ru = [p for p in pages_in("ru", sorted((ROOT / "samples" / "crawl").glob("debian-docs-*.warc.gz")),
                                  ROOT / "samples" / "manifest.tsv", limit=160)
              if identify_language(p["text"])[0] == "ru"]  # a few "ru" documentation pages are English text
        wet_file(work / "ru.warc.wet", ru)
        lee = prepare("lee_pairs", work / "lee", LABELED / "gensim-4.4.0" / "gensim" / "test" / "test_data")
        (work / "pairs.jsonl").write_text((lee / "data.jsonl").read_text())
        return ["--crawl", str(work / "ru.warc.wet"), "--labeled", str(work / "pairs.jsonl"), "--task", "regression",
                "--text-pair-column", "text_pair", "--label-column", "score", *PATHS]
    if case == "french_german_warc_topics":
        reuters_parquet(work / "topics.parquet", prepare("reuters", work / "reuters", LABELED / "weka"))
        return ["--crawl", str(FR_DE), "--labeled", str(work / "topics.parquet"), "--text-column", "body",
                "--label-column", "topic", *PATHS]
    wsj = prepare("wsj_pos", work / "wsj", LABELED / "pattern")
    (work / "pos.jsonl").write_text((wsj / "data.jsonl").read_text())
    return ["--crawl", str(TINY / "tiny.warc.gz"), "--labeled", str(work / "pos.jsonl"), "--task", "tokens", *PATHS]


def reuters_parquet(path: Path, prepared: Path) -> None:
    """Reuters' articles as a user's Parquet file: columns body and topic, no split; of the corn articles only the first
    is kept, a real class of one row (too few for validation or test)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (prepared / "data.jsonl").open()]
    corn = [r for r in rows if r["label"] == "corn"]
    rows = [r for r in rows if r["label"] != "corn" or r is corn[0]]
    pq.write_table(pa.table({"body": [r["text"] for r in rows], "topic": [r["label"] for r in rows]}), path)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(MATRIX))
def test_matrix_case_runs_to_the_card(runs, case):
    from schemas.manifest import read_manifest

    languages, task = MATRIX[case]
    r, args, run = runs[case], runs[case]["args"], runs[case]["run"]
    assert r["rc"] == 0, r["out"][-4000:]
    assert "finished" in r["out"] and "Traceback" not in r["out"]
    kept = read_manifest(run / "corpus")["counts"]["kept_by_language"]
    assert languages <= set(kept), kept
    if case == "russian_wet_pairs":  # pages the same language id called Russian before cleaning (one or two may
        assert kept["ru"] >= 0.95 * sum(kept.values()), kept  # read as English once their menus are cleaned away)
    lines = [line for line in r["out"].splitlines() if line.strip()]
    stages = [line for line in lines if line.startswith("[") and "] done in " in line]
    assert len(stages) == len({line.split("]")[0] for line in stages}) >= 12, r["out"]  # one line per stage
    assert not [line for line in lines if " INFO " in line or "Task run" in line], r["out"]  # Prefect's lines: the log
    assert len(lines) <= len(stages) + 4, r["out"]  # warnings and the last line
    name = Path(args[3]).stem
    assert read_manifest(run / "labeled" / name)["config"]["task"] == task
    assert read_manifest(run / "corpus")["counts"]["contamination"][name]["items"] > 0  # checked, unasked
    card = json.loads((run / "card" / "report.json").read_text())
    tuned = next(e for e in card["models"] if e["name"] == "fine-tuned")["quality"]["task"]
    assert tuned["test_examples"] > 0 and tuned["controls"]
    teacher = next(e for e in card["models"] if e["name"] == "teacher")["quality"]
    assert set(teacher.get("probing") or {}) | set(teacher.get("probing_skipped") or {}) <= set(kept)
    if case == "french_german_warc_topics":  # no option: the crawl's own languages kept, named on the console
        corpus_line = next(line for line in lines if line.startswith("[corpus] done in "))
        assert "fr " in corpus_line and "de " in corpus_line, corpus_line
        assert set(teacher.get("probing") or {}) >= {"fr", "de"}, teacher.get("probing_skipped")
        assert set(teacher.get("pseudo_perplexity") or {}) >= {"fr", "de"}
        report = json.loads((run / "corpus" / "report.json").read_text())
        assert {r["language"] for r in report["languages"]} >= {"fr", "de"}
        assert any("class 'corn' has 1 row: none in validation or test" in line for line in lines), r["out"]
        head = (run / "card" / "report.md").read_text().split("| model | kind |")[0]
        assert "**Task warning:** class 'corn' has 1 row" in head and "fr " in head.split("**Corpus:**")[1]


@pytest.mark.slow
def test_a_failed_stage_is_reported_in_a_few_lines(tmp_path, prefect_api):
    tweets_csv(tmp_path / "tweets.csv", n=200)
    r = lmforge_run("--name", "bad", "--runs-dir", str(tmp_path / "runs"), "--crawl", str(TINY / "tiny.warc.gz"),
                    "--labeled", str(tmp_path / "tweets.csv"), "--text-column", "tweet", "--label-column", "stars",
                    "--preset", "tiny", cwd=tmp_path)
    out = r.communicate(timeout=600)[0]
    assert r.returncode == 1
    failure = [line for line in out.splitlines() if "fail" in line.lower() or "error" in line.lower()]
    assert "Traceback" not in out and 1 <= len(failure) <= 3, out
    assert failure[0].startswith("lmforge run: stage labeled failed:") and "'stars'" in failure[0]
    assert f"log: {tmp_path / 'runs' / 'bad' / 'logs' / 'labeled.log'}" in failure[0]
    assert "Traceback" in (tmp_path / "runs" / "bad" / "logs" / "flow.log").read_text()


@pytest.mark.slow
def test_a_crawl_that_keeps_nothing_fails_once_in_three_lines_naming_the_file_and_field(tmp_path, prefect_api):
    """JSONL lines without `text`: the corpus stage fails naming the file, the line and the field; a failure that
    would fail again is not retried; the whole console is the failure's lines."""
    pages = [{"id": p["id"], "url": p["url"], "body": p["text"]} for p in english_pages()[:20]]  # `body`, not `text`
    crawl = tmp_path / "pages.jsonl"
    crawl.write_text("".join(json.dumps(p) + "\n" for p in pages))
    r = lmforge_run("--name", "empty", "--runs-dir", str(tmp_path / "runs"), "--crawl", str(crawl), "--preset", "tiny",
                    cwd=tmp_path, env={"PREFECT_LOGGING_LEVEL": "INFO"})  # the flow log gets every line, as a user's
    out = r.communicate(timeout=600)[0]
    lines = [line for line in out.splitlines() if line.strip()]
    assert r.returncode == 1 and 1 <= len(lines) <= 3, out
    assert lines[0].startswith("lmforge run: stage corpus failed: ValueError: kept none of its 20 documents"), lines[0]
    assert f"{crawl}, position 1: line has no string field 'text'" in lines[0], lines[0]
    log = (tmp_path / "runs" / "empty" / "logs" / "flow.log").read_text()
    assert log.count("[corpus] corpus --input") == 1, "the corpus stage ran twice: a deterministic failure was retried"
