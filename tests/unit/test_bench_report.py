"""docs/BENCHMARKS.md sections are replaced in place, others kept."""
from __future__ import annotations

import json

from bench.kit.report import write_section


def test_sections_replace_in_place(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    write_section(path, "corpus: a", "first\n", {"x": 1})
    write_section(path, "shards: b", "other\n", {"y": 2})
    write_section(path, "corpus: a", "second\n", {"x": 3})
    text = path.read_text()
    assert text.count("## corpus: a") == 1 and "second" in text and "first" not in text and "other" in text
    assert text.index("## corpus: a") < text.index("## shards: b")
    assert json.loads((tmp_path / "benchmarks" / "corpus-a.json").read_text()) == {"x": 3}


def test_a_section_rendered_later_keeps_its_measurement_time(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    write_section(path, "data: x", "body\n", {"x": 1}, measured="2026-01-02 03:04 UTC")
    assert "_Measured 2026-01-02 03:04 UTC on " in path.read_text()
