"""Every bad input kind lands in quarantine (or a named drop) with its file and position; counts reconcile."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# Real sentences (the Debian Social Contract), long enough to pass the quality rules.
PROSE = " ".join([
    "Debian will remain one hundred percent free, and we provide the guidelines that we use to decide whether a work is free.",
    "We will support our users who develop and run non-free works on Debian, but we will never make the system depend on them.",
    "We will give back to the free software community, sending bug fixes and improvements to the upstream authors of the software.",
    "We will not hide problems, and we will keep our entire bug report database open for public view at all times for everyone.",
    "Our priorities are our users and free software, and we will be guided by the needs of our users and the free software community.",
])


@pytest.mark.slow
def test_bad_inputs_are_quarantined_with_reasons(tmp_path):
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.stage import run
    from schemas.manifest import read_manifest

    src = tmp_path / "in"
    src.mkdir()
    lines = [
        json.dumps({"id": "ok-1", "url": "https://a.invalid/1", "text": PROSE}),
        "{this is not json",
        json.dumps({"id": "nul", "text": PROSE + "\x00"}),
        json.dumps({"id": "empty", "text": ""}),
        json.dumps({"id": "ok-1", "text": PROSE.replace("Debian", "The project")}),  # a repeated id
        json.dumps({"id": "huge", "text": "x" * (10 << 20)}),  # one 10 MB line
        json.dumps({"no_text": True}),
    ]
    (src / "a.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    (src / "zero.warc.gz").write_bytes(b"")
    pq.write_table(pa.table({"body": ["no text column here"]}), src / "wrong.parquet")
    (src / "binary.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))

    out = run(CorpusConfig(input=[str(src)], output=str(tmp_path / "out")))
    c = read_manifest(out)["counts"]
    assert c["in"] == c["kept"] + sum(c["dropped"].values()) + c["duplicates"] + c["quarantined"]
    q = [json.loads(x) for f in sorted((out / "quarantine").glob("part-*.jsonl")) for x in f.read_text().splitlines()]
    reasons = {(r["source"].rsplit("/", 1)[-1], r["reason"]) for r in q}
    assert {("a.jsonl.gz", "invalid_json"), ("a.jsonl.gz", "nul_bytes"), ("a.jsonl.gz", "duplicate_id"),
            ("a.jsonl.gz", "missing_text"), ("zero.warc.gz", "empty_file"), ("wrong.parquet", "wrong_schema"),
            ("binary.jsonl", "unreadable_line"), ("a.jsonl.gz", "payload_too_large")} <= reasons  # the 10 MB line
    assert all(r["offset"] is not None for r in q)
    assert c["kept"] == 1 and c["dropped"].get("empty_text") == 1


@pytest.mark.slow
def test_a_corpus_that_keeps_nothing_fails_in_one_line_naming_the_file_and_field(tmp_path):
    """issue 51: a crawl of JSON lines without `text` (a user's own export with another field name) is not a finished
    corpus of nothing: `lmforge corpus` fails with one line giving the counts, the file and the missing field; the
    manifest and report are still written, and counts reconcile."""
    import subprocess
    import sys

    from schemas.manifest import read_manifest

    src = tmp_path / "crawl.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", "body": PROSE}) + "\n" for i in range(20)))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "lmforge.cli", "corpus", "--input", str(src), "--output", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    errors = [line for line in p.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, p.stderr[-3000:]
    assert ("kept none of its 20 documents (quarantined missing_text 20); the first: " in errors[0]
            and f"{src}, position 1: line has no string field 'text'" in errors[0]), errors[0]
    c = read_manifest(out)["counts"]
    assert c["in"] == c["quarantined"] == 20 and c["kept"] == 0
