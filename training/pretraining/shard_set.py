"""A shard stage directory opened and checked, without torch: `ShardSet` (the manifest's description, each split's
files memory-mapped and verified) and `open_shard` (one file against the contract). training.pretraining.data's
loaders read them; `lmforge pretrain` checks its inputs with them before it launches workers, importing no torch."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.manifest import MANIFEST_NAME, read_manifest, sha256_file
from schemas.objectives import objective as objective_record
from schemas.shards import READABLE_SCHEMA_VERSIONS, SHARD_SCHEMA_VERSION, ShardMeta


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
