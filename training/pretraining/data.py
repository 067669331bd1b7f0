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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from schemas.manifest import MANIFEST_NAME, read_manifest, sha256_file
from schemas.objectives import objective as objective_record
from schemas.shards import READABLE_SCHEMA_VERSIONS, SHARD_SCHEMA_VERSION, ShardMeta
from training.pretraining.batches import IGNORE_INDEX, MlmView, build_batch, t5_example, with_documents  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ShardSet:
    """A shard stage directory as described by its manifest's `extra`."""

    root: Path
    seq_len: int
    num_variants: int
    vocab_size: int
    pad_id: int
    mask_id: int | None
    """None for T5 vocabularies (t5_span and causal shards)."""
    splits: dict[str, list[str]]
    """Split name -> shard files relative to `root`."""
    objective: str = "mlm"
    family: str = "bert"
    packing: str = "concat"
    eos_id: int | None = None
    max_encoder_len: int | None = None
    max_target_len: int | None = None
    digests: dict[str, str] = field(default_factory=dict, repr=False)
    """Path relative to `root` -> sha256 from the manifest's outputs."""
    verify: bool = True
    """Hash every file on `read` and compare with `digests`: one sequential read of the split
    (sha256 at ~0.7 GB/s per core here: ~12 ms for the demo's 8 MB, ~25 min for 1 TB on every
    rank that reads it); the pages land in the cache the memory map then uses. verify=False
    skips it, e.g. for a large set checked once by `schemas.manifest.verify_outputs`."""

    @classmethod
    def open(cls, shards_dir: str | Path, verify: bool = True) -> ShardSet:
        root = Path(shards_dir)
        manifest = read_manifest(root)
        extra = manifest.get("extra", {})
        missing = [k for k in ("seq_len", "num_variants", "vocab_size", "pad_id", "mask_id", "splits") if k not in extra]
        if missing:
            raise ValueError(f"{root / MANIFEST_NAME}: extra lacks {missing}; is this a shards stage?")

        def opt_int(key: str) -> int | None:
            return None if extra.get(key) is None else int(extra[key])

        return cls(
            root=root,
            seq_len=int(extra["seq_len"]),
            num_variants=int(extra["num_variants"]),
            vocab_size=int(extra["vocab_size"]),
            pad_id=int(extra["pad_id"]),
            mask_id=opt_int("mask_id"),
            splits={k: list(v) for k, v in extra["splits"].items()},
            objective=extra.get("objective", "mlm"),
            family=extra.get("family", "bert"),
            packing=extra.get("packing", "concat"),
            eos_id=opt_int("eos_id"),
            max_encoder_len=opt_int("max_encoder_len"),
            max_target_len=opt_int("max_target_len"),
            digests={o["path"]: o["sha256"] for o in manifest.get("outputs", [])},
            verify=verify,
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
        tables = []
        for rel, path in zip(self.splits[split], files):
            expected = None
            if self.verify:
                expected = self.digests.get(rel)
                if expected is None:
                    raise ValueError(f"{path}: not among the outputs of {self.root / MANIFEST_NAME}, so its sha256 "
                                     "cannot be checked (open with verify=False to read it anyway)")
            tables.append(open_shard(path, self.seq_len, self.num_variants, sha256=expected, objective=self.objective))
        return pa.concat_tables(tables)

    def verify_share(self, rank: int, world: int, splits: tuple[str, ...] = ("train", "valid")) -> list[str]:
        """Hash this rank's share of the splits' files (every world-th, from `rank`) against the manifest; returns
        the problems, one line each. Every rank hashing every file would cost world x the read at the start of a
        run (25 min per rank for 1 TB); shared out, the ranks gather the problems and then read with verify=False."""
        problems = []
        files = [(rel, self.root / rel) for split in splits for rel in self.splits.get(split, [])]
        for rel, path in files[rank::world]:
            expected = self.digests.get(rel)
            actual = sha256_file(path) if path.exists() else "(missing file)"
            if expected is None:
                problems.append(f"{path}: not among the outputs of {self.root / MANIFEST_NAME}, so its sha256 "
                                "cannot be checked")
            elif actual != expected:
                problems.append(f"{path}: checksum mismatch, expected sha256 {expected} (manifest), got {actual}; "
                                "the file changed or is damaged since the shards stage wrote it")
        return problems

    def require_objective(self, allowed: tuple[str, ...], who: str) -> None:
        """A clear error when a trainer cannot use these shards' objective."""
        if self.objective not in allowed:
            raise ValueError(f"{self.root / MANIFEST_NAME}: objective {self.objective!r}; {who} trains on "
                             f"{', '.join(allowed)} shards only")


def open_shard(path: str | Path, seq_len: int | None = None, num_variants: int | None = None, *,
               sha256: str | None = None, objective: str | None = None) -> pa.Table:
    """Memory-map one shard and check it against the contract; bad data raises ValueError naming the file.

    `sha256`: the digest the manifest lists; the file is hashed first and a mismatch is an error.
    """
    path = Path(path)
    if sha256 is not None:
        actual = sha256_file(path) if path.exists() else "(missing file)"
        if actual != sha256:
            raise ValueError(f"{path}: checksum mismatch, expected sha256 {sha256} (manifest), got {actual}; "
                             "the file changed or is damaged since the shards stage wrote it")
    try:
        # Reading a stream from a memory map is zero-copy: the table's buffers are the mapped pages.
        table = pa.ipc.open_stream(pa.memory_map(str(path), "r")).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable Arrow IPC stream ({e})") from e
    meta = ShardMeta.from_schema(table.schema)
    if meta.version not in READABLE_SCHEMA_VERSIONS:
        raise ValueError(f"{path}: shard schema {meta.version or '(none)'!r}, expected {SHARD_SCHEMA_VERSION!r}")
    if objective is not None and meta.objective != objective:
        raise ValueError(f"{path}: objective {meta.objective!r}, but the manifest says {objective!r}")
    for want in meta.schema():  # the columns at the widths its metadata names
        got = table.schema.field(want.name) if want.name in table.schema.names else None
        if got is None or not got.type.equals(want.type):
            raise ValueError(f"{path}: column {want.name!r} is {got.type if got else 'missing'}, expected {want.type}")
    _check_rows(path, table, seq_len, num_variants, meta.objective)
    return table


def _first_bad(mask: pa.ChunkedArray | pa.Array) -> int:
    """Index of the first True in a boolean array (the caller knows there is one)."""
    return int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False)))[0])


def _check_rows(path: Path, table: pa.Table, seq_len: int | None, num_variants: int | None, objective: str) -> None:
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
    if not num_variants:
        return
    positions = pc.list_flatten(table["mask_positions"])  # one list per (row, variant)
    tokens = pc.list_flatten(table["mask_tokens"])
    bad = pc.not_equal(pc.list_value_length(positions), pc.list_value_length(tokens))
    if pc.any(bad).as_py():
        i = _first_bad(bad) // num_variants
        raise ValueError(f"{path}: record {i} has mask_positions and mask_tokens of different lengths")
    flat = pc.list_flatten(positions)
    if len(flat) and (pc.min(flat).as_py() < 0 or pc.max(flat).as_py() >= seq_len):
        raise ValueError(f"{path}: a mask position lies outside [0, {seq_len})")
    flat_tok = pc.list_flatten(tokens)
    if objective_record(objective).writes_mask and len(flat_tok) and pc.min(flat_tok).as_py() < 0:
        raise ValueError(f"{path}: a {objective} mask token is negative (-1 marks t5_span spans only)")


# ---------------------------------------------------------------------------------------------
# Shuffle, global batches and the loader.


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
