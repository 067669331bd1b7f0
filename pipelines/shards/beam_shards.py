"""The shards stage on Apache Beam: corpus Parquet -> split -> encode, pack, mask -> Arrow shards.

Run alone:  lmforge shards --corpus runs/demo/corpus --tokenizer runs/demo/tokenizer --output runs/demo/shards

Documents are assigned to (split, shard) by a hash of their id; each shard is one GroupByKey
group, encoded with the trained tokenizer, packed in id order, masked K times and written as
one Arrow IPC stream file under a temporary name, then renamed. Beam has no Arrow IPC sink;
writing the whole group in one DoFn keeps the file name and row order fixed, so the same
input and seed give byte-identical shards.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics

from pipelines.io import shard_of
from pipelines.shards.masking import MaskConfig, mask_variants
from pipelines.shards.packing import pack
from schemas.manifest import atomic_write_bytes
from schemas.shards import shard_schema


def split_of(doc_id: str, valid_per_mille: int) -> str:
    return "valid" if zlib.crc32(b"split:" + doc_id.encode()) % 1000 < valid_per_mille else "train"


class EncodePackWrite(beam.DoFn):
    def __init__(self, tokenizer_json: str, out: str, seq_len: int, mask: MaskConfig, objective: str):
        self.tokenizer_json, self.out, self.seq_len, self.mask, self.objective = tokenizer_json, out, seq_len, mask, objective

    def setup(self) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(self.tokenizer_json)
        self.tok.no_padding()
        self.tok.no_truncation()
        v = self.tok.get_vocab()
        self.cls, self.sep, self.pad, self.mask_id = v["[CLS]"], v["[SEP]"], v["[PAD]"], v["[MASK]"]
        self.special = np.array(sorted(self.tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")), np.int32)
        self.vocab_size = self.tok.get_vocab_size()

    def process(self, item: tuple[tuple[str, int], Iterable[dict[str, Any]]]) -> Iterable[dict[str, Any]]:
        (split, shard), docs = item
        docs = sorted(docs, key=lambda d: d["id"])
        encs = self.tok.encode_batch([d["text"] for d in docs], add_special_tokens=False)
        cols: dict[str, list] = {"input_ids": [], "length": [], "doc_starts": [], "mask_positions": [], "mask_tokens": []}
        tokens = 0
        for i, row in enumerate(pack((e.ids for e in encs), self.seq_len, self.cls, self.sep, self.pad)):
            ids = np.asarray(row.input_ids, np.int32)
            pos, rep = mask_variants(ids, row.length, self.special, self.vocab_size, self.mask_id, self.mask,
                                     shard + (0 if split == "train" else 1_000_000), i)
            cols["input_ids"].append(ids)
            cols["length"].append(row.length)
            cols["doc_starts"].append(row.doc_starts)
            cols["mask_positions"].append(pos)
            cols["mask_tokens"].append(rep)
            tokens += row.length
        schema = shard_schema(self.seq_len, self.mask.num_variants, self.objective)
        table = pa.Table.from_pydict(cols, schema=schema)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_table(table, max_chunksize=1024)
        rel = f"{split}/shard-{shard:05d}.arrow"
        atomic_write_bytes(Path(self.out, rel), sink.getvalue().to_pybytes())
        Metrics.counter("shards", f"{split}_rows").inc(table.num_rows)
        Metrics.counter("shards", f"{split}_docs").inc(len(docs))
        yield {"path": rel, "split": split, "rows": table.num_rows, "tokens": tokens, "documents": len(docs)}


class ShardsPipeline(beam.PTransform):
    def __init__(self, corpus_glob: str, tokenizer_json: str, out: str, seq_len: int, mask: MaskConfig,
                 num_shards: int, valid_per_mille: int, objective: str = "mlm"):
        super().__init__()
        self.args = (corpus_glob, tokenizer_json, out, seq_len, mask, num_shards, valid_per_mille, objective)

    def expand(self, pbegin):
        corpus_glob, tokenizer_json, out, seq_len, mask, num_shards, valid_per_mille, objective = self.args
        return (pbegin
                | "ReadCorpus" >> beam.io.ReadFromParquet(corpus_glob, columns=["id", "text"])
                | "KeyBySplitShard" >> beam.Map(lambda d: ((s := split_of(d["id"], valid_per_mille),
                                                             shard_of(d["id"], num_shards if s == "train" else 1)), d))
                | "GroupShards" >> beam.GroupByKey()
                | "EncodePackWrite" >> beam.ParDo(EncodePackWrite(tokenizer_json, out, seq_len, mask, objective)))
