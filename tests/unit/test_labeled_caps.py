"""The labelled-file readers' caps (issue 50) on small caps: a row over the cap is left out as row_too_large with
its size (a CSV one, or a Parquet row group over its bound, stops the file with one line naming it), JSON nested
too deep is left out as too_deep, a row of exactly the cap passes, and the reader goes on past what it leaves out."""
from __future__ import annotations

import csv
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.test_finetune_data import vader_rows, write_csv
from training.finetuning import readers
from training.finetuning.readers import Bad, DataError, Record, depth_over, read_file

CAP = 1000


def kinds(path, **kw) -> list[tuple[str, str]]:
    """(Record's text or the Bad's reason, where) per row read."""
    out = []
    for r in read_file(path, max_record_bytes=CAP, **kw):
        out.append((r.reason, r.where) if isinstance(r, Bad) else (r.values.get("text", r.values.get("tokens")), r.where))
    return out


def exact_line(extra: dict, size: int) -> bytes:
    """A JSON line of `size` bytes before its newline."""
    base = json.dumps({**extra, "text": ""})
    return json.dumps({**extra, "text": "x" * (size - len(base))}).encode() + b"\n"


def test_a_jsonl_line_over_the_cap_is_left_out_with_its_size_and_one_of_the_cap_passes(tmp_path):
    f = tmp_path / "d.jsonl.gz"
    with gzip.open(f, "wb") as g:
        g.write(exact_line({"label": 1}, CAP))
        g.write(exact_line({"label": 2}, CAP + 1))
        g.write(b'{"text": "after", "label": 3}\n')
    got = list(read_file(f, max_record_bytes=CAP))
    assert isinstance(got[0], Record) and len(got[0].values["text"]) > 900
    assert got[1].reason == "row_too_large" and got[1].where == f"{f}:2"
    assert got[1].detail.startswith(f"the line is {CAP + 1:,} bytes, over the {CAP:,}-byte cap")  # its newline not counted
    assert isinstance(got[2], Record) and got[2].values["text"] == "after" and len(got) == 3


def test_json_nested_past_the_depth_cap_or_the_parser_is_left_out(tmp_path):
    f = tmp_path / "d.jsonl"
    deep = lambda n: "[" * n + "]" * n  # noqa: E731
    f.write_text(f'{{"text": "a", "x": {deep(100_000)}}}\n'
                 f'{{"text": "b", "x": {deep(readers.MAX_DEPTH)}}}\n'
                 f'{{"text": "c", "x": {deep(readers.MAX_DEPTH - 1)}}}\n')
    got = list(read_file(f, max_record_bytes=10**6))
    assert [g.reason if isinstance(g, Bad) else g.values["text"] for g in got] == ["too_deep", "too_deep", "c"]
    assert "Python's parser" in got[0].detail and f"{readers.MAX_DEPTH} levels" in got[1].detail
    assert depth_over({"a": [[1]]}, 2) and not depth_over({"a": [[1]]}, 3) and not depth_over({"a": 1}, 1)


def test_a_csv_is_streamed_and_a_row_over_the_cap_stops_it_with_one_line(tmp_path):
    rows = vader_rows(5)
    ok = write_csv(tmp_path / "ok.csv", rows)
    assert [t for t, _ in kinds(ok)] == [r["text"] for r in rows]
    big = tmp_path / "big.csv"
    big.write_text("text,label\nfine,1\n\"" + "x" * 300 + "\n" + "y" * 800 + "\",2\nnever,3\n")
    it = read_file(big, max_record_bytes=CAP)
    assert next(it).values["text"] == "fine"
    with pytest.raises(DataError, match=r"big\.csv:4: the row is 1,105 bytes, over the 1,000-byte cap") as e:
        next(it)
    assert "\n" not in str(e.value)
    # a field the csv module's default limit (128 KiB) would stop passes under a larger cap
    wide = write_csv(tmp_path / "wide.csv", [{"text": "z" * 200_000, "label": 1}])
    assert len(next(read_file(wide)).values["text"]) == 200_000
    assert csv.field_size_limit() >= readers.MAX_RECORD_BYTES


def test_csv_keeps_its_byte_order_mark_and_not_utf8_handling(tmp_path):
    f = tmp_path / "bom.csv"
    f.write_bytes(b"\xef\xbb\xbftext,label\r\nok,1\r\nbad \xff,2\r\n\"two\r\nlines\",3\r\n")
    got = list(read_file(f))
    assert got[0].values == {"text": "ok", "label": "1"} and got[0].where == f"{f}:2"
    assert got[1].reason == "not_utf8" and got[1].where == f"{f}:3"
    assert got[2].values["text"] == "two\r\nlines" and got[2].where == f"{f}:4"


def test_a_parquet_row_over_the_cap_is_left_out_and_a_row_group_over_its_bound_stops_the_file(tmp_path):
    f = tmp_path / "d.parquet"
    table = pa.table({"text": ["a", "x" * (CAP + 1), "b", None], "label": [1, 2, 3, 4],
                      "tokens": [["p"], ["q"], ["r" * CAP], []]})
    pq.write_table(table, f, row_group_size=2)
    got = kinds(f)
    assert got == [("a", f"{f}:row 1"), ("row_too_large", f"{f}:row 2"), ("row_too_large", f"{f}:row 3"),
                   (None, f"{f}:row 4")]
    g = tmp_path / "g.parquet"
    pq.write_table(pa.table({"text": ["a", "b", "c", "d" * 3000], "label": [1, 2, 3, 4]}), g, row_group_size=2)
    it = read_file(g, max_row_group_bytes=2000)
    assert [next(it).values["text"] for _ in range(2)] == ["a", "b"]
    with pytest.raises(DataError, match=r"g\.parquet: row group 1 \(rows 3 to 4\) is [0-9,]+ bytes uncompressed, over "
                                        r"the 2,000 lmforge decodes at once; rewrite"):
        next(it)


def test_a_datasets_folder_row_over_the_cap_is_left_out(tmp_path):
    import datasets

    d = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a", "x" * (CAP + 5)], "label": [0, 1]}),
                              "test": datasets.Dataset.from_dict({"text": ["c"], "label": [1]})})
    d.save_to_disk(str(tmp_path / "ds"))
    got = list(read_file(tmp_path / "ds", max_record_bytes=CAP))
    assert [(g.reason if isinstance(g, Bad) else g.values["text"], g.where) for g in got] == [
        ("a", f"{tmp_path / 'ds'}/train:row 1"), ("row_too_large", f"{tmp_path / 'ds'}/train:row 2"),
        ("c", f"{tmp_path / 'ds'}/test:row 1")]
    assert got[0].split == "train" and got[2].split == "test"


def test_a_conll_sentence_over_the_cap_is_left_out_and_the_next_is_read(tmp_path):
    f = tmp_path / "d.conll"
    long_ = "".join(f"w{i}\tNN\n" for i in range(300))  # about 2,700 bytes: over the cap
    f.write_text("The\tDT\ncat\tNN\n\n" + long_ + "\n" + "x" * 5000 + "\tNN\n\nA\tDT\ndog\tNN\n")
    got = list(read_file(f, conll=True, max_record_bytes=CAP))
    assert isinstance(got[0], Record) and got[0].values["tokens"] == ["The", "cat"]
    assert got[1].reason == "row_too_large" and got[1].where == f"{f}:4" and "the sentence is at least" in got[1].detail
    assert got[2].reason == "row_too_large" and got[2].where == f"{f}:305"
    assert got[3].values == {"tokens": ["A", "dog"], "tags": ["DT", "NN"]} and len(got) == 4


def test_a_cut_gzip_stream_is_one_line_naming_the_line(tmp_path):
    f = tmp_path / "d.jsonl.gz"
    whole = gzip.compress(b"".join(json.dumps({"text": f"row {i}", "label": i % 2}).encode() + b"\n" for i in range(2000)))
    f.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"d\.jsonl\.gz:[0-9]+: cannot read on \(EOFError"):
        list(read_file(f))
