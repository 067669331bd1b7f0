"""Corpus record types and their Parquet/JSONL layouts (schema `lmforge.corpus/v1`)."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

CORPUS_SCHEMA_VERSION = "lmforge.corpus/v5"  # v2: duplicates gain cluster_id; v3: kept_generation, exact similarity; v4: dropped gains detail; v5: dropped gains language


@dataclass(frozen=True)
class RawDocument:
    """One document as read from the crawl, before cleaning."""

    id: str
    """Stable id: the input's own id (JSONL `id`, WARC-Record-ID) or `<file>:<offset>`."""
    url: str
    source: str
    """The file it came from."""
    offset: int
    """Byte offset (WARC) or line number (JSONL) inside `source`."""
    html: bytes | None = None
    """Raw HTTP body for HTML responses; None when `text` is already plain text."""
    charset: str | None = None
    """Charset declared by the HTTP Content-Type header, if any."""
    content_type: str = "text/html"
    """MIME type of the payload (from HTTP headers; text/plain for WET and JSONL)."""
    text: str | None = None
    """Plain text (WET conversion records, JSONL, Parquet); None for HTML responses."""


@dataclass(frozen=True)
class Quarantined:
    """A record that could not be read or decoded; kept with the reason, never dropped silently."""

    source: str
    offset: int
    reason: str
    """A short machine-readable reason, e.g. `truncated_gzip`, `undecodable`, `invalid_json`."""
    detail: str = ""
    id: str = ""


# The clean corpus: Parquet files `corpus/data/<lang>/part-*.parquet`.
CLEAN_DOC_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        pa.field("language", pa.string()),
        pa.field("language_score", pa.float32()),
        pa.field("source", pa.string()),
    ],
    metadata={"lmforge.schema": CORPUS_SCHEMA_VERSION},
)

# Documents removed by a quality rule: `corpus/dropped/part-*.parquet` (no text, for audit).
DROPPED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("source", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),  # what matched (a blocked domain, an evaluation item); null if nothing to add
        pa.field("language", pa.string()),  # identified on the page as dropped (clean.dropped_language); null: no text
    ],
    metadata={"lmforge.schema": CORPUS_SCHEMA_VERSION},
)

# Duplicates removed: `corpus/duplicates/part-*.parquet`, one row per removed document.
# Near-duplicate clusters are connected components of verified LSH pairs (Beam, large-star/small-star);
# the kept document is the cluster's representative (pipelines/corpus/dedup.py rank_key: indexed
# first, then best quality, then smallest id), and the cluster is named after it.
DUPLICATE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # as given in the input
        pa.field("cluster_id", pa.string(), nullable=False),
        pa.field("kept_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "exact" or "near"
        pa.field("similarity", pa.float32()),  # exact shingle Jaccard with the kept document (1.0 for exact)
        # Null when the kept document is in this run's data/; else the band-index generation
        # (an earlier snapshot) that holds it.
        pa.field("kept_generation", pa.int32()),
    ],
    metadata={"lmforge.schema": CORPUS_SCHEMA_VERSION},
)
