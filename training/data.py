"""Reading token shards for training: the pure core, no DeepSpeed and no process group.

A shard directory (`schemas.shards`, `lmforge.token_shard/v1`) holds Arrow IPC stream files
that are memory-mapped, so a rank's RSS grows only with the rows it touches. Each epoch a
rank sees its own rows (row i belongs to rank i % world), reshuffled from (seed, epoch, rank),
with the precomputed mask variant `epoch % K` applied.

    shards = ShardSet.open("runs/demo/shards")
    table = shards.read("train")                       # zero-copy over the mapped files
    loader = RankLoader(table, rank=0, world=2, batch_size=16, seed=1, num_variants=shards.num_variants)
    for batch in loader.epoch(0):                       # dict of LongTensors, (16, seq_len)
        ...

We considered `datasets.Dataset.from_file` (it reads these streams too) and
`torch.utils.data.DistributedSampler`; neither knows about the K mask variants, and the rank
split and shuffle are ten lines of numpy, so they are written here.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from schemas.manifest import read_manifest
from schemas.shards import SHARD_SCHEMA_VERSION, TOKEN_SHARD_SCHEMA

log = logging.getLogger(__name__)

IGNORE_INDEX = -100
"""Label for positions that carry no loss (torch CrossEntropyLoss's default ignore_index)."""


@dataclass(frozen=True)
class ShardSet:
    """A shard stage directory as described by its manifest's `extra`."""

    root: Path
    seq_len: int
    num_variants: int
    vocab_size: int
    pad_id: int
    mask_id: int
    splits: dict[str, list[str]]
    """Split name -> shard files relative to `root`."""

    @classmethod
    def open(cls, shards_dir: str | Path) -> ShardSet:
        root = Path(shards_dir)
        extra = read_manifest(root).get("extra", {})
        missing = [k for k in ("seq_len", "num_variants", "vocab_size", "pad_id", "mask_id", "splits") if k not in extra]
        if missing:
            raise ValueError(f"{root / 'manifest.json'}: extra lacks {missing}; is this a shards stage?")
        return cls(
            root=root,
            seq_len=int(extra["seq_len"]),
            num_variants=int(extra["num_variants"]),
            vocab_size=int(extra["vocab_size"]),
            pad_id=int(extra["pad_id"]),
            mask_id=int(extra["mask_id"]),
            splits={k: list(v) for k, v in extra["splits"].items()},
        )

    def files(self, split: str) -> list[Path]:
        if split not in self.splits:
            raise ValueError(f"{self.root}: no split {split!r} (have {sorted(self.splits)})")
        return [self.root / f for f in self.splits[split]]

    def read(self, split: str) -> pa.Table:
        """All shards of a split as one table whose chunks point into the mapped files."""
        files = self.files(split)
        if not files:
            raise ValueError(f"{self.root}: split {split!r} lists no files")
        tables = [open_shard(f, self.seq_len, self.num_variants) for f in files]
        return pa.concat_tables(tables)


def open_shard(path: str | Path, seq_len: int | None = None, num_variants: int | None = None) -> pa.Table:
    """Memory-map one shard and check it against the contract; bad data raises ValueError naming the file."""
    path = Path(path)
    try:
        # Reading a stream from a memory map is zero-copy: the table's buffers are the mapped pages.
        table = pa.ipc.open_stream(pa.memory_map(str(path), "r")).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable Arrow IPC stream ({e})") from e
    meta = table.schema.metadata or {}
    version = meta.get(b"lmforge.schema", b"").decode(errors="replace")
    if version != SHARD_SCHEMA_VERSION:
        raise ValueError(f"{path}: shard schema {version or '(none)'!r}, expected {SHARD_SCHEMA_VERSION!r}")
    for want in TOKEN_SHARD_SCHEMA:
        got = table.schema.field(want.name) if want.name in table.schema.names else None
        if got is None or not got.type.equals(want.type):
            raise ValueError(f"{path}: column {want.name!r} is {got.type if got else 'missing'}, expected {want.type}")
    _check_rows(path, table, seq_len, num_variants)
    return table


def _first_bad(mask: pa.ChunkedArray | pa.Array) -> int:
    """Index of the first True in a boolean array (the caller knows there is one)."""
    return int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False)))[0])


def _check_rows(path: Path, table: pa.Table, seq_len: int | None, num_variants: int | None) -> None:
    """Vectorised checks of every row, so a bad record fails here and not mid-epoch."""
    if table.num_rows == 0:
        return
    lens = pc.list_value_length(table["input_ids"])
    seq_len = seq_len if seq_len is not None else lens[0].as_py()
    bad = pc.not_equal(lens, seq_len)
    if pc.any(bad).as_py():
        i = _first_bad(bad)
        raise ValueError(f"{path}: record {i} has {lens[i].as_py()} input_ids, expected seq_len {seq_len}")
    bad = pc.or_(pc.less(table["length"], 0), pc.greater(table["length"], seq_len))
    if pc.any(bad).as_py():
        i = _first_bad(bad)
        raise ValueError(f"{path}: record {i} has length {table['length'][i].as_py()} outside [0, {seq_len}]")
    k_pos = pc.list_value_length(table["mask_positions"])
    num_variants = num_variants if num_variants is not None else k_pos[0].as_py()
    for col in ("mask_positions", "mask_tokens"):
        bad = pc.not_equal(pc.list_value_length(table[col]), num_variants)
        if pc.any(bad).as_py():
            i = _first_bad(bad)
            raise ValueError(f"{path}: record {i} has {len(table[col][i])} {col} variants, expected {num_variants}")
    positions = pc.list_flatten(table["mask_positions"])  # one list per (row, variant)
    tokens = pc.list_flatten(table["mask_tokens"])
    bad = pc.not_equal(pc.list_value_length(positions), pc.list_value_length(tokens))
    if pc.any(bad).as_py():
        i = _first_bad(bad) // num_variants
        raise ValueError(f"{path}: record {i} has mask_positions and mask_tokens of different lengths")
    flat = pc.list_flatten(positions)
    if len(flat) and (pc.min(flat).as_py() < 0 or pc.max(flat).as_py() >= seq_len):
        raise ValueError(f"{path}: a mask position lies outside [0, {seq_len})")


# ---------------------------------------------------------------------------------------------
# Rank split, shuffle and batches.


@dataclass(frozen=True)
class RankSplit:
    rows: np.ndarray
    """Row indices this rank owns, ascending."""
    dropped: int
    """Rows dropped from the end of the table (on all ranks together) so every rank owns as many."""


def rank_rows(num_rows: int, rank: int, world: int) -> RankSplit:
    """Row i goes to rank i % world; the last num_rows % world rows go nowhere.

    Equal row counts give equal batch counts, so no rank waits at a collective another never
    reaches. E.g. 1,003 rows on 2 ranks: 1,003 % 2 = 1 dropped, 501 rows each.
    """
    assert 0 <= rank < world, (rank, world)
    usable = num_rows - num_rows % world
    return RankSplit(rows=np.arange(rank, usable, world, dtype=np.int64), dropped=num_rows - usable)


def epoch_batches(rows: np.ndarray, batch_size: int, seed: int, epoch: int, rank: int = 0) -> tuple[list[np.ndarray], int]:
    """This epoch's shuffled batches of `rows` and how many rows the short last batch lost.

    The order depends only on (seed, epoch, rank), so a rerun sees the same batches; the rows
    left over differ from epoch to epoch, so no row is dropped for good.
    """
    order = np.random.default_rng([seed, epoch, rank]).permutation(rows)
    n = len(order) // batch_size
    return [order[i * batch_size:(i + 1) * batch_size] for i in range(n)], len(order) - n * batch_size


def build_batch(table: pa.Table, rows: np.ndarray, variant: int) -> dict[str, torch.Tensor]:
    """input_ids with variant `variant`'s replacements applied, attention_mask and labels.

    labels are the original ids at the masked positions and IGNORE_INDEX elsewhere.
    """
    sub = table.take(pa.array(rows, type=pa.int64()))
    b = sub.num_rows
    ids = pc.list_flatten(sub["input_ids"]).to_numpy().astype(np.int64).reshape(b, -1)
    seq_len = ids.shape[1]
    lengths = sub["length"].to_numpy()
    pos_lists = pc.list_element(sub["mask_positions"], variant)
    positions = pc.list_flatten(pos_lists).to_numpy().astype(np.int64)
    replacements = pc.list_flatten(pc.list_element(sub["mask_tokens"], variant)).to_numpy().astype(np.int64)
    row_of = np.repeat(np.arange(b), pc.list_value_length(pos_lists).to_numpy())

    labels = np.full_like(ids, IGNORE_INDEX)
    labels[row_of, positions] = ids[row_of, positions]
    inputs = ids.copy()
    inputs[row_of, positions] = replacements
    attention = (np.arange(seq_len)[None, :] < lengths[:, None]).astype(np.int64)
    return {
        "input_ids": torch.from_numpy(inputs),
        "attention_mask": torch.from_numpy(attention),
        "labels": torch.from_numpy(labels),
    }


class RankLoader:
    """One rank's batches, epoch by epoch; counts what it leaves out."""

    def __init__(self, table: pa.Table, rank: int, world: int, batch_size: int, seed: int, num_variants: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.table, self.rank, self.batch_size, self.seed, self.num_variants = table, rank, batch_size, seed, num_variants
        self.split = rank_rows(table.num_rows, rank, world)
        self.batches_per_epoch = len(self.split.rows) // batch_size
        self.counts = {
            "rows": table.num_rows,
            "rows_per_rank": len(self.split.rows),
            "dropped_rank_remainder": self.split.dropped,
            # Per epoch and rank; which rows they are changes with the shuffle.
            "dropped_partial_batch": len(self.split.rows) - self.batches_per_epoch * batch_size,
        }
        if self.batches_per_epoch == 0:
            raise ValueError(
                f"{table.num_rows} rows over {world} ranks give {len(self.split.rows)} per rank, "
                f"fewer than one batch of {batch_size}"
            )
        if rank == 0 and (self.counts["dropped_rank_remainder"] or self.counts["dropped_partial_batch"]):
            log.info("loader drops %d row(s) to keep ranks equal and %d per rank per epoch to keep batches whole",
                     self.counts["dropped_rank_remainder"], self.counts["dropped_partial_batch"])

    def variant(self, epoch: int) -> int:
        return epoch % self.num_variants

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        batches, _ = epoch_batches(self.split.rows, self.batch_size, self.seed, epoch, self.rank)
        v = self.variant(epoch)
        for rows in batches:
            yield build_batch(self.table, rows, v)
