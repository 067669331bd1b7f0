"""`lmforge bench hostile` on small pages without its peer: every crafted page and the control are made, every step
is timed on each, and the report names the slowest step and the stage's outcome."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_hostile_times_every_step_on_every_page(tmp_path):
    from bench.corpus.hostile import HostileBenchConfig, main, pages

    made = pages(HostileBenchConfig(size=20_000, crawl=str(ROOT / "samples" / "crawl")))
    assert len(made) == 11 and all(19_000 <= len(t) <= 21_000 for t in made.values()), {k: len(v) for k, v in made.items()}
    assert made["one long word"].split() == [made["one long word"]]
    out = tmp_path / "BENCHMARKS.md"
    assert main(["--size", "20000", "--peer-seconds", "0", "--crawl", str(ROOT / "samples" / "crawl"),
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert "## corpus: cleaning steps on crafted pages" in text and text.count("\n| ") == 1 + 11
    data = json.loads((tmp_path / "benchmarks" / "corpus-cleaning-steps-on-crafted-pages.json").read_text())
    assert set(data) == set(made)
    for name, row in data.items():
        assert {"normalise", "c4", "gopher_repetition", "gopher_quality", "pii"} <= set(row["steps"]), name
        assert row["process_document"][0].split(":")[0] in ("kept", "dropped", "quarantined")
