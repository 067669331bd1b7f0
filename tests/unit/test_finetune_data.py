"""Labelled data for `lmforge finetune`: every reader, the split rules, labels, and each bad input."""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from training.finetuning.dataset import Columns, bucket, cap, load_task
from training.finetuning.readers import Bad, DataError, Record, read_file

VADER = Path(__file__).resolve().parents[2] / "samples" / "labeled" / "vader"


def vader_rows(n: int = 120) -> list[dict]:
    """Real sentences with a 3-class label from VADER's human scores."""
    out = []
    for line in (VADER / "tweets_GroundTruth.txt").read_text().splitlines()[:n]:
        i, score, text = line.split("\t", 2)
        s = float(score)
        out.append({"id": f"t{i}", "text": text, "score": s,
                    "label": "positive" if s >= 0.5 else "negative" if s <= -0.5 else "neutral"})
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path: Path, rows: list[dict], delimiter: str = ",") -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delimiter,
                           quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL, escapechar="\\")
        w.writeheader()
        w.writerows(rows)
    return path


def test_jsonl_with_split_column_and_aliases(tmp_path):
    rows = vader_rows()
    for k, r in enumerate(rows):
        r["split"] = ["train", "train", "train", "dev", "test"][k % 5]
    data = load_task("classification", data=[str(write_jsonl(tmp_path / "d.jsonl", rows))])
    assert len(data.train) == 72 and len(data.validation) == 24 and len(data.test) == 24
    assert data.labels == sorted({r["label"] for r in rows})
    assert data.splits_from["validation"].startswith("column 'split'")
    assert data.train[0].where.endswith("d.jsonl:1") and data.train[0].uid == "t1"


def test_hash_split_is_stable_and_holds_out_validation(tmp_path):
    rows = vader_rows(400)
    a = load_task("classification", data=[str(write_jsonl(tmp_path / "a.jsonl", rows))])
    b = load_task("classification", data=[str(write_jsonl(tmp_path / "b.jsonl", rows[::-1]))])
    for split in ("train", "validation", "test"):
        assert {e.uid for e in a.split(split)} == {e.uid for e in b.split(split)}
    assert not {e.uid for e in a.train} & {e.uid for e in a.test}
    assert 20 < len(a.test) < 65 and 15 < len(a.validation) < 60  # 10%, then 10% of the rest
    assert a.splits_from["validation"].startswith("held out from train")
    assert all(bucket(e.uid, "test") < 100 for e in a.test)


def test_validation_held_out_from_train_takes_each_class_its_share(tmp_path):
    """A rare class is in the rows that pick the checkpoint: 10% of each class of train, not 10% by luck."""
    rows = vader_rows(600)
    for r in rows:
        r["split"] = "test" if int(r["id"][1:]) % 7 == 0 else "train"
    train = [r for r in rows if r["split"] == "train"]
    rare = [r["id"] for r in train if r["label"] == "negative"][:20]
    for r in train:
        if r["label"] == "negative" and r["id"] not in rare:
            r["label"] = "neutral"
    data = load_task("classification", data=[str(write_jsonl(tmp_path / "d.jsonl", rows))])
    per_class = Counter(e.label for e in data.train + data.validation)
    held = Counter(e.label for e in data.validation)
    assert per_class["negative"] == 20 and held["negative"] == 2
    assert all(held[c] == round(n / 10) for c, n in per_class.items())
    assert data.splits_from["validation"] == "held out from train: 10% of each class by a hash of the id"
    assert not {e.uid for e in data.validation} & {e.uid for e in data.train}


def test_identical_texts_without_ids_share_a_split(tmp_path):
    rows = [{"text": r["text"], "label": r["label"]} for r in vader_rows(200)] * 2
    data = load_task("classification", data=[str(write_jsonl(tmp_path / "d.jsonl", rows))])
    test_texts = {e.text for e in data.test}
    assert test_texts and not test_texts & {e.text for e in data.train}


def test_named_files_csv_tsv_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = vader_rows(90)
    train = write_csv(tmp_path / "train.csv", rows[:60])
    val = write_csv(tmp_path / "val.tsv", [{k: v for k, v in r.items()} for r in rows[60:75]], "\t")
    test = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows[75:]), test)
    data = load_task("classification", train=[str(train)], validation=[str(val)], test=[str(test)])
    assert (len(data.train), len(data.validation), len(data.test)) == (60, 15, 15)
    assert data.test[0].where.endswith("test.parquet:row 1")
    assert data.splits_from == {"train": f"file {train}", "validation": f"file {val}", "test": f"file {test}"}
    # regression on the same files: the score column
    reg = load_task("regression", Columns(label="score"), train=[str(train)], validation=[str(val)], test=[str(test)])
    assert reg.labels is None and isinstance(reg.train[0].label, float)


def test_datasets_dict_directory_keeps_its_splits(tmp_path):
    import datasets

    rows = vader_rows(60)
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:40]),
                               "validation": datasets.Dataset.from_list(rows[40:50]),
                               "test": datasets.Dataset.from_list(rows[50:])})
    dd.save_to_disk(str(tmp_path / "dd"))
    data = load_task("classification", data=[str(tmp_path / "dd")])
    assert (len(data.train), len(data.validation), len(data.test)) == (40, 10, 10)


def test_pairs_and_integer_labels_keep_numeric_order(tmp_path):
    rows = [{"a": r["text"], "b": r["text"][::-1], "y": k % 11} for k, r in enumerate(vader_rows(220))]
    data = load_task("classification", Columns(text="a", text_pair="b", label="y"),
                     data=[str(write_jsonl(tmp_path / "p.jsonl", rows))])
    assert data.labels == [str(i) for i in range(11)]  # 0, 1, ..., 10, not 0, 1, 10, 2
    assert data.train[0].text_pair == data.train[0].text[::-1]


def test_conll_and_conllu_and_jsonl_tokens(tmp_path):
    conll = tmp_path / "a.conll"
    conll.write_text("-DOCSTART- -X- O O\n\nEU\tB-ORG\nrejects\tO\nGerman\tB-MISC\n\nPeter\tB-PER\nBlackburn\tI-PER\n")
    recs = list(read_file(conll, conll=True))
    assert [r.values for r in recs] == [{"tokens": ["EU", "rejects", "German"], "tags": ["B-ORG", "O", "B-MISC"]},
                                        {"tokens": ["Peter", "Blackburn"], "tags": ["B-PER", "I-PER"]}]
    assert recs[0].where.endswith("a.conll:3") and recs[1].where.endswith("a.conll:7")
    conllu = tmp_path / "b.conllu"
    conllu.write_text("# text = Don't go.\n1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
                      "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
                      "3.1\tgone\t_\t_\t_\t_\t_\t_\t_\t_\n4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n\n")
    (rec,) = read_file(conllu, conll=True)
    assert rec.values == {"tokens": ["Do", "n't", "go", "."], "tags": ["AUX", "PART", "VERB", "PUNCT"]}
    rows = [{"tokens": ["Peter", "runs"], "tags": ["B-PER", "O"], "split": s} for s in ("train", "validation", "test")]
    data = load_task("tokens", data=[str(write_jsonl(tmp_path / "t.jsonl", rows))])
    assert data.labels == ["B-PER", "O"] and data.is_bio


# ---- bad input -------------------------------------------------------------------------------


def test_missing_column_names_file_line_and_column(tmp_path):
    f = write_csv(tmp_path / "d.csv", [{"sentence": r["text"], "label": r["label"]} for r in vader_rows(20)])
    with pytest.raises(DataError, match=r"d\.csv:2: no column 'text' \(columns: sentence, label\)"):
        load_task("classification", data=[str(f)])


def test_empty_text_and_malformed_rows_are_left_out_and_counted(tmp_path):
    rows = vader_rows(200)
    rows[3]["text"] = "   "
    f = write_csv(tmp_path / "d.csv", rows)
    lines = f.read_text().splitlines(keepends=True)
    lines[10] = "only,three,fields\n"  # a malformed CSV row
    f.write_text("".join(lines))
    data = load_task("classification", data=[str(f)])
    assert data.counts["left_out_empty_text"] == 1 and data.counts["left_out_malformed_row"] == 1
    assert sum(len(data.split(s)) for s in ("train", "validation", "test")) == 198
    assert {x["where"] for x in data.left_out} == {f"{f}:5", f"{f}:11"}


def test_non_utf8_lines_are_left_out(tmp_path):
    rows = vader_rows(100)
    f = write_jsonl(tmp_path / "d.jsonl", rows)
    raw = f.read_bytes().split(b"\n")
    raw[7] = raw[7].replace(b"a", b"\xe9", 1)  # Latin-1 e-acute inside a JSON string
    f.write_bytes(b"\n".join(raw))
    data = load_task("classification", data=[str(f)])
    assert data.counts["left_out_not_utf8"] == 1 and data.left_out[0]["where"] == f"{f}:8"
    c = write_csv(tmp_path / "d.csv", rows)
    c.write_bytes(c.read_bytes().replace(rows[5]["text"][:12].encode(), rows[5]["text"][:11].encode() + b"\xff", 1))
    data = load_task("classification", data=[str(c)])
    assert data.counts["left_out_not_utf8"] == 1 and "column 'text'" in data.left_out[0]["detail"]


def test_label_unseen_in_train_is_an_error(tmp_path):
    rows = vader_rows(60)
    train = write_jsonl(tmp_path / "train.jsonl", [r for r in rows if r["label"] != "neutral"])
    test = write_jsonl(tmp_path / "test.jsonl", rows)
    first_neutral = next(i for i, r in enumerate(rows, 1) if r["label"] == "neutral")
    with pytest.raises(DataError, match=rf"test\.jsonl:{first_neutral}: label 'neutral' in column 'label' of the "
                                        r"(validation|test) split never occurs in train"):
        load_task("classification", train=[str(train)], test=[str(test)])


def test_one_class_is_an_error(tmp_path):
    rows = [dict(r, label="positive") for r in vader_rows(50)]
    with pytest.raises(DataError, match="one class .'positive', .* at least two"):
        load_task("classification", data=[str(write_jsonl(tmp_path / "d.jsonl", rows))])


def test_too_many_bad_rows_stop_the_run(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" if k % 3 else "{not json\n" for k, r in enumerate(vader_rows(60))))
    with pytest.raises(DataError, match=r"20 of 60 rows cannot be used .*bad_json"):
        load_task("classification", data=[str(f)])


def test_float_class_label_and_unknown_format_and_bad_split(tmp_path):
    with pytest.raises(DataError, match="is not a class; for a numeric target use --task regression"):
        load_task("classification", data=[str(write_jsonl(tmp_path / "a.jsonl", vader_rows(20)))],
                  cols=Columns(label="score"))
    (tmp_path / "x.xlsx").write_bytes(b"PK")
    with pytest.raises(DataError, match=r"x\.xlsx: unknown format '\.xlsx'"):
        load_task("classification", data=[str(tmp_path / "x.xlsx")])
    rows = [dict(r, split="holdout") for r in vader_rows(5)]
    with pytest.raises(DataError, match=r"b\.jsonl:1: column 'split' holds 'holdout'"):
        load_task("classification", data=[str(write_jsonl(tmp_path / "b.jsonl", rows))])


def test_readers_yield_bad_for_single_rows(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_bytes(b'{"text": "ok", "label": 1}\n[1, 2]\n{"text": \n\n')
    got = list(read_file(f))
    assert isinstance(got[0], Record) and isinstance(got[1], Bad) and got[1].reason == "not_an_object"
    assert got[2].reason == "bad_json" and got[2].where.endswith(":3") and len(got) == 3


def test_cap_is_deterministic_and_keeps_order(tmp_path):
    data = load_task("classification", data=[str(write_jsonl(tmp_path / "d.jsonl", vader_rows(300)))])
    a, b = cap(data.train, 50), cap(list(reversed(data.train)), 50)
    assert len(a) == 50 and {e.uid for e in a} == {e.uid for e in b}
    assert [e.uid for e in a] == [e.uid for e in data.train if e.uid in {x.uid for x in a}]
