"""Staged documents (pipelines/corpus/staging.py): one row group per shard, read back by shard, same bytes every time."""
from __future__ import annotations

import pyarrow.parquet as pq

from pipelines.corpus.staging import read_staged, staged_name, staging_dir, write_staged
from pipelines.io import shard_of


def _rows(n: int = 12, shards: int = 3) -> list[dict]:
    return [{"id": f"doc-{i}", "url": f"https://a.invalid/{i}", "text": f"page {i} text", "language": "en" if i % 2 else "ru",
             "language_score": 0.5 + i / 100, "source": "in/a.warc.gz", "offset": 1000 - i * 10,
             "hashes": list(range(i, i + 3)), "shard": shard_of(f"doc-{i}", shards)} for i in range(n)]


def test_row_group_per_shard_read_back_by_shard(tmp_path):
    out = str(tmp_path)
    rows = _rows()
    name = staged_name("in/a.warc.gz", 7)
    assert name.endswith("-000007.parquet") and "/" not in name
    write_staged(out, name, rows)
    pf = pq.ParquetFile(f"{staging_dir(out)}/{name}")
    assert pf.num_row_groups == len({r["shard"] for r in rows})
    for s in range(3):
        got = list(read_staged(out, name, [s]))
        assert sorted(r["id"] for r in got) == sorted(r["id"] for r in rows if r["shard"] == s)
        assert all(r["hashes"] == list(range(int(r["id"][4:]), int(r["id"][4:]) + 3)) for r in got)
    assert list(read_staged(out, name, [5])) == []  # a shard with no rows in this batch
    assert len(list(read_staged(out, name))) == len(rows)
    assert set(next(read_staged(out, name, [0], columns=["id", "offset"]))) == {"id", "offset"}


def test_same_batch_same_bytes(tmp_path):
    """A retried bundle rewrites its batch's file with the same bytes (whatever the order it saw)."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    write_staged(a, "x.parquet", _rows())
    write_staged(b, "x.parquet", list(reversed(_rows())))
    assert (tmp_path / "a/_staging/x.parquet").read_bytes() == (tmp_path / "b/_staging/x.parquet").read_bytes()


def test_staged_rows_finds_each_ref_once_and_refuses_a_missing_one(tmp_path):
    import pytest

    from pipelines.corpus.staging import staged_rows

    out, rows = str(tmp_path), _rows()
    write_staged(out, "b.parquet", rows)
    shard = rows[0]["shard"]
    mine = [r for r in rows if r["shard"] == shard]
    refs = [{"id": r["id"], "source": r["source"], "offset": r["offset"], "staged": "b.parquet", "tag": i} for i, r in enumerate(mine)]
    got = list(staged_rows(out, refs, shard, ["text"]))
    assert [(ref["tag"], row["text"]) for ref, row in sorted(got, key=lambda p: p[0]["tag"])] == [(i, r["text"]) for i, r in enumerate(mine)]
    wrong_id = [{**refs[0], "id": "someone-else"}]
    with pytest.raises(RuntimeError, match="not found in their staged file b.parquet"):
        list(staged_rows(out, wrong_id, shard, ["text"]))
