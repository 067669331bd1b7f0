"""Pure cores of C4 line dedup (linededup.py) and of the band index driver (index.py)."""
from __future__ import annotations

import json

import pytest

from pipelines.corpus.index import IndexMismatch, commit, open_index, snapshot_fingerprint
from pipelines.corpus.linededup import line_keys, losers, owner_order, remove_lines

# Real boilerplate: the legal notice of the Debian installation guide (samples/crawl), repeated on
# two pages whose first lines (written for this test) differ.
FOOTER = "This manual is free software; you may redistribute it and/or modify it under the terms of the GNU General Public License."
PAGE_A = ("The installer communicates with the user through a text interface.\n\n"
          + FOOTER + "\nPlease refer to the license in Appendix F, GNU General Public License.")
PAGE_B = "Debian GNU/Linux can be installed from CD-ROM, DVD, USB stick or from the network.\n\n  " + FOOTER.upper() + "  "


def test_repeated_line_stays_on_exactly_one_page():
    keys = {"a": line_keys(PAGE_A), "b": line_keys(PAGE_B)}
    shared = keys["a"] & keys["b"]
    assert len(shared) == 1  # the footer, despite case and spacing differences
    (key,) = shared
    lose = list(losers(key, ["a", "b"]))
    assert len(lose) == 1
    loser, _ = lose[0]
    owner = min(["a", "b"], key=owner_order)
    assert loser != owner
    text = remove_lines({"a": PAGE_A, "b": PAGE_B}[loser], {key})
    assert FOOTER.lower() not in text.lower() and text.strip() and "\n\n\n" not in text and not text.endswith("\n")


def test_remove_lines_keeps_paragraphs_and_never_doubles_blank_lines():
    text = "First paragraph line.\n\nRemoved line.\n\nThird paragraph."
    (key,) = line_keys("Removed line.")
    assert remove_lines(text, {key}) == "First paragraph line.\n\nThird paragraph."
    assert remove_lines("Removed line.", {key}) == ""


def test_owner_choice_is_deterministic_and_independent_of_order():
    key = b"k"
    assert list(losers(key, ["x", "y", "z"])) == list(losers(key, ["z", "x", "y", "x"]))


PARAMS = {"num_perm": 128, "bands": 16, "rows": 8}


def test_index_plan_commit_and_rerun(tmp_path):
    files = [tmp_path / "a.jsonl"]
    files[0].write_text('{"id": "1", "text": "x"}\n')
    fp = snapshot_fingerprint([str(f) for f in files], {"threshold": 0.8})
    plan = open_index(tmp_path / "idx", PARAMS, fp)
    assert plan.read == [] and plan.write == "gen-00001"
    commit(plan, {"documents": 1})
    data = json.loads((tmp_path / "idx" / "INDEX.json").read_text())
    assert [g["name"] for g in data["generations"]] == ["gen-00001"] and data["params"] == PARAMS
    # the same snapshot again: read what came before it, write nothing
    again = open_index(tmp_path / "idx", PARAMS, fp)
    assert again.read == [] and again.write is None
    # another snapshot (or the same files with another config) reads gen 1 and writes gen 2
    other = open_index(tmp_path / "idx", PARAMS, snapshot_fingerprint([str(f) for f in files], {"threshold": 0.7}))
    assert other.read == ["gen-00001"] and other.write == "gen-00002"


def test_unlisted_generation_is_removed_and_params_must_match(tmp_path):
    plan = open_index(tmp_path, PARAMS, "fp1")
    commit(plan, {})
    (tmp_path / "gen-00002" / "docs").mkdir(parents=True)  # a run killed before its commit
    plan2 = open_index(tmp_path, PARAMS, "fp2")
    assert not (tmp_path / "gen-00002").exists() and plan2.write == "gen-00002"
    with pytest.raises(IndexMismatch, match="bands: index has 16, this run uses 9"):
        open_index(tmp_path, {**PARAMS, "bands": 9}, "fp3")


def test_fingerprint_depends_on_content_not_location(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "x.jsonl").write_text("same bytes\n")
    fa = snapshot_fingerprint([str(tmp_path / "a" / "x.jsonl")], {})
    assert fa == snapshot_fingerprint([str(tmp_path / "b" / "x.jsonl")], {})
    (tmp_path / "b" / "x.jsonl").write_text("other bytes\n")
    assert fa != snapshot_fingerprint([str(tmp_path / "b" / "x.jsonl")], {})
