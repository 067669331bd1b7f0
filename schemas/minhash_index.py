"""The persisted MinHash band index (`lmforge.minhash_index/v1`): what earlier corpus runs kept.

A new crawl snapshot is deduplicated against it, and its kept documents then extend it, so a
recurring refresh never re-admits a page published by an earlier run.

Layout (one directory, shared by every run that names it with `--index`):

    INDEX.json                        the commit point: params + the list of committed generations
    gen-00001/bands/band=00/part-00000.parquet   (key, id) for band 0 of snapshot 1's kept docs
    gen-00001/bands/band=01/...                  ... one partition per band
    gen-00001/docs/part-00000-of-00002.parquet   (id, exact_key, quality, hashes) per kept doc
    gen-00002/...

A generation is written under its final name by the Beam job, but it exists for readers only
once INDEX.json (written to a temporary name, then renamed) lists it; a killed run leaves an
unlisted directory that the next run deletes. INDEX.json records the MinHash scheme, the
datasketch version and the LSH parameters: signatures made with another scheme or other bands
do not compare (datasketch 2.0 changed its default hash scheme), so a mismatch is an error.
"""
from __future__ import annotations

import pyarrow as pa

INDEX_SCHEMA_VERSION = "lmforge.minhash_index/v1"
INDEX_FILE = "INDEX.json"

# gen-*/bands/band=NN/*.parquet: one row per (kept document, band).
INDEX_BAND_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary(), nullable=False),  # pipelines.corpus.dedup.band_keys: band index + 12-byte hash
        pa.field("id", pa.string(), nullable=False),  # the document id as given in its snapshot
    ],
    metadata={"lmforge.schema": INDEX_SCHEMA_VERSION},
)

# gen-*/docs/*.parquet: one row per kept document, what a later run needs to confirm a match.
INDEX_DOC_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("exact_key", pa.string(), nullable=False),  # dedup.exact_key of the kept text
        pa.field("quality", pa.list_(pa.float64()), nullable=False),  # dedup.quality_rank's quality part
        # Sorted distinct 64-bit shingle hashes: exact Jaccard against new documents.
        # ~8 bytes per word of text; the cost of confirming matches exactly rather than on signatures.
        pa.field("hashes", pa.list_(pa.uint64()), nullable=False),
    ],
    metadata={"lmforge.schema": INDEX_SCHEMA_VERSION},
)
