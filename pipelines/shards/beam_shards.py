"""The shards stage on Apache Beam: corpus Parquet -> split -> encode, pack, mask -> Arrow shards.

Run alone:

    lmforge shards --corpus runs/demo/corpus --tokenizer runs/demo/tokenizer --output runs/demo/shards \\
        [--mask-objective mlm|whole_word|span|t5_span|causal] [--packing concat|document] [--target-shard-mb 4]

Documents are assigned to (split, shard) by a hash of their id, a Parquet batch at a time (the
shuffle moves zstd-compressed Arrow streams, not one Python object per document); each shard is
one GroupByKey group, encoded with the trained tokenizer (any family the tokenizer stage writes), packed in id
order between the family's special tokens, masked K times for the objective, and written as
consecutive Arrow IPC stream files of at most the target size (`train/shard-00003-000.arrow`,
`-001`, ...), each under a temporary name and then renamed. Beam has no Arrow IPC sink; writing
the whole group in one DoFn keeps file names and row order fixed, so the same input and seed
give byte-identical shards. The pure work is in `packing`, `rows` and `write`.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines.shards.mask_config import MaskConfig
from pipelines.shards.rows import key_batch, sample_batch


class EncodePackWrite(beam.DoFn):
    """One (split, shard) group of documents -> its shard files (`rows.write_group`); yields one record per file."""

    def __init__(self, tokenizer_json: str, out: str, seq_len: int, mask: MaskConfig, packing: str = "concat",
                 target_bytes: int = 4 << 20, fast_encode: bool = True):
        self.tokenizer_json, self.out, self.seq_len, self.mask = tokenizer_json, out, seq_len, mask
        self.packing, self.target_bytes, self.fast_encode = packing, target_bytes, fast_encode

    def setup(self) -> None:
        from pipelines.shards.rows import DocEncoder, load_tokenizer, shard_setup

        tok = load_tokenizer(self.tokenizer_json)
        self.enc = DocEncoder(tok, self.fast_encode)  # one word cache per worker, across its groups
        self.spec, self.vocab = shard_setup(tok, self.seq_len, self.mask, self.packing)

    def process(self, item: tuple[tuple[str, int], Iterable[Any]]) -> Iterable[dict[str, Any]]:
        from pipelines.shards.rows import write_group

        (split, shard), docs = item
        files, counts = write_group(self.out, split, shard, docs, self.enc, self.spec, self.vocab, self.mask,
                                    self.target_bytes)
        for name, n in counts.items():
            Metrics.counter("shards", f"{split}_{name}").inc(n)
        yield from files


class ShardsPipeline(beam.PTransform):
    def __init__(self, corpus_glob: str, tokenizer_json: str, out: str, seq_len: int, mask: MaskConfig,
                 num_shards: int, valid_per_mille: int, packing: str = "concat", target_bytes: int = 4 << 20,
                 fast_encode: bool = True, replay_files: list[str] = (), replay_fraction: float = 0.0):
        super().__init__()
        self.corpus_glob, self.num_shards, self.valid_per_mille = corpus_glob, num_shards, valid_per_mille
        self.replay_files, self.replay_fraction = list(replay_files), replay_fraction
        self.write = EncodePackWrite(tokenizer_json, out, seq_len, mask, packing, target_bytes, fast_encode)

    def expand(self, pbegin):
        num_shards, valid_per_mille = self.num_shards, self.valid_per_mille
        # The files as elements, read by ReadAll: Beam's DaskRunner (2.77) does not translate the
        # Read that ReadFromParquetBatched expands to (its input would be None), and one element per
        # file gives it partitions to spread (--dask_npartitions).
        files = sorted(m.path for m in FileSystems.match([self.corpus_glob])[0].metadata_list)
        docs = (pbegin | "CorpusFiles" >> beam.Create(files)
                | "ReadCorpus" >> beam.io.ReadAllFromParquetBatched(columns=["id", "text"]))
        if self.replay_files:  # a hash sample of earlier corpora, mixed in before the split
            replay = (pbegin
                      | "ReplayFiles" >> beam.Create(self.replay_files)
                      | "ReadReplay" >> beam.io.ReadAllFromParquetBatched(columns=["id", "text"])
                      | "SampleReplay" >> beam.Map(sample_batch, self.replay_fraction))
            docs = (docs, replay) | "Mix" >> beam.Flatten()
        return (docs
                | "KeyBySplitShard" >> beam.FlatMap(key_batch, num_shards, valid_per_mille)
                | "GroupShards" >> beam.GroupByKey()
                | "EncodePackWrite" >> beam.ParDo(self.write))
