"""Token shards: Arrow IPC *stream* files with precomputed dynamic masks (`lmforge.token_shard/v1`).

One row is one packed sequence of `seq_len` token ids. Masks are stored compactly: for each of
K variants, the masked positions and the token placed there (the [MASK] id, a random id or the
original, per BERT's 80/10/10); labels are the original ids at those positions, so no copy of
the sequence is stored per variant. The loader uses variant `epoch % K`.

Stream format (not the Arrow file format) because `datasets.Dataset.from_file` reads streams.
"""
from __future__ import annotations

import pyarrow as pa

SHARD_SCHEMA_VERSION = "lmforge.token_shard/v1"

TOKEN_SHARD_SCHEMA = pa.schema(
    [
        pa.field("input_ids", pa.list_(pa.int32()), nullable=False),
        # Number of real tokens; positions >= length are padding (attention_mask 0).
        pa.field("length", pa.int32(), nullable=False),
        # Start offset of every document inside the sequence (the first is 0 for packed rows).
        pa.field("doc_starts", pa.list_(pa.int32()), nullable=False),
        # K lists of masked positions and K lists of replacement ids, aligned element-wise.
        pa.field("mask_positions", pa.list_(pa.list_(pa.int16())), nullable=False),
        pa.field("mask_tokens", pa.list_(pa.list_(pa.int32())), nullable=False),
    ],
    metadata={"lmforge.schema": SHARD_SCHEMA_VERSION},
)


def shard_schema(seq_len: int, num_variants: int, objective: str) -> pa.Schema:
    """The shard schema with the facts a reader needs in its metadata."""
    meta = dict(TOKEN_SHARD_SCHEMA.metadata or {})
    meta.update(
        {
            b"lmforge.seq_len": str(seq_len).encode(),
            b"lmforge.num_variants": str(num_variants).encode(),
            b"lmforge.objective": objective.encode(),
        }
    )
    return TOKEN_SHARD_SCHEMA.with_metadata(meta)
