"""The readers' payload cap (issue 38) on small caps: a record over it is quarantined as
payload_too_large with its size and never read whole; a record of exactly the cap passes (Common
Crawl truncates at 1 MiB, and its truncated records must be read); the reader goes on past it."""
from __future__ import annotations

import gzip
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.corpus import readers
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.readers import Oversized, read_capped, read_file, read_line_capped
from pipelines.corpus.text import flatten_deep_lists, html_to_text, normalize_text
from schemas.records import Quarantined, RawDocument
from tests.unit.test_corpus_core import EN, html, warc_bytes

CAP = 1000


def outcomes(path, **caps) -> list[tuple[str, int, str]]:
    """(kind: doc or the quarantine reason, offset, detail or text length) per record read."""
    out = []
    for r in read_file(str(path), max_record_bytes=CAP, **caps):
        if isinstance(r, Quarantined):
            out.append((r.reason, r.offset, r.detail))
        else:
            out.append(("doc", r.offset, len(r.text if r.text is not None else r.html)))
    return out


def test_read_capped_holds_at_most_cap_plus_one_and_counts_the_rest(monkeypatch):
    assert read_capped(io.BytesIO(b"x" * CAP).read, CAP) == b"x" * CAP  # exactly the cap passes
    asked = []

    def read(n: int) -> bytes:
        asked.append(n)
        return stream.read(n)

    stream = io.BytesIO(b"x" * (CAP * 50 + 7))
    assert read_capped(read, CAP) == Oversized(CAP * 50 + 7)
    assert asked[0] == CAP + 1 and max(asked) <= readers.SKIP_CHUNK
    monkeypatch.setattr(readers, "COUNT_UP_TO", 4 * CAP)  # a bomb: counting stops, the detail says so
    monkeypatch.setattr(readers, "SKIP_CHUNK", CAP)
    got = read_capped(io.BytesIO(b"x" * (CAP * 50)).read, CAP)
    assert got == Oversized(4 * CAP + 1, complete=False)
    assert got.detail("payload", CAP).startswith("payload is at least 4,001 bytes (counting stopped), over")


def test_read_line_capped_skips_to_the_next_line():
    f = io.BytesIO(b"a" * CAP + b"\n" + b"b" * (CAP + 1) + b"\nc\n" + b"d" * (CAP * 3))
    assert read_line_capped(f, CAP) == b"a" * CAP + b"\n"
    assert read_line_capped(f, CAP) == Oversized(CAP + 1)
    assert read_line_capped(f, CAP) == b"c\n"
    assert read_line_capped(f, CAP) == Oversized(CAP * 3)  # the last line, no newline
    assert read_line_capped(f, CAP) == b""


def test_warc_payload_over_the_cap_is_quarantined_with_its_size(tmp_path):
    body = html("x" * (CAP - len(html(""))))  # exactly CAP bytes
    big = html(EN * 20)
    path = tmp_path / "a.warc.gz"
    path.write_bytes(warc_bytes([("https://a.invalid/1", body, "text/html"), ("https://a.invalid/2", big, "text/html"),
                                 ("https://a.invalid/3", html(EN), "text/html")]))
    (doc, _, n1), (reason, offset, detail), (doc3, _, _) = outcomes(path)
    assert (doc, n1, doc3) == ("doc", CAP, "doc")
    assert reason == "payload_too_large" and offset > 0
    assert f"is {len(big):,} bytes, over max_record_bytes=1,000" in detail and "WARC Content-Length" in detail


def test_warc_cap_applies_to_the_decoded_payload(tmp_path):
    """warcio undoes HTTP Content-Encoding: 200 compressed bytes that inflate to 50 kB are over the cap."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    page = html(EN * 100)
    packed = gzip.compress(page)
    assert len(packed) < CAP < len(page)
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], protocol="HTTP/1.1")
    w.write_record(w.create_warc_record("https://a.invalid/z", "response", payload=io.BytesIO(packed), length=len(packed),
                                        http_headers=http))
    (tmp_path / "z.warc.gz").write_bytes(buf.getvalue())
    [(reason, _, detail)] = outcomes(tmp_path / "z.warc.gz")
    assert reason == "payload_too_large" and f"is {len(page):,} bytes" in detail


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_jsonl_line_over_the_cap_is_quarantined_and_reading_goes_on(tmp_path, suffix):
    import zstandard

    fits = json.dumps({"id": "fits", "text": ""})
    fits = json.dumps({"id": "fits", "text": "y" * (CAP - len(fits))})  # a line of exactly CAP bytes
    big = json.dumps({"id": "big", "text": "x" * (CAP * 40)})
    data = "\n".join([fits, big, json.dumps({"id": "after", "text": EN}), big]).encode()  # the last: no newline
    pack = {".jsonl": bytes, ".jsonl.gz": gzip.compress, ".jsonl.zst": zstandard.ZstdCompressor().compress}[suffix]
    (tmp_path / f"a{suffix}").write_bytes(pack(data))
    got = outcomes(tmp_path / f"a{suffix}")
    assert [(k, line) for k, line, _ in got] == [("doc", 1), ("payload_too_large", 2), ("doc", 3), ("payload_too_large", 4)]
    assert got[1][2] == f"line is {len(big):,} bytes, over max_record_bytes=1,000; not read" == got[3][2]


def test_parquet_cell_over_the_cap_is_quarantined_without_becoming_a_str(tmp_path):
    texts = ["a" * CAP, "b" * (CAP + 1), None, EN]
    pq.write_table(pa.table({"id": ["a", "b", "c", "d"], "text": texts}), tmp_path / "a.parquet")
    got = outcomes(tmp_path / "a.parquet")
    assert [(k, row) for k, row, _ in got] == [("doc", 0), ("payload_too_large", 1), ("missing_text", 2), ("doc", 3)]
    assert got[1][2] == "text cell is 1,001 bytes, over max_record_bytes=1,000; not read"
    [q] = [r for r in read_file(str(tmp_path / "a.parquet"), max_record_bytes=CAP) if isinstance(r, Quarantined)
           and r.reason == "payload_too_large"]
    assert q.id == "b"


def test_parquet_row_group_over_the_bound_is_quarantined_unread(tmp_path):
    # Row groups of 4 rows: rows 0-3 small, rows 4-7 hold 4 x 900 = 3,600 bytes of text, over a 3,000-byte bound.
    texts = ["s"] * 4 + [c * 900 for c in "tvwx"] + ["u"] * 2
    pq.write_table(pa.table({"text": texts}), tmp_path / "a.parquet", row_group_size=4, compression="none")
    got = outcomes(tmp_path / "a.parquet", max_row_group_bytes=3000)
    assert [(k, row) for k, row, _ in got] == [("doc", 0), ("doc", 1), ("doc", 2), ("doc", 3),
                                               ("payload_too_large", 4), ("doc", 8), ("doc", 9)]
    assert got[4][2].startswith("row group 1 (rows 4 to 7, 4 rows): its text column is ")
    assert got[4][2].endswith("bytes uncompressed, over max_row_group_bytes=3,000; not read")


def test_the_cap_is_an_option_and_checked():
    cfg = CorpusConfig(input=["x"], output="o")
    assert cfg.max_record_bytes == 4 << 20 == readers.MAX_RECORD_BYTES  # above Common Crawl's 1 MiB truncation
    with pytest.raises(ValueError, match="max_row_group_bytes must be >= max_record_bytes"):
        CorpusConfig(input=["x"], output="o", max_record_bytes=1 << 30)


@pytest.mark.parametrize("unit", ["<ol><li>a", "<li>a<ol>", "<ol><li>a<br>", "<ul><li><p>a</p>", "&nGt;", "<ol<ol<ol"])
def test_extracted_text_stays_bounded_by_the_payload(unit):
    """resiliparse indents nested lists (n deep: n^2 characters); past MAX_LIST_DEPTH the list tags
    go, so 200 kB of nested lists extract to a few times that, and normalised to at most that."""
    page = "<html><body><p>Some text.</p>" + unit * (200_000 // len(unit)) + "</body></html>"
    text = html_to_text(page)
    assert len(text) <= 5 * len(page)
    assert len(normalize_text(text)) <= len(page)


def test_flatten_deep_lists_keeps_shallow_lists_and_all_text():
    shallow = "<ul><li>a<ol><li>b</li></ol></li></ul>"
    assert flatten_deep_lists(shallow) == shallow
    deep = "<ol><li>x" * 10 + "</ol>" * 10
    assert flatten_deep_lists(deep, max_depth=2) == "<ol><li>x" * 2 + "<li>x" * 8 + "</ol>" * 2


def test_read_file_default_cap_passes_a_common_crawl_truncated_record(tmp_path):
    body = html("x" * ((1 << 20) - len(html(""))))  # exactly 1 MiB, as Common Crawl leaves a truncated page
    (tmp_path / "cc.warc.gz").write_bytes(warc_bytes([("https://a.invalid/1", body, "text/html")]))
    [doc] = read_file(str(tmp_path / "cc.warc.gz"))
    assert isinstance(doc, RawDocument) and len(doc.html) == 1 << 20
