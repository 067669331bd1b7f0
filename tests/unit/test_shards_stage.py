"""The shards stage end to end without Beam (`stage.run_local`, the same `write_group` the Beam shell
calls), on a tiny corpus and tokenizers of every family trained inside the test."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipelines.shards.mask_config import MaskConfig
from pipelines.shards.stage import ShardsConfig, run_local
from pipelines.tokenizer import TokenizerConfig, special_ids
from pipelines.tokenizer import run as run_tokenizer
from schemas.manifest import read_manifest, sha256_file
from schemas.shards import SHARD_SCHEMA_VERSION, ShardMeta
from tests.fixtures import make_corpus, vader_texts

# Two pages quote special tokens as text: they must stay text, not become boundaries.
TEXTS = vader_texts("tweets", 160) + vader_texts("movieReviewSnippets", 80) + [
    "Write [SEP] and [CLS] between the sentences, she said.", "In RoBERTa a document ends with </s> and starts with <s>."]
MODELS = {"wordpiece": 400, "byte_bpe": 500, "unigram": 400}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shards_stage")
    corpus = make_corpus(root / "corpus", TEXTS)
    out = {"root": root, "corpus": corpus}
    for model, vocab in MODELS.items():
        out[model] = run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(root / model), model=model,
                                                   vocab_size=vocab, min_frequency=1))
    return out


def shards(world, name: str, model: str = "wordpiece", objective: str = "mlm", **kw) -> Path:
    kw.setdefault("seq_len", 32)
    kw.setdefault("valid_per_mille", 100)
    variants = kw.pop("num_variants", 3)
    cfg = ShardsConfig(corpus=str(world["corpus"]), tokenizer=str(world[model]), output=str(world["root"] / name),
                       mask=MaskConfig(objective=objective, num_variants=variants), **kw)
    return run_local(cfg)


def read_split(out: Path, split: str = "train") -> pa.Table:
    files = read_manifest(out)["extra"]["splits"][split]
    return pa.concat_tables(pa.ipc.open_stream(pa.memory_map(str(out / f))).read_all() for f in files)


def _vocab(tok_dir: Path) -> dict:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tok_dir / "tokenizer.json")).get_vocab()


@pytest.mark.parametrize("model,objective,family", [("wordpiece", "mlm", "bert"), ("byte_bpe", "span", "roberta"),
                                                    ("unigram", "t5_span", "t5"), ("wordpiece", "causal", "bert")])
def test_each_family_frames_documents_with_its_specials(world, model, objective, family):
    out = shards(world, f"frames-{model}-{objective}", model, objective)
    ids = special_ids(_vocab(world[model]))
    extra = read_manifest(out)["extra"]
    assert (extra["family"], extra["objective"], extra["special_ids"]) == (family, objective, ids)
    opens = {ids["cls"]} if family != "t5" and objective != "causal" else set()
    close = ids["eos"] if ids["eos"] is not None else ids["sep"]
    table = read_split(out)
    assert table.num_rows > 10
    for r, row in enumerate(table.to_pylist()):
        tok, length, starts = np.array(row["input_ids"]), row["length"], row["doc_starts"]
        assert (tok[length:] == ids["pad"]).all() and (tok[:length] != ids["pad"]).all()
        # Opening tokens sit exactly at the document starts (none for t5 and causal) ...
        assert sorted(np.flatnonzero(np.isin(tok[:length], list(opens))).tolist()) == (starts if opens else [])
        # ... and every closing token ends a document: the next one starts after it, or the row ends.
        for p in np.flatnonzero(tok[:length] == close).tolist():
            assert p + 1 in starts or p + 1 in (length, len(tok)) or (r == table.num_rows - 1), (r, p, starts)
    # The pages quoting "[SEP]", "</s>" were encoded as text: no extra specials, so the checks above held.


def test_document_packing_starts_every_document_on_a_row(world):
    out = shards(world, "doc-packing", packing="document")
    table = read_split(out)
    starts = table["doc_starts"].to_pylist()
    assert all(s in ([0], []) for s in starts)
    lengths = table["length"].to_numpy()
    # A row without a start continues the previous row's document, which filled that row.
    for r, s in enumerate(starts):
        if not s:
            assert r > 0 and lengths[r - 1] == 32
    assert read_manifest(out)["extra"]["packing"] == "document"


def test_manifest_describes_every_shard(world):
    out = shards(world, "manifest", target_shard_mb=0.01)
    m = read_manifest(out)
    extra, counts = m["extra"], m["counts"]
    assert extra["schema"] == SHARD_SCHEMA_VERSION and extra["num_variants"] == 3 and extra["seq_len"] == 32
    assert extra["tokenizer_sha256"] == sha256_file(world["wordpiece"] / "tokenizer.json")
    assert extra["corpus_manifest_sha256"] == sha256_file(world["corpus"] / "manifest.json")
    assert {i["path"]: i["manifest_sha256"] for i in m["inputs"]}[str(world["corpus"])] == extra["corpus_manifest_sha256"]
    assert m["config"]["mask"]["objective"] == "mlm" and m["config"]["target_shard_mb"] == 0.01
    by_path = {o["path"]: o for o in m["outputs"]}
    assert [s["path"] for s in extra["shards"]] == extra["splits"]["train"] + extra["splits"]["valid"]
    for s in extra["shards"]:
        f = out / s["path"]
        t = pa.ipc.open_stream(pa.memory_map(str(f))).read_all()
        assert (s["rows"], s["tokens"], s["bytes"], s["sha256"]) == (
            t.num_rows, sum(t["length"].to_pylist()), f.stat().st_size, sha256_file(f))
        assert by_path[s["path"]]["sha256"] == s["sha256"] and s["bytes_without_masks"] < s["bytes"]
        assert ShardMeta.from_schema(t.schema).objective == "mlm"
    assert counts["train_rows"] == sum(s["rows"] for s in extra["shards"] if s["split"] == "train")
    assert counts["train_documents"] + counts["valid_documents"] == len(TEXTS)
    assert counts["train_files"] > 2  # 0.01 MiB files: the groups were cut
    per = extra["bytes_per_token"]
    assert per["with_masks"] > per["without_masks"] > 4  # int32 ids and a little framing
    assert (counts["bytes_per_token"], counts["bytes_per_token_without_masks"]) == (per["with_masks"], per["without_masks"])


def test_target_size_cuts_files_without_changing_rows_or_masks(world):
    small = shards(world, "small-files", target_shard_mb=0.01)
    big = shards(world, "big-files")
    shard_list = read_manifest(small)["extra"]["shards"]
    assert all(s["bytes"] <= 0.01 * (1 << 20) for s in shard_list)
    assert any(s["part"] > 0 for s in shard_list) and all(s["part"] == 0 for s in read_manifest(big)["extra"]["shards"])
    for split in ("train", "valid"):
        assert read_split(small, split).equals(read_split(big, split))


def test_same_input_and_seed_give_byte_identical_shards(world):
    a, b = shards(world, "det-a", objective="whole_word"), shards(world, "det-b", objective="whole_word")
    files = [s["path"] for s in read_manifest(a)["extra"]["shards"]]
    assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert read_manifest(a)["outputs"] == read_manifest(b)["outputs"]


def test_whole_word_masks_cover_whole_wordpiece_words(world):
    from tokenizers import Tokenizer

    out = shards(world, "whole-word", objective="whole_word")
    tok = Tokenizer.from_file(str(world["wordpiece"] / "tokenizer.json"))
    cont = np.array([tok.id_to_token(i).startswith("##") for i in range(tok.get_vocab_size())])
    checked = 0
    for row in read_split(out).to_pylist():
        ids, length = np.array(row["input_ids"]), row["length"]
        for pos in row["mask_positions"]:
            masked = np.zeros(len(ids) + 1, bool)
            masked[pos] = True
            for p in pos:  # a masked piece's continuation pieces are masked too, and so is its head
                assert not (p + 1 < length and cont[ids[p + 1]]) or masked[p + 1]
                assert not (cont[ids[p]] and p > 0) or masked[p - 1]
                checked += 1
    assert checked > 100


def test_causal_shards_store_no_variants(world):
    out = shards(world, "causal", objective="causal")
    assert read_manifest(out)["extra"]["num_variants"] == 0
    assert all(v == [] for v in read_split(out)["mask_positions"].to_pylist())


def test_files_open_with_datasets_and_memory_map(world):
    import datasets

    out = shards(world, "hf-open", model="unigram", objective="t5_span")
    f = out / read_manifest(out)["extra"]["splits"]["train"][0]
    ds = datasets.Dataset.from_file(str(f))
    mapped = pa.ipc.open_stream(pa.memory_map(str(f))).read_all()
    assert len(ds) == mapped.num_rows and ds[0]["input_ids"] == mapped["input_ids"][0].as_py()
    assert ShardMeta.from_schema(mapped.schema).max_target_len is not None


@pytest.mark.parametrize("model,objective,message", [("wordpiece", "t5_span", "sentinels"),
                                                     ("unigram", "mlm", "needs a mask token")])
def test_an_objective_the_tokenizer_cannot_serve_is_a_clear_error(world, model, objective, message):
    with pytest.raises(ValueError, match=rf"tokenizer\.json: objective '{objective}' {message}|{message}"):
        shards(world, f"bad-{model}", model, objective)


def test_a_changed_tokenizer_is_refused(world, tmp_path):
    import shutil

    tok = tmp_path / "tok"
    shutil.copytree(world["wordpiece"], tok)
    (tok / "tokenizer.json").write_text((tok / "tokenizer.json").read_text().replace('"[UNK]"', '"[UNK] "', 1))
    cfg = ShardsConfig(corpus=str(world["corpus"]), tokenizer=str(tok), output=str(tmp_path / "o"), seq_len=32)
    with pytest.raises(ValueError, match=r"tokenizer\.json: sha256 .* differs"):
        run_local(cfg)


def test_documents_lost_before_grouping_are_an_error(world):
    from pipelines.shards.stage import check_documents

    n = len(TEXTS)
    check_documents(str(world["corpus"]), {"train_documents": n - 3, "valid_documents": 2, "valid_empty_documents": 1})
    check_documents(str(world["corpus"]), {})  # no counters: nothing to compare
    with pytest.raises(RuntimeError, match=rf"{n} documents in .* but {n - 1} reached the shard groups"):
        check_documents(str(world["corpus"]), {"train_documents": n - 3, "valid_documents": 2})
