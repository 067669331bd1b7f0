"""Pure parts of `lmforge bench scale`: the input generator and the process-tree RSS sampler (no Beam run)."""
from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

import psutil

from bench.corpus.scale import growth
from bench.corpus.scale_inputs import Bases, GenConfig, cached_meta, generate, write_inputs
from bench.kit.peak_rss import PeakRSS, tree_rss
from pipelines.corpus.dedup import shingles
from pipelines.corpus.readers import read_file
from schemas.records import RawDocument

EN = ("Debian will remain 100% free. We provide the guidelines that we use to determine if a work is free.\n"
      "We will support our users who develop and run non-free works on Debian.\n"
      "We will give back to the free software community and we will not hide problems from anyone.\n"
      "We will keep our entire bug report database open for public view at all times, as promised.")
RU = ("Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему.\n"
      "Всё смешалось в доме Облонских. Жена узнала, что муж был в связи с бывшею в их доме француженкою-гувернанткой.")
BASES = Bases.from_texts([(EN, "https://www.debian.org/social_contract", "en"), (RU, "", "ru")])


def _jaccard(a: str, b: str) -> float:
    sa, sb = set(shingles(a, 5)), set(shingles(b, 5))
    return len(sa & sb) / len(sa | sb)


def test_generator_is_deterministic_distinct_and_plants_duplicates():
    cfg = GenConfig(n_docs=400, seed=3)
    docs = list(generate(BASES, cfg))
    assert docs == list(generate(BASES, cfg))
    assert len({d["id"] for d in docs}) == 400 and docs[0]["kind"] == "original"
    kinds = Counter(d["kind"] for d in docs)
    assert 20 <= kinds["near"] <= 65 and kinds["exact"] <= 12  # 10% and 1% of 400, binomial spread
    by_id = {d["id"]: d for d in docs}
    for d in docs:
        if d["kind"] != "original":
            src = by_id[d["of"]]
            assert src["kind"] == "original" and src["id"] < d["id"]  # the stage keeps the smallest id
            if d["kind"] == "exact":
                assert d["text"] == src["text"]
            else:
                assert d["text"] != src["text"]
                if len(src["text"].split()) >= 40:  # one word in a 12-word line breaks 5 of 8 shingles
                    assert _jaccard(d["text"], src["text"]) >= 0.7
    originals = [d["text"] for d in docs if d["kind"] == "original" and "Debian" in d["text"]]
    assert len(set(originals)) == len(originals)
    assert _jaccard(originals[0], originals[1]) < 0.3  # same base, independent perturbations
    assert all(d["text"].split("\n")[0].endswith((".", ",")) for d in docs)  # line ends are kept
    assert GenConfig(n_docs=400, seed=4) != cfg and list(generate(BASES, GenConfig(n_docs=5, seed=4))) != docs[:5]


def test_write_inputs_streams_files_the_stage_reads(tmp_path):
    cfg = GenConfig(n_docs=50, files=4)
    out = tmp_path / "n50"
    meta = write_inputs(BASES, cfg, out, progress=False)
    assert sum(meta["kinds"].values()) == 50 and cached_meta(out, cfg) == meta
    assert cached_meta(out, GenConfig(n_docs=50, files=4, seed=1)) is None
    files = sorted(out.glob("*.jsonl.zst"))
    assert len(files) == 4
    recs = [r for f in files for r in read_file(str(f))]
    assert all(isinstance(r, RawDocument) for r in recs) and len({r.id for r in recs}) == 50
    assert [r.text for r in recs if r.id == "scale-00000000"] == [next(generate(BASES, cfg))["text"]]


def test_tree_rss_sees_children():
    me = psutil.Process()
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(30)"])
    try:
        sampler = PeakRSS(me.pid, interval=0.05)
        sampler.start()
        for _ in range(200):  # until the child has touched its 64 MB
            total, per = tree_rss(me)
            if per.get(child.pid, 0) > 60 << 20:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        sampler.stop()
        assert child.pid in per and me.pid in per and total == sum(per.values())
        assert sampler.samples >= 2 and sampler.peak_single >= 60 << 20
        assert sampler.peak_total >= sampler.peak_by_pid[child.pid] + me.memory_info().rss // 2
    finally:
        child.kill()
        child.wait()


def test_growth_exponents():
    rows = [{"docs_in": 10_000, "wall_s": 20.0, "peak_rss_tree_mb": 500, "peak_rss_largest_mb": 300},
            {"docs_in": 100_000, "wall_s": 200.0, "peak_rss_tree_mb": 5000, "peak_rss_largest_mb": 30_000}]
    (g,) = growth(rows)
    assert g["wall_s_exponent"] == 1.0 and g["peak_rss_tree_mb_exponent"] == 1.0 and g["peak_rss_largest_mb_exponent"] == 2.0
    assert g["marginal_ms_per_doc"] == 2.0 and g["marginal_rss_tree_kb_per_doc"] == 51.2  # 4500 MB * 1024 / 90,000 docs


def test_goals_are_judged_on_the_1m_row_and_the_text_rate_is_per_core(tmp_path):
    from bench.corpus.scale import goals, text_mb

    rows = [{"size": 100_000, "docs_in": 100_000, "wall_s": 100.0, "peak_rss_tree_mb": 1000, "processes_seen": 1},
            {"size": 1_000_000, "docs_in": 1_000_000, "wall_s": 1300.0, "peak_rss_tree_mb": 6200, "processes_seen": 3}]
    text = "\n".join(goals(rows, growth([dict(r, peak_rss_largest_mb=r["peak_rss_tree_mb"]) for r in rows]),
                           {100_000: 50.0, 1_000_000: 520.0}))
    assert "6,144 MB (6 GB): **NOT MET** (6,200 MB)" in text and "at most 1.1: **NOT MET** (k = 1.11)" in text
    assert "**0.500 MB/s per core**" in text and "on 2 process(es): **0.200 MB/s per core**, against C4's 0.238" in text
    assert "not judged" in "\n".join(goals(rows[:1], [], {}))
    inputs = tmp_path / "in"
    write_inputs(Bases.from_texts([("a", "https://x/a", "one two three four five six " * 3)]), GenConfig(n_docs=20, files=2), inputs)
    import json

    import zstandard

    want = sum(len(json.loads(line)["text"].encode()) for f in inputs.glob("*.zst")
               for line in zstandard.decompress(f.read_bytes(), max_output_size=1 << 24).decode().splitlines())
    assert text_mb(inputs) == want / 1e6 == text_mb(inputs)  # counted once, then read from the dot-file


def test_reused_rows_come_from_json_lines_and_skip_failures(tmp_path):
    from bench.corpus.scale import load_rows, render

    log = tmp_path / "scale.log"
    log.write_text("bench scale: 10,000 documents ...\n"
                   '{"size": 10000, "wall_s": 1.0, "docs_in": 10000, "docs_per_s": 10000.0, "peak_rss_tree_mb": 600, '
                   '"peak_rss_largest_mb": 600, "loadavg_1m_before": 0.5, "kept": 9000, "dropped": 900, '
                   '"duplicates_by_kind": {"exact": 50, "near": 50}, "quarantined": 0, "measured_at": "2026-11-23 13:52 UTC"}\n'
                   '{"size": 100000, "failed": "killed", "peak_rss_tree_mb": 9, "peak_rss_largest_mb": 9}\n')
    rows = load_rows(log, [10_000, 100_000, 1_000_000])
    assert list(rows) == [10_000]  # the failed 100k row is not reused
    assert rows[10_000]["reused_from"] == str(log)
    text = render([rows[10_000]], [], [])
    assert "reused here: 10,000 at 2026-11-23 13:52 UTC" in text


def test_resume_reuses_committed_snapshots_and_runs_only_the_rest(tmp_path, monkeypatch):
    """An interrupted incremental run: snapshot 1 is in the index (its manifest, no saved row),
    snapshot 2 is not; --resume reports 1 from its manifest with memory unrecorded and runs 2."""
    import json

    from bench.corpus import scale

    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(4):
        (inputs / f"part-{i:03d}.jsonl.zst").write_bytes(b"")
    out = tmp_path / "out"
    (out / "index").mkdir(parents=True)
    (out / "index" / "INDEX.json").write_text(json.dumps({"generations": [{"name": "gen-00001"}]}))
    (out / "run-00").mkdir()
    (out / "run-00" / "manifest.json").write_text(json.dumps({"wall_seconds": 100.0, "counts": {
        "in": 1000, "kept": 900, "dropped": {"c4": 50}, "duplicates_by_kind": {"near": 50}, "quarantined": 0}}))
    ran = []

    def fake_stage(snap, run_dir, beam_args, max_rss):
        ran.append(sorted(p.name for p in snap.iterdir()))
        assert beam_args[-2:] == ["--index", str(out / "index")]
        return {"wall_s": 120.0, "docs_in": 1000, "docs_per_s": 8.3, "peak_rss_tree_mb": 700, "peak_rss_largest_mb": 700,
                "loadavg_1m_before": 1.0, "loadavg_1m_after": 1.5, "kept": 880, "dropped": 60,
                "duplicates_by_kind": {"near": 55, "exact": 5}, "quarantined": 0, "output_mb": 1.0}

    monkeypatch.setattr(scale, "run_stage", fake_stage)
    row = scale.run_incremental(inputs, out, [], 0, 2, resume=True)
    assert ran == [["part-002.jsonl.zst", "part-003.jsonl.zst"]]  # only the uncommitted snapshot ran
    assert row["docs_in"] == 2000 and row["wall_s"] == 220.0 and row["kept"] == 1780
    assert row["duplicates_by_kind"] == {"near": 105, "exact": 5}
    assert row["peak_rss_tree_mb"] == 700 and row["snapshots_rss_unmeasured"] == [1]
    assert (out / "run-01.row.json").exists()  # a later resume reuses the measured row, not the manifest
    assert "not recorded, 700" in scale.render([{"size": 2000, **row}], [], [])
    # without --resume the index is started afresh and every snapshot runs
    ran.clear()
    scale.run_incremental(inputs, out, [], 0, 2)
    assert len(ran) == 2


def test_modes_check_compares_record_files_and_judges_three_of_three(tmp_path):
    """--check-modes: a run differs when any record file differs, is missing or is extra; the goal needs 3 clean runs."""
    from bench.corpus.scale import compare_digests, output_digests, render_modes

    for run, extra in (("a", ""), ("b", ""), ("c", "x")):
        (tmp_path / run / "data" / "en").mkdir(parents=True)
        (tmp_path / run / "data" / "en" / "part-0.parquet").write_bytes(b"rows" + extra.encode())
        (tmp_path / run / "_tally.jsonl").write_text('{"id": "in", "n": 3}\n')
        (tmp_path / run / "manifest.json").write_text(run)  # not a record file: never compared
    ref = output_digests(tmp_path / "a")
    assert sorted(ref) == ["_tally.jsonl", "data/en/part-0.parquet"]
    assert compare_digests(ref, output_digests(tmp_path / "b")) == {"files": 2, "identical": 2, "differing": []}
    assert compare_digests(ref, output_digests(tmp_path / "c")) == {"files": 2, "identical": 1, "differing": ["data/en/part-0.parquet"]}
    (tmp_path / "b" / "_tally.jsonl").unlink()
    assert compare_digests(ref, output_digests(tmp_path / "b"))["differing"] == ["_tally.jsonl"]

    base = {"wall_s": 1.0, "peak_rss_tree_mb": 10, "processes_seen": 3, "docs_in": 3, "kept": 2, "dropped": 0,
            "duplicates_by_kind": {"exact": 1}, "quarantined": 0, "files": 2, "identical": 2, "differing": []}
    rows = [{"mode": "in_memory", "run": 0, **base}, *({"mode": "multi_processing", "run": k, **base} for k in (1, 2, 3))]
    assert "**MET** (3 of 3 runs)" in render_modes(rows, 100)
    rows[2] = {"mode": "multi_processing", "run": 2, "failed": "stage refused: near-dedup: records were lost"}
    text = render_modes(rows, 100)
    assert "**NOT MET** (2 of 3 runs)" in text and "**no**: stage refused" in text
    assert "**NOT MET** (2 of 2 runs)" in render_modes(rows[:2] + rows[3:], 100)  # fewer than 3 runs is not the goal
