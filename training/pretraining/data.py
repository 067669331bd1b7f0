"""Reading token shards for training: the pure core, no DeepSpeed and no process group.

A shard directory (`schemas.shards`, `lmforge.token_shard/v3`) holds Arrow IPC stream files
that are memory-mapped, so a rank's RSS grows only with the rows it touches. Each epoch the rows
are shuffled from (seed, epoch) and cut into global batches of micro batch x world samples, rank r
taking the r-th slice of each, with the precomputed mask variant `epoch % K` applied. The position
is counted in samples, so a run saved on N processes resumes on M.

    shards = ShardSet.open("runs/demo/shards")         # verify=True: sha256 of every file on read
    table = shards.read("train")                       # zero-copy over the mapped files
    loader = RankLoader(table, rank=0, world=2, batch_size=16, seed=1, num_variants=shards.num_variants)
    for batch in loader.epoch(0):                       # dict of LongTensors, (16, seq_len)
        ...
    state = loader.state_dict()                         # {epoch, sample, seed, world, ...}
    loader.load_state_dict(state); e, i = loader.position  # on any world size
    for batch in loader.epoch(e, start=i): ...          # exactly the batches the uninterrupted run saw

Batches follow the shards' objective (from the schema metadata): mlm, whole_word and span give
input_ids, attention_mask and labels (-100 outside masked positions); t5_span gives the
encoder's input_ids and attention_mask, labels (the target, -100 padding) and
decoder_input_ids (labels shifted right, pad first, as HF T5 does); causal gives input_ids,
attention_mask and labels = input_ids with -100 at padding (the model shifts them).

We considered `datasets.Dataset.from_file` (it reads these streams too) and
`torch.utils.data.DistributedSampler`; neither knows about the K mask variants, and the
shuffle and global batches are ten lines of numpy, so they are written here.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from schemas.objectives import objective as objective_record
from schemas.shards import ShardMeta
from training.pretraining.batches import IGNORE_INDEX, MlmView, build_batch, t5_example, with_documents  # noqa: F401 (re-exported)
from training.pretraining.shard_set import ShardSet, open_shard  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)


def epoch_order(num_rows: int, seed: int, epoch: int) -> np.ndarray:
    """Every row of the split once, shuffled by (seed, epoch) alone: the same order whatever the world size."""
    return np.random.default_rng([seed, epoch]).permutation(num_rows).astype(np.int64)


def rank_batches(order: np.ndarray, start: int, batch_size: int, rank: int, world: int) -> list[np.ndarray]:
    """Rank `rank`'s micro-batches of one epoch, from sample `start` of `order` on.

    The epoch is cut into global batches of batch_size * world consecutive samples; rank r takes the r-th
    slice of each. A run on 2 processes with micro batch 16 and one on 1 process with micro batch 16 and 2
    accumulation steps see the same 32 samples in each optimizer step, so a checkpoint's position, counted
    in samples, means the same data on any world size. The tail shorter than one global batch is left out
    of this epoch (another tail, of other rows, is left out of the next)."""
    g = batch_size * world
    n = (len(order) - start) // g
    return [order[start + i * g + rank * batch_size: start + i * g + (rank + 1) * batch_size] for i in range(n)]


LOADER_STATE_KEYS = ("seed", "num_rows", "num_variants")
"""What must match for a saved position (epoch, sample) to mean the same data; world size and batch
size may differ (a run resumed on another number of processes)."""


class RankLoader:
    """One rank's micro-batches, epoch by epoch; counts what it leaves out; resumable on any world size.

    The order is a function of (seed, epoch), with no hidden RNG, so the state is the position: the epoch
    and the number of samples of it consumed by all ranks together.
    """

    def __init__(self, table: pa.Table, rank: int, world: int, batch_size: int, seed: int, num_variants: int,
                 documents: bool = False):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is outside a world of {world}")
        self.table, self.rank, self.world, self.batch_size = table, rank, world, batch_size
        self.seed, self.num_variants = seed, num_variants
        objective = ShardMeta.from_schema(table.schema).objective
        self.view = MlmView(table, documents) if objective_record(objective).writes_mask and table.num_rows else None
        self.documents = documents
        """Batches carry `doc_ids` and `position_ids` for `document` attention (training.models.attention)."""
        self.global_batch = batch_size * world
        self.batches_per_epoch = table.num_rows // self.global_batch
        self.position: tuple[int, int] = (0, 0)
        """(epoch, samples of it consumed by all ranks), advanced as batches are handed out."""
        self.counts = {
            "rows": table.num_rows,
            # Per epoch; which rows they are changes with the shuffle.
            "dropped_partial_batch": table.num_rows - self.batches_per_epoch * self.global_batch,
        }
        if self.batches_per_epoch == 0:
            raise ValueError(f"{table.num_rows} rows are fewer than one global batch of {batch_size} x {world} "
                             f"processes = {self.global_batch}")
        if rank == 0 and self.counts["dropped_partial_batch"]:
            log.info("loader leaves out %d row(s) per epoch (a different tail each epoch) to keep global batches whole",
                     self.counts["dropped_partial_batch"])

    def variant(self, epoch: int) -> int:
        """epoch % K; 0 (unused) for causal shards, which store no variants."""
        return epoch % self.num_variants if self.num_variants else 0

    def epoch(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        """This epoch's micro-batches from sample `start` on; `position` moves past each batch as it is yielded."""
        for position, batch in self.batches(epoch, start):
            # Set before yielding: a state saved after this batch is consumed resumes at the next one.
            self.position = position
            yield batch

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[tuple[int, int], dict[str, torch.Tensor]]]:
        """(position after the batch, batch), leaving `position` alone: for a consumer that builds batches ahead
        of use (training.pretraining.feed), which sets `position` when it takes each batch."""
        if not 0 <= start <= self.table.num_rows:
            raise ValueError(f"start {start} is outside [0, {self.table.num_rows}] samples of epoch {epoch}")
        batches = rank_batches(epoch_order(self.table.num_rows, self.seed, epoch), start, self.batch_size,
                               self.rank, self.world)
        v = self.variant(epoch)
        for i, rows in enumerate(batches):
            position = (epoch, start + (i + 1) * self.global_batch) if i + 1 < len(batches) else (epoch + 1, 0)
            if self.view is not None:
                yield position, self.view.batch(rows, v)
            else:
                batch = build_batch(self.table, rows, v)
                yield position, with_documents(batch, self.table, rows) if self.documents else batch

    def most_masks_per_row(self) -> int:
        """The most masked positions of any row and variant (0 for shards that store no masks)."""
        return self.view.most_masks_per_row() if self.view is not None else 0

    def state_dict(self) -> dict[str, Any]:
        epoch, sample = self.position
        return {"epoch": epoch, "sample": sample, "seed": self.seed, "world": self.world,
                "batch_size": self.batch_size, "num_rows": self.table.num_rows, "num_variants": self.num_variants}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at `state`'s position. Every rank is at the same position, so any rank's state restores
        any rank, on any world size and batch size; seed, rows and variants must match, or the position
        would name other data."""
        mine = self.state_dict()
        diff = {k: (state.get(k), mine[k]) for k in LOADER_STATE_KEYS if state.get(k) != mine[k]}
        if "sample" not in state:
            diff["sample"] = ("absent (a checkpoint of an older lmforge counted per-rank batches)", "a sample count")
        if diff:
            raise ValueError("loader state does not fit this loader (saved, now): "
                             + ", ".join(f"{k} {a} != {b}" for k, (a, b) in diff.items()))
        epoch, sample = int(state["epoch"]), int(state["sample"])
        if epoch < 0 or not 0 <= sample < self.table.num_rows:
            raise ValueError(f"loader state position epoch {epoch} sample {sample} is outside the split's "
                             f"{self.table.num_rows} rows")
        self.position = (epoch, sample)
