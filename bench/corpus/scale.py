"""Scaling of the corpus stage: wall time and peak memory at 10k, 100k and 1M documents.

    lmforge bench scale [--sizes 10000 100000 1000000] [--keep-outputs] [-- --direct_num_workers=2 ...]

Inputs are generated from the real pages of samples/crawl (cleaned by the stage's pure core,
~1.5k en/ru documents) and cached in samples/.cache/scale/n<size>-s<seed>/ as 16 JSONL.zst
files, so Beam reads them in parallel. Each generated document is a real one, perturbed so that
almost all are distinct (see perturb()); 10% are planted near-duplicates and 1% exact copies of
an earlier generated document, so the dedup steps have work proportional to the size.

Each size runs `lmforge corpus` (the stage's defaults: DirectRunner, in_memory) as a
subprocess; a thread samples the RSS of the whole process tree every 0.2 s. Summed RSS counts
pages shared between processes (libraries) once per process, so it overstates a little.
Results go to a section of docs/BENCHMARKS.md; linear growth is <= ~10x time and memory per 10x
documents. Each finished size is also appended to <cache>/rows.jsonl (and printed as one JSON
line), so a long run that is stopped keeps what it measured: `--reuse-rows FILE` takes the
sizes found in FILE as measured and runs only the others (1M takes ~1.5 h here).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.corpus.scale_inputs import MB, Bases, GenConfig, cached_meta, corpus_documents, real_documents, write_inputs
from bench.kit.options import bench_parser, parse_bench
from bench.kit.steps import code_version, run_cli
from common.config import opt
from flows.stages.runner import StageFailed


def _total_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


@dataclass
class ScaleBenchConfig:
    sizes: list[int] = opt([10_000, 100_000, 1_000_000], "documents per run")
    crawl: list[str] = opt(["samples/crawl"], "real pages to start from, cleaned by the stage's pure core")
    from_corpus: str | None = opt(None, "start from the kept documents of this corpus stage directory instead of --crawl")
    cache: str = opt("samples/.cache/scale", "generated inputs and stage outputs")
    seed: int = opt(0, "generator seed")
    max_rss_gb: float = opt(help="kill a run whose process tree passes this RSS in GiB, and report it; by default 85% "
                            "of this machine's memory", default_factory=lambda: round(0.85 * _total_memory() / 2**30, 1))
    incremental_sizes: list[int] = opt([1_000_000], "sizes run as a recurring refresh: snapshots of --snapshot-files "
                                       "input files each, deduplicated through one band index (the DirectRunner holds "
                                       "every shuffle in memory, ~24 KB per document here, so 1M in one pipeline does "
                                       "not fit in 24 GB)")
    snapshot_files: int = opt(2, "input files per snapshot (16 files per size)")
    check_modes: int = opt(0, "instead of the scaling runs: run the stage in_memory once and in multi_processing "
                           "(2 workers) this many times on the --check-size input, and compare their record files byte "
                           "for byte (issue 15 item 4; writes the section 'corpus: parallel DirectRunner modes')")
    check_size: int = opt(100_000, "documents for --check-modes")


def run_stage(inputs: Path, out: Path, beam_args: list[str], max_rss: int = 0) -> dict[str, Any]:
    """One `lmforge corpus` subprocess: wall time, peak RSS (tree, largest process, root), counts.
    With max_rss > 0 the tree is killed when its RSS passes it; the row then says so. A stage that exits
    non-zero is flows.stages.runner.StageFailed (its error line and its log)."""
    shutil.rmtree(out, ignore_errors=True)
    load_before = os.getloadavg()
    # bench.kit.steps: the stage's exit status, its log, and the peak RSS of its tree sampled every 0.2 s
    run = run_cli("corpus", ["corpus", "--input", str(inputs), "--output", str(out), *beam_args], out.with_suffix(".log"),
                  cwd=None, rss_limit=max_rss)
    wall, sampler = run.seconds, run.rss
    if sampler.killed_at:
        return {"failed": f"stopped after {wall:,.0f} s: the process tree passed {max_rss / 2**30:.1f} GB RSS",
                "wall_s": round(wall, 2), "peak_rss_tree_mb": round(sampler.peak_total / MB),
                "peak_rss_largest_mb": round(sampler.peak_single / MB), "loadavg_1m_before": round(load_before[0], 2)}
    manifest = json.loads((out / "manifest.json").read_text())
    c = manifest["counts"]
    return {"wall_s": round(wall, 2), "stage_wall_s": manifest.get("wall_seconds"),
            "docs_in": c["in"], "docs_per_s": round(c["in"] / wall, 1),
            "peak_rss_tree_mb": round(sampler.peak_total / MB), "peak_rss_largest_mb": round(sampler.peak_single / MB),
            "peak_rss_root_mb": round(sampler.peak_by_pid.get(sampler.root.pid, 0) / MB),
            "peak_tree_at_frac_of_wall": round(sampler.peak_total_at / wall, 2), "processes_seen": len(sampler.peak_by_pid),
            "rss_samples": sampler.samples, "loadavg_1m_before": round(load_before[0], 2), "loadavg_1m_after": round(os.getloadavg()[0], 2),
            "kept": c["kept"], "dropped": sum(c["dropped"].values()), "duplicates_by_kind": c.get("duplicates_by_kind", {}),
            "quarantined": c["quarantined"], "output_mb": round(sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / MB, 1)}


def _committed_generations(index: Path) -> int:
    f = index / "INDEX.json"
    return len(json.loads(f.read_text())["generations"]) if f.exists() else 0


def _row_from_manifest(run_dir: Path) -> dict[str, Any]:
    """A finished snapshot whose process was not watched by this run (the bench was interrupted
    and resumed before its row was saved): wall time and counts from its manifest; peak RSS was
    not recorded and is reported as unmeasured, not guessed."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    c = manifest["counts"]
    wall = manifest["wall_seconds"]
    return {"wall_s": round(wall, 2), "stage_wall_s": wall, "docs_in": c["in"], "docs_per_s": round(c["in"] / wall, 1),
            "peak_rss_tree_mb": None, "peak_rss_largest_mb": None, "loadavg_1m_before": None, "loadavg_1m_after": None,
            "kept": c["kept"], "dropped": sum(c["dropped"].values()), "duplicates_by_kind": c.get("duplicates_by_kind", {}),
            "quarantined": c["quarantined"], "output_mb": None, "from_manifest": True}


def run_incremental(inputs: Path, out: Path, beam_args: list[str], max_rss: int, files_per_snapshot: int,
                    resume: bool = False) -> dict[str, Any]:
    """The same documents as a recurring refresh: consecutive snapshots of `files_per_snapshot`
    input files, each run deduplicated against the band index of the ones before. Time adds
    up; memory is the largest snapshot's. With `resume`, snapshots already committed to the
    index (an earlier, interrupted run) are reported from their saved rows, not rerun."""
    files = sorted(inputs.glob("*.jsonl.zst"))
    chunks = [files[i:i + files_per_snapshot] for i in range(0, len(files), files_per_snapshot)]
    index = out / "index"
    done = _committed_generations(index) if resume else 0
    if not resume:
        shutil.rmtree(out, ignore_errors=True)
    runs = []
    for k, chunk in enumerate(chunks):
        run_dir, row_file = out / f"run-{k:02d}", out / f"run-{k:02d}.row.json"
        if k < done:
            if row_file.exists():
                r = json.loads(row_file.read_text())
            elif (run_dir / "manifest.json").exists():
                r = _row_from_manifest(run_dir)
            else:
                raise SystemExit(f"bench scale: --resume: the index has {done} generation(s) but snapshot {k + 1} "
                                 f"left neither {row_file} nor {run_dir}/manifest.json; rerun without --resume")
            print(f"bench scale:   snapshot {k + 1}/{len(chunks)}: committed by an earlier run, reusing its row", flush=True)
            runs.append(r)
            continue
        snap = out / f"snapshot-{k:02d}"
        shutil.rmtree(snap, ignore_errors=True)
        snap.mkdir(parents=True)
        for f in chunk:
            (snap / f.name).symlink_to(f)
        print(f"bench scale:   snapshot {k + 1}/{len(chunks)} ({len(chunk)} files) ...", flush=True)
        r = run_stage(snap, run_dir, [*beam_args, "--index", str(index)], max_rss)
        runs.append(r)
        if "failed" in r:
            return {**r, "failed": f"snapshot {k + 1}/{len(chunks)}: {r['failed']}"}
        row_file.write_text(json.dumps(r))
        shutil.rmtree(run_dir / "data", ignore_errors=True)  # keep manifests, free the disk
    wall = sum(r["wall_s"] for r in runs)
    dups: dict[str, int] = {}
    for r in runs:
        for kind, v in r["duplicates_by_kind"].items():
            dups[kind] = dups.get(kind, 0) + v
    docs = sum(r["docs_in"] for r in runs)
    return {"mode": f"incremental: {len(runs)} snapshots x {len(chunks[0])} files through one band index",
            "wall_s": round(wall, 2), "docs_in": docs, "docs_per_s": round(docs / wall, 1),
            "peak_rss_tree_mb": max((r["peak_rss_tree_mb"] for r in runs if r["peak_rss_tree_mb"] is not None), default=None),
            "peak_rss_largest_mb": max((r["peak_rss_largest_mb"] for r in runs if r["peak_rss_largest_mb"] is not None),
                                       default=None),
            "snapshots_rss_unmeasured": [k + 1 for k, r in enumerate(runs) if r["peak_rss_tree_mb"] is None],
            "snapshot_wall_s": [r["wall_s"] for r in runs], "snapshot_peak_rss_tree_mb": [r["peak_rss_tree_mb"] for r in runs],
            "loadavg_1m_before": next((r["loadavg_1m_before"] for r in runs if r["loadavg_1m_before"] is not None), None),
            "loadavg_1m_after": runs[-1]["loadavg_1m_after"],
            "kept": sum(r["kept"] for r in runs), "dropped": sum(r["dropped"] for r in runs), "duplicates_by_kind": dups,
            "quarantined": sum(r["quarantined"] for r in runs),
            "output_mb": round(sum(r["output_mb"] or 0 for r in runs), 1)}


# ---------------------------------------------------------------- parallel DirectRunner modes

MODE_ARGS = {"in_memory": [], "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]}
COMPARED_PARTS = ("data", "dropped", "duplicates", "quarantine")


def output_digests(out: Path) -> dict[str, str]:
    """sha256 of every record file a corpus run wrote (data, dropped, duplicates, quarantine, _tally.jsonl)."""
    files = [f for part in COMPARED_PARTS for f in (out / part).rglob("*") if f.is_file()] + [out / "_tally.jsonl"]
    return {str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(files) if f.exists()}


def compare_digests(ref: dict[str, str], got: dict[str, str]) -> dict[str, Any]:
    differing = sorted(f for f in set(ref) | set(got) if ref.get(f) != got.get(f))
    return {"files": len(got), "identical": len(ref) - sum(1 for f in differing if f in ref), "differing": differing}


def check_modes(inputs: Path, out: Path, runs: int, max_rss: int) -> list[dict[str, Any]]:
    """The stage once in_memory (the reference) and `runs` times in multi_processing with 2 workers on
    the same input: each run's counts reconcile (or the stage refuses, which is recorded) and its
    record files are compared byte for byte with the reference's."""
    rows: list[dict[str, Any]] = []
    ref_dir = out / "in_memory"
    ref = None
    for k in range(runs + 1):
        mode = "in_memory" if k == 0 else "multi_processing"
        run_dir = ref_dir if k == 0 else out / f"multi_processing-{k}"
        print(f"bench scale: modes check: {mode}{'' if k == 0 else f' run {k}/{runs}'} ...", flush=True)
        try:
            r = run_stage(inputs, run_dir, MODE_ARGS[mode], max_rss)
        except StageFailed as e:  # the stage refused to write a manifest: counts or dedup counters did not add up
            rows.append({"mode": mode, "run": k, "failed": "stage refused: " + e.reason[:300]})
            continue
        if "failed" in r:  # killed at --max-rss-gb
            rows.append({"mode": mode, "run": k, "failed": r["failed"]})
            continue
        row = {"mode": mode, "run": k, **{key: r[key] for key in ("wall_s", "peak_rss_tree_mb", "processes_seen", "docs_in",
                                                                 "kept", "dropped", "duplicates_by_kind", "quarantined")}}
        digests = output_digests(run_dir)
        if k == 0:
            ref = digests
            row.update(files=len(ref), identical=len(ref), differing=[])
        else:
            row.update(compare_digests(ref, digests) if ref is not None else {"files": len(digests), "identical": None, "differing": []})
            shutil.rmtree(run_dir, ignore_errors=True)
        rows.append(row)
    shutil.rmtree(ref_dir, ignore_errors=True)
    return rows


def render_modes(rows: list[dict[str, Any]], size: int) -> str:
    lines = [f"`lmforge corpus` on the {size:,}-document input of the scaling runs (no index), once with the stage's default "
             "(DirectRunner in_memory, one process) and then in multi_processing with 2 workers "
             "(`--direct_running_mode=multi_processing --direct_num_workers=2`). A run reconciles when its manifest is "
             "written: the stage refuses otherwise (in = kept + dropped + duplicates + quarantined, and the paired "
             "counters of every dedup shuffle). Compared: the sha256 of every file under data/, dropped/, duplicates/, "
             "quarantine/ and _tally.jsonl, against the in_memory run.", "",
             "| run | mode | wall s | peak RSS tree MB | processes | kept | duplicates exact / near | reconciled | files identical to in_memory |",
             "|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['run']} | {r['mode']} | | | | | | **no**: {r['failed']} | |")
            continue
        d = r["duplicates_by_kind"]
        same = "reference" if r["run"] == 0 else (f"{r['identical']} of {r['files']}" + (
            f" (differ: {', '.join(r['differing'][:3])})" if r["differing"] else ""))
        lines.append(f"| {r['run']} | {r['mode']} | {r['wall_s']:,.1f} | {r['peak_rss_tree_mb']:,} | {r['processes_seen']} | "
                     f"{r['kept']:,} | {d.get('exact', 0):,} / {d.get('near', 0):,} | yes | {same} |")
    mp = [r for r in rows if r["mode"] == "multi_processing"]
    good = [r for r in mp if "failed" not in r and not r["differing"] and r["identical"] == r["files"]]
    lines += ["", f"Goal (issue 15 item 4): the {size:,}-document stage reconciles in multi_processing with 2 workers in "
              f"3 of 3 runs, its outputs byte-identical to in_memory: **{'MET' if len(mp) >= 3 and len(good) == len(mp) else 'NOT MET'}** "
              f"({len(good)} of {len(mp)} runs)."]
    return "\n".join(lines) + "\n"


def load_rows(path: Path, sizes: list[int]) -> dict[int, dict[str, Any]]:
    """Rows of `sizes` from JSON lines (other lines are skipped, so a whole log will do); the last
    row of a size wins. Rows that failed are not reused."""
    found: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith('{"size"'):
            continue
        row = json.loads(line)
        if row["size"] in sizes and "failed" not in row:
            found[row["size"]] = {**row, "reused_from": str(path)}
    return found


GOAL_PEAK_RSS_MB = 6 * 1024
"""Issue 15: 1,000,000 documents with a peak RSS of at most 6 GB ..."""
GOAL_WALL_EXPONENT = 1.1
"""... and a wall-time exponent of at most 1.1 from 100k to 1M."""
C4_MB_PER_CORE_S = 7e12 / (341 * 86400) / 1e6
"""C4's published cost: 341 CPU-days for ~7 TB of WET (the T5 README): 0.238 MB/s per core."""


def text_mb(inputs: Path) -> float:
    """MB (10^6 bytes, UTF-8) of document text in a cached input folder; counted once, kept in a dot-file."""
    import io

    import zstandard

    cache = inputs / ".text-bytes.json"
    if cache.exists():
        return json.loads(cache.read_text())["text_bytes"] / 1e6
    total = 0
    for f in sorted(inputs.glob("*.jsonl.zst")):
        with zstandard.ZstdDecompressor().stream_reader(open(f, "rb")) as raw:
            for line in io.TextIOWrapper(raw, encoding="utf-8"):
                total += len(json.loads(line)["text"].encode())
    cache.write_text(json.dumps({"text_bytes": total}) + "\n")
    return total / 1e6


def goals(rows: list[dict[str, Any]], grow: list[dict[str, Any]], text_mb_by_size: dict[int, float]) -> list[str]:
    """The issue's goals judged on these rows, and the stage's MB/s per core next to C4's rate. One process
    (the DirectRunner in_memory) is counted as one core."""
    lines = ["", "Goals (issue 15), judged on the rows above:", ""]
    big = next((r for r in rows if r.get("size") == 1_000_000 and "failed" not in r), None)
    if big is None:
        return lines + ["- 1,000,000 documents: not measured in this run, so the goals are not judged."]
    rss = big["peak_rss_tree_mb"]
    lines.append(f"- Peak RSS at 1,000,000 documents at most {GOAL_PEAK_RSS_MB:,} MB (6 GB): "
                 f"**{'MET' if rss <= GOAL_PEAK_RSS_MB else 'NOT MET'}** ({rss:,} MB).")
    g = next((g for g in grow if g["from"] == 100_000 and g["to"] == 1_000_000), None)
    if g is not None:
        k = g["wall_s_exponent"]
        lines.append(f"- Wall-time exponent from 100,000 to 1,000,000 at most {GOAL_WALL_EXPONENT}: "
                     f"**{'MET' if k is not None and k <= GOAL_WALL_EXPONENT else 'NOT MET'}** (k = {k}).")
    for r in rows:
        if r.get("size") in text_mb_by_size and "failed" not in r:
            procs = min(r.get("processes_seen", 1), os.cpu_count() or 1)  # the runner and its workers, at most the cores
            rate = text_mb_by_size[r["size"]] / r["wall_s"] / procs
            lines.append(f"- {r['docs_in']:,} documents: {text_mb_by_size[r['size']]:,.0f} MB of text in {r['wall_s']:,.0f} s "
                         f"on {procs} process(es): **{rate:.3f} MB/s per core**, against C4's {C4_MB_PER_CORE_S:.3f} "
                         "(341 CPU-days for ~7 TB of WET, the T5 README; C4's bytes are WET files, ours document text).")
    return lines


def growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Between consecutive sizes: ratios of time and memory, and the exponent k in t ~ n^k
    (k = log(t2/t1) / log(n2/n1); 1 is linear, 10x docs -> 10x time)."""
    out = []
    rows = [r for r in rows if "failed" not in r]
    for a, b in zip(rows, rows[1:]):
        n = b["docs_in"] / a["docs_in"]
        g = {"from": a["docs_in"], "to": b["docs_in"], "docs_ratio": round(n, 2)}
        for key in ("wall_s", "peak_rss_tree_mb", "peak_rss_largest_mb"):
            r = b[key] / a[key]
            g[f"{key}_ratio"] = round(r, 2)
            g[f"{key}_exponent"] = round(math.log(r) / math.log(n), 2) if n > 1 and r > 0 else None
        # Marginal cost per extra document: start-up (~20 s, ~1 GB of imports and workers) makes
        # small runs look cheap, so k < 1 alone does not show linearity; a constant marginal does.
        extra = b["docs_in"] - a["docs_in"]
        if extra > 0:
            g["marginal_ms_per_doc"] = round(1000 * (b["wall_s"] - a["wall_s"]) / extra, 3)
            g["marginal_rss_tree_kb_per_doc"] = round(1024 * (b["peak_rss_tree_mb"] - a["peak_rss_tree_mb"]) / extra, 1)
            g["marginal_rss_largest_kb_per_doc"] = round(1024 * (b["peak_rss_largest_mb"] - a["peak_rss_largest_mb"]) / extra, 1)
        out.append(g)
    return out


def render(rows: list[dict[str, Any]], grow: list[dict[str, Any]], beam_args: list[str], note: str = "",
           source: str = "samples/crawl cleaned by the stage's pure core", text_mb_by_size: dict[int, float] | None = None) -> str:
    codes = "; ".join(f"{r['size']:,}: {r.get('code') or code_version()}" for r in rows)
    lines = [f"`lmforge corpus` on generated inputs (real pages: {source}; words replaced and lines dropped "
             "per document; 10% planted near-duplicates, 1% exact copies; 16 JSONL.zst files), run as a subprocess with "
             f"the stage's defaults{' plus ' + ' '.join(beam_args) if beam_args else ''}. Peak RSS sampled every 0.2 s "
             f"over the whole process tree (runner + Beam workers) and for the largest single process. Code (git describe) "
             f"of each row: {codes}."
             + (f" {note}" if note else ""), "",
             "| documents in | wall s | docs/s | peak RSS tree MB | peak RSS largest process MB | kept | dropped | duplicates exact / near | quarantined | load 1m before |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['size']:,} | {r['failed']} | | {r['peak_rss_tree_mb']:,} (killed) | {r['peak_rss_largest_mb']:,} | | | | | "
                         f"{r['loadavg_1m_before']} |")
            continue
        d = r["duplicates_by_kind"]
        lines.append(f"| {r['docs_in']:,}{' (' + r['mode'] + ')' if 'mode' in r else ''} | {r['wall_s']:,.1f} | {r['docs_per_s']:,.0f} | {r['peak_rss_tree_mb']:,} | "
                     f"{r['peak_rss_largest_mb']:,} | {r['kept']:,} | {r['dropped']:,} | {d.get('exact', 0):,} / {d.get('near', 0):,} | "
                     f"{r['quarantined']:,} | {r['loadavg_1m_before']} |")
    reused = [r for r in rows if "reused_from" in r]
    if reused:
        lines += ["", "Rows measured by an earlier run and reused here: " + "; ".join(
            f"{r['size']:,} at {r.get('measured_at', 'an unrecorded time')} (code {r.get('code', 'unrecorded')})" for r in reused) + "."]
    for r in rows:
        if "snapshot_wall_s" in r:
            lines += ["", f"{r['docs_in']:,} documents as {len(r['snapshot_wall_s'])} snapshots: wall s per snapshot "
                      f"{', '.join(f'{w:.0f}' for w in r['snapshot_wall_s'])}; peak RSS tree MB per snapshot "
                      f"{', '.join('not recorded' if m is None else f'{m:,}' for m in r['snapshot_peak_rss_tree_mb'])}. Memory is the largest snapshot's, "
                      "time adds up; a snapshot's cost grows slowly with the index it reads (band keys of every kept "
                      "document, hashes of the candidates only)."
                      + (f" Snapshot(s) {', '.join(map(str, r['snapshots_rss_unmeasured']))} finished in an earlier, "
                         "interrupted run of the bench (--resume): their wall time and counts come from their manifests, "
                         "their memory was not recorded, so the peak RSS of this row is that of the other snapshots."
                         if r.get("snapshots_rss_unmeasured") else "")]
    if grow:
        lines += ["", "Growth between sizes (exponent k in cost ~ n^k; k <= 1 is at most linear):", "",
                  "| sizes | docs x | wall x (k) | peak RSS tree x (k) | largest process x (k) | marginal ms/doc | marginal KB/doc tree / largest |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for g in grow:
            lines.append(f"| {g['from']:,} -> {g['to']:,} | {g['docs_ratio']} | {g['wall_s_ratio']} ({g['wall_s_exponent']}) | "
                         f"{g['peak_rss_tree_mb_ratio']} ({g['peak_rss_tree_mb_exponent']}) | "
                         f"{g['peak_rss_largest_mb_ratio']} ({g['peak_rss_largest_mb_exponent']}) | "
                         f"{g.get('marginal_ms_per_doc')} | {g.get('marginal_rss_tree_kb_per_doc')} / {g.get('marginal_rss_largest_kb_per_doc')} |")
    if text_mb_by_size is not None:
        lines += goals(rows, grow, text_mb_by_size)
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> tuple[ScaleBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench scale", __doc__, ScaleBenchConfig, may_be_empty=("incremental_sizes",))
    ap.add_argument("--regenerate", action="store_true", help="rebuild cached inputs even if their description matches")
    ap.add_argument("--keep-outputs", action="store_true", help="keep each run's stage directory under <cache>/runs/")
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    ap.add_argument("--note", default="", help="a sentence added to the report (e.g. what else ran on the machine)")
    ap.add_argument("--resume", action="store_true",
                    help="for sizes run as snapshots: keep the snapshots an earlier, interrupted run already committed "
                         "to the band index and run only the rest (default: start from an empty index)")
    ap.add_argument("--reuse-rows", type=Path, help="JSON lines of rows measured by an earlier run of the same code (its "
                    "<cache>/rows.jsonl or the {\"size\": ...} lines of its log): those sizes are reported, not rerun")
    return parse_bench(ap, ScaleBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    beam_args = argv[argv.index("--") + 1:] if "--" in argv else []
    cfg, a = parse(argv[: argv.index("--")] if "--" in argv else argv)
    cache = Path(cfg.cache)
    if cfg.check_modes:
        return main_modes(cfg, a)
    bases = None
    reused = load_rows(a.reuse_rows, cfg.sizes) if a.reuse_rows else {}
    rows = []
    for n in sorted(cfg.sizes):
        if n in reused:
            print(f"bench scale: {n:,} documents: reusing the row measured at {reused[n].get('measured_at', '?')} "
                  f"from {a.reuse_rows}", flush=True)
            rows.append(reused[n])
            continue
        inputs, meta, bases = _inputs(cfg, n, a.regenerate, bases)
        print(f"bench scale: {n:,} documents ({meta['kinds']}) from {inputs}; running the stage ...", flush=True)
        out = (cache / "runs" / f"n{n}").resolve()
        limit = int(cfg.max_rss_gb * 2**30)
        stats = (run_incremental(inputs, out, beam_args, limit, cfg.snapshot_files, a.resume)
                 if n in cfg.incremental_sizes else run_stage(inputs, out, beam_args, limit))
        row = {"size": n, **stats, "input_mb": round(sum(f.stat().st_size for f in inputs.glob("*.zst")) / MB, 1),
               "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code": code_version()}
        if not a.keep_outputs:
            shutil.rmtree(out, ignore_errors=True)
        print(json.dumps(row), flush=True)
        with open(cache / "rows.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        rows.append(row)
    grow = growth(rows)
    source = (f"the kept documents of {cfg.from_corpus}" if cfg.from_corpus
              else f"{' '.join(cfg.crawl)} cleaned by the stage's pure core")
    sizes_text = {n: text_mb((cache / f"n{n}-s{cfg.seed}").resolve()) for n in cfg.sizes
                  if (cache / f"n{n}-s{cfg.seed}").is_dir()}
    body = render(rows, grow, beam_args, a.note, source, sizes_text)
    from bench.kit.report import write_section

    write_section(Path(a.out), "corpus: scaling with input size", body,
                  {"runs": rows, "growth": grow, "beam_args": beam_args, "code": code_version(), "note": a.note})
    print(body)
    return 0


def _inputs(cfg: ScaleBenchConfig, n: int, regenerate: bool,
            bases: Bases | None = None) -> tuple[Path, dict[str, Any], Bases | None]:
    """The cached generated input of n documents (its folder and description), built first if missing or
    stale; the base documents are read once and passed back for the next size."""
    gen = GenConfig(n_docs=n, seed=cfg.seed)
    inputs = Path(cfg.cache, f"n{n}-s{cfg.seed}").resolve()
    meta = None if regenerate else cached_meta(inputs, gen)
    if meta is None:
        if bases is None:
            print(f"bench scale: base documents from {cfg.from_corpus or ' '.join(cfg.crawl)} ...", flush=True)
            bases = Bases.from_texts(corpus_documents(Path(cfg.from_corpus)) if cfg.from_corpus
                                     else real_documents(cfg.crawl))
        meta = write_inputs(bases, gen, inputs)
    return inputs, meta, bases


def main_modes(cfg: ScaleBenchConfig, a: argparse.Namespace) -> int:
    inputs = _inputs(cfg, cfg.check_size, a.regenerate)[0]
    rows = check_modes(inputs, Path(cfg.cache, "runs", f"modes-n{cfg.check_size}").resolve(), cfg.check_modes,
                       int(cfg.max_rss_gb * 2**30))
    body = (render_modes(rows, cfg.check_size) + f"\nCode (git describe): {code_version()}."
            + (f" {a.note}" if a.note else "") + "\n")
    from bench.kit.report import write_section

    write_section(Path(a.out), "corpus: parallel DirectRunner modes", body,
                  {"runs": rows, "size": cfg.check_size, "code": code_version()})
    print(body)
    return 0
