"""Token shards: Arrow IPC *stream* files with precomputed dynamic masks (`lmforge.token_shard/v3`).

One row is one packed sequence of `seq_len` token ids. Masks are stored compactly: for each of
K variants, the masked positions and the token placed there, never K copies of the sequence.
The loader uses variant `epoch % K`. What a variant means depends on the objective, named in
the schema metadata (`lmforge.objective`) and in the manifest:

- `mlm`, `whole_word`, `span`: `mask_tokens[k][j]` is the id placed at `mask_positions[k][j]`
  (the mask id, a random id or the original, per BERT's 80/10/10); the label there is the
  original id, every other position is ignored.
- `t5_span`: `mask_positions[k]` lists every noise position, ascending; `mask_tokens[k][j]` is
  the sentinel id at the first position of each noise span and -1 at the others. The encoder
  input is the row with each span replaced by its sentinel; the target is, span by span, the
  sentinel followed by the span's tokens, then eos (T5's span corruption). Both fit the bounds
  `lmforge.max_encoder_len` / `lmforge.max_target_len`.
- `causal`: K = 0 (the lists are empty); labels are the input ids.

Stream format (not the Arrow file format) because `datasets.Dataset.from_file` reads streams;
`pa.ipc.open_stream(pa.memory_map(path))` reads them zero-copy.

Changes from v2: `mask_tokens` holds int16 when every id of the vocabulary fits (at most 32,768
ids, as BERT's 30,522 and T5's 32,100 do; t5_span's -1 marker fits too), int32 otherwise
(RoBERTa's 50,265); the width is in `lmforge.mask_token_bits` (16 or 32; absent means 32). At
K = 10 on the demo corpus this took 13.7 bytes per token to 10.7. `input_ids` stay int32, so `datasets`
users get tensors that an embedding layer takes.

Changes from v1 (v1 was BERT MLM only, one file per shard):
- `lmforge.objective` may be mlm | whole_word | span | t5_span | causal; causal rows hold 0 variants;
  t5_span stores -1 in `mask_tokens` at the non-first positions of a span.
- new metadata keys `lmforge.family` (bert | roberta | t5), `lmforge.packing` (concat | document),
  `lmforge.pad_id`, `lmforge.eos_id` and, for t5_span, `lmforge.max_encoder_len` / `lmforge.max_target_len`.
- a (split, shard) group is several files of at most the target size: `train/shard-00003-001.arrow`
  is part 1 of shard 3 (`shard_file_name`); the manifest lists them in order.
- `document` packing: one document per row, padded; a longer document continues in the next rows,
  which then have no entry in `doc_starts`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from schemas.objectives import objective as objective_record

SHARD_SCHEMA_VERSION = "lmforge.token_shard/v3"
READABLE_SCHEMA_VERSIONS = ("lmforge.token_shard/v1", "lmforge.token_shard/v2", SHARD_SCHEMA_VERSION)
"""v1 and v2 files (no `lmforge.mask_token_bits`; v1 also without the v2 keys) read with the
defaults in `ShardMeta.from_schema`: int32 mask tokens, BERT MLM, concat packing."""



@dataclass(frozen=True)
class Layout:
    """A tokenizer family's special-token layout (`lmforge.family`): which special ids (roles of
    pipelines.tokenizer.special_ids) frame each document in a packed row."""

    name: str
    prefix: tuple[str, ...]
    suffix: tuple[str, ...]


LAYOUTS: dict[str, Layout] = {lay.name: lay for lay in (
    Layout("bert", ("cls",), ("sep",)),
    Layout("roberta", ("cls",), ("sep",)),  # special_ids names <s>/</s> cls/sep for RoBERTa
    Layout("t5", (), ("eos",)),
)}
FAMILIES = tuple(LAYOUTS)
PACKINGS = ("concat", "document")

TOKEN_SHARD_SCHEMA = pa.schema(
    [
        pa.field("input_ids", pa.list_(pa.int32()), nullable=False),
        # Number of real tokens; positions >= length are padding (attention_mask 0).
        pa.field("length", pa.int32(), nullable=False),
        # Start offset of every document inside the sequence (packed rows: where each document's
        # first token, [CLS]/<s> or its first word, falls; a row that continues a document may have none).
        pa.field("doc_starts", pa.list_(pa.int32()), nullable=False),
        # K lists of masked positions and K lists of replacement ids, aligned element-wise.
        # int16 positions: seq_len is at most 4096 here, well under 32,767.
        pa.field("mask_positions", pa.list_(pa.list_(pa.int16())), nullable=False),
        pa.field("mask_tokens", pa.list_(pa.list_(pa.int32())), nullable=False),
    ],
    metadata={"lmforge.schema": SHARD_SCHEMA_VERSION},
)
MASK_COLUMNS = ("mask_positions", "mask_tokens")
MASK_TOKEN_TYPES = {16: pa.int16(), 32: pa.int32()}


def mask_token_bits(vocab_size: int) -> int:
    """16 when every id (and t5_span's -1) fits int16, else 32."""
    return 16 if vocab_size <= 1 << 15 else 32

_NAME = re.compile(r"shard-(\d{5,})-(\d{3,})\.arrow")


def shard_file_name(split: str, shard: int, part: int) -> str:
    """`train/shard-00003-001.arrow`: part `part` of (split, shard); sorting by name keeps (shard, part) order
    up to 99,999 shards of 999 parts, and `shard_file_key` sorts correctly beyond."""
    return f"{split}/shard-{shard:05d}-{part:03d}.arrow"


def shard_file_key(name: str) -> tuple[int, int]:
    """(shard, part) of a shard file name; ValueError for anything else."""
    m = _NAME.fullmatch(name.rsplit("/", 1)[-1])
    if m is None:
        raise ValueError(f"{name}: not a shard file name (shard-SSSSS-PPP.arrow)")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class ShardMeta:
    """What a reader needs from a shard's schema metadata."""

    version: str
    seq_len: int
    num_variants: int
    objective: str = "mlm"
    family: str = "bert"
    packing: str = "concat"
    pad_id: int = 0
    eos_id: int | None = None
    max_encoder_len: int | None = None
    """t5_span only: encoder inputs are padded to this length."""
    max_target_len: int | None = None
    """t5_span only: targets (labels) are padded to this length."""
    mask_token_bits: int = 32
    """Width of the `mask_tokens` values: 16 or 32 (`mask_token_bits`)."""

    def to_metadata(self) -> dict[bytes, bytes]:
        meta = {
            b"lmforge.schema": self.version,
            b"lmforge.seq_len": self.seq_len,
            b"lmforge.num_variants": self.num_variants,
            b"lmforge.objective": self.objective,
            b"lmforge.family": self.family,
            b"lmforge.packing": self.packing,
            b"lmforge.pad_id": self.pad_id,
            b"lmforge.eos_id": self.eos_id,
            b"lmforge.max_encoder_len": self.max_encoder_len,
            b"lmforge.max_target_len": self.max_target_len,
            b"lmforge.mask_token_bits": self.mask_token_bits,
        }
        return {k: str(v).encode() for k, v in meta.items() if v is not None}

    def schema(self) -> pa.Schema:
        """The columns this shard has (mask_tokens at its width) and its metadata."""
        if self.mask_token_bits not in MASK_TOKEN_TYPES:
            raise ValueError(f"mask_token_bits must be 16 or 32, got {self.mask_token_bits}")
        i = TOKEN_SHARD_SCHEMA.get_field_index("mask_tokens")
        field = pa.field("mask_tokens", pa.list_(pa.list_(MASK_TOKEN_TYPES[self.mask_token_bits])), nullable=False)
        return TOKEN_SHARD_SCHEMA.set(i, field).with_metadata(self.to_metadata())

    @classmethod
    def from_schema(cls, schema: pa.Schema) -> ShardMeta:
        """Parse the metadata; missing keys take v1's meaning (BERT MLM, concat packing)."""
        meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (schema.metadata or {}).items()}

        def num(key: str) -> int | None:
            return int(meta[key]) if meta.get(key) not in (None, "") else None

        return cls(version=meta.get("lmforge.schema", ""), seq_len=num("lmforge.seq_len") or 0,
                   num_variants=num("lmforge.num_variants") or 0, objective=meta.get("lmforge.objective", "mlm"),
                   family=meta.get("lmforge.family", "bert"), packing=meta.get("lmforge.packing", "concat"),
                   pad_id=num("lmforge.pad_id") or 0, eos_id=num("lmforge.eos_id"),
                   max_encoder_len=num("lmforge.max_encoder_len"), max_target_len=num("lmforge.max_target_len"),
                   mask_token_bits=num("lmforge.mask_token_bits") or 32)


def shard_schema(seq_len: int, num_variants: int, objective: str, *, family: str = "bert", packing: str = "concat",
                 pad_id: int = 0, eos_id: int | None = None, max_encoder_len: int | None = None,
                 max_target_len: int | None = None, mask_token_bits: int = 32) -> pa.Schema:
    """The shard schema with the facts a reader needs in its metadata."""
    if objective_record(objective).bounded_lengths and (max_encoder_len is None or max_target_len is None):
        raise ValueError(f"{objective} shards need max_encoder_len and max_target_len")
    return ShardMeta(SHARD_SCHEMA_VERSION, seq_len, num_variants, objective, family, packing, pad_id, eos_id,
                     max_encoder_len, max_target_len, mask_token_bits).schema()
