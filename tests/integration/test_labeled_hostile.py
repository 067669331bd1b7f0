"""Hostile labelled files keep `lmforge labeled file` in bounded memory (issue 50; the form can name any file under
the data root). The four files of the issue, each with 200 real VADER rows beside the bomb where the bomb is a row:
- a .jsonl.gz whose one line is 1 GiB (1 MB compressed): left out as row_too_large with its size, the rest prepared;
- a Parquet file whose one cell is 512 MiB (a few KB compressed): stopped with one line naming the row group;
- a CSV whose one field is 300 MB: stopped with one line naming the line;
- a JSON line nested 100,000 deep: left out as too_deep, the rest prepared.
Each is built here by streaming (the Parquet cell once in memory, 512 MiB, in this process).

Peak RSS of `lmforge labeled file` (ru_maxrss) on a 2-core AMD EPYC, 2026-11-28: before the caps (the issue's
figures) 5.4 GB, 3.8 GB and 2.2 GB for the first three, and a RecursionError traceback for the fourth; with the caps
73, 76, 72 and 67 MB (the test prints them and asserts each under 1 GiB), the four in about 20 s.
"""
from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.integration.test_corpus_hostile_inputs import PEAK_OF
from tests.unit.test_finetune_data import vader_rows

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30
CHUNK = 1 << 20


def labeled_file(path: Path, out: Path) -> tuple[int, str, int]:
    """`lmforge labeled file PATH` in its own process: (exit status, stderr, peak RSS in bytes)."""
    cmd = [sys.executable, "-c", PEAK_OF, sys.executable, "-m", "lmforge.cli", "labeled", "file", str(path),
           "--output", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    return p.returncode, p.stderr, int(p.stdout.strip().splitlines()[-1]) * 1024


def good_lines() -> list[bytes]:
    return [json.dumps({"text": r["text"], "label": r["label"]}).encode() + b"\n" for r in vader_rows(200)]


def jsonl_gz_bomb(path: Path) -> None:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as f:
        f.write(z.compress(b"".join(good_lines()[:100])))
        f.write(z.compress(b'{"label": "positive", "text": "'))
        block = b"a" * CHUNK
        for _ in range(GiB // CHUNK):
            f.write(z.compress(block))
        f.write(z.compress(b'"}\n' + b"".join(good_lines()[100:])) + z.flush())


def parquet_bomb(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = vader_rows(200)
    cell = pa.py_buffer(b"a" * (512 << 20))
    big = pa.StringArray.from_buffers(1, pa.py_buffer(pa.array([0, len(cell)], pa.int32()).buffers()[1]), cell)
    table = pa.table({"text": pa.concat_arrays([pa.array([r["text"] for r in rows]), big]),
                      "label": [r["label"] for r in rows] + ["positive"]})
    pq.write_table(table, path, compression="zstd")


def csv_bomb(path: Path) -> None:
    with path.open("wb") as f:
        f.write(b"text,label\n")
        f.write(b"".join(f'"{r["text"].replace(chr(34), chr(34) * 2)}",{r["label"]}\n'.encode() for r in vader_rows(100)))
        f.write(b'"')
        block = b"a" * CHUNK
        for _ in range(300):
            f.write(block)
        f.write(b'",positive\n')


def deep_bomb(path: Path) -> None:
    path.write_bytes(b"".join(good_lines()) + b'{"label": "positive", "text": "x", "more": ' + b"[" * 100_000 + b"]" * 100_000
                     + b"}\n")


@pytest.mark.slow
def test_labeled_bombs_cost_bounded_memory_and_one_line_or_a_counted_row(tmp_path):
    from schemas.manifest import read_manifest

    builds = {"rows.jsonl.gz": jsonl_gz_bomb, "cell.parquet": parquet_bomb, "field.csv": csv_bomb,
              "deep.jsonl": deep_bomb}
    peaks = {}
    for name, build in builds.items():
        build(tmp_path / name)
        rc, err, peaks[name] = labeled_file(tmp_path / name, tmp_path / "out" / name)
        lines = [line for line in err.splitlines() if line.strip()]
        if name in ("rows.jsonl.gz", "deep.jsonl"):
            assert rc == 0, err[-3000:]
            m = read_manifest(tmp_path / "out" / name)
            reason = "row_too_large" if name == "rows.jsonl.gz" else "too_deep"
            assert m["counts"][f"left_out_{reason}"] == 1, m["counts"]
            assert [x["reason"] for x in m["extra"]["left_out"]] == [reason], m["extra"]["left_out"]
            if name == "rows.jsonl.gz":  # the line's size, counted through the inflating: 1 GiB and its JSON
                assert m["extra"]["left_out"][0]["detail"].startswith(f"the line is {GiB + 33:,} bytes")
        else:
            assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
            assert lines[0].startswith(f"lmforge labeled: error: {tmp_path / name}")
            assert ("row group 0" in lines[0]) if name == "cell.parquet" else (f"{name}:102: the row is" in lines[0])
    print("peak RSS (MB):", {k: round(v / 1e6) for k, v in peaks.items()})
    assert all(v < GiB for v in peaks.values()), peaks
