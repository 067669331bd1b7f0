"""The cleaning an ablation's arms share: arms over one crawl whose corpus options differ only in deduplication
read one cleaning of it, run once, instead of each cleaning the crawl again.

    cleanings = share_cleaning(plan["arms"])   # {"baseline": {"crawl", "corpus", "arms": ["baseline", "no-near-dedup"]}}
    cleaning_options(arm_corpus)               # the shared stage: every rule the arms run, no dedup, no PII
    after_cleaning(arm_corpus)                 # each arm's own stage over the cleaning's data/: the dedup it asks for

The cleaning stage (<name>/cleaned/<first arm>/corpus) runs every step of the chain the arms agree on (URL filter,
C4, language id, Gopher, FineWeb, decontamination against the reference set) without deduplication and without
the PII step. Each arm's corpus stage then reads its data/ with those steps named in `applied_steps` (skipped, their
options still in force where a later step reads them: C4's page rules after line dedup), runs language id again
(deterministic: the same text gives the same language and score, which dedup ranks by) and then what the arm
changes: exact, near-duplicate and line dedup, and PII last, as in one corpus stage over the crawl. Arms that change
a rule (no-quality-rules, no-gopher, ...) read the crawl themselves.

The arm's counts in the report are the cleaning's and its own together (merged_counts): documents in, dropped by
reason, quarantined and reference pages dropped from the cleaning; duplicates and kept from the arm; they reconcile
(the arm read every document the cleaning kept, or the merge fails naming both stages).
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

from common.config import flatten_options
from pipelines.corpus.config import APPLICABLE

DEDUP_OPTIONS = frozenset({"exact_dedup", "near_dedup", "line_dedup", "jaccard_threshold", "num_perm",
                           "shingle_words", "shingle_chars", "char_shingle_languages", "cc_rounds", "num_shards"})
"""Corpus options that only change deduplication (and how the output is sharded): arms that differ in nothing else
share one cleaning."""
TEXT_BYTES_PER_SHARD = 64 << 20
"""The cleaning's data/ is read back a Parquet file (one row group) at a time: about this many crawl bytes per
file keeps each well under the reader's row-group cap (pipelines/corpus/readers.py MAX_ROW_GROUP_BYTES)."""


def _shareable(corpus: dict[str, Any]) -> str:
    flat = flatten_options(corpus)
    return json.dumps({k: v for k, v in flat.items() if k not in DEDUP_OPTIONS}, sort_keys=True, default=str)


def share_cleaning(arms: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Groups of two or more arms (same crawl, same options but deduplication's) -> one cleaning each, named after
    its first arm; each member arm gets "cleaned": that name. Arms alone in their group read the crawl."""
    groups: dict[tuple, list[str]] = {}
    for name, a in arms.items():
        groups.setdefault((tuple(a["crawl"]), _shareable(a["corpus"])), []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for (crawl, _), members in groups.items():
        if len(members) < 2:
            continue
        first = arms[members[0]]
        out[members[0]] = {"crawl": list(crawl), "corpus": cleaning_options(first["corpus"], list(crawl)),
                           "arms": members}
        for m in members:
            arms[m]["cleaned"] = members[0]
    return out


def _input_bytes(crawl: list[str]) -> int:
    total = 0
    for c in crawl:
        p = Path(c)
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def cleaning_options(corpus: dict[str, Any], crawl: list[str]) -> dict[str, Any]:
    """The shared stage's options: the arms' rules, no dedup, no PII (it runs in each arm, after language id), and
    enough output files that each is read back in bounded memory."""
    shards = max(int(corpus.get("num_shards", 2)), math.ceil(_input_bytes(crawl) / TEXT_BYTES_PER_SHARD))
    return {**corpus, "exact_dedup": False, "near_dedup": False, "line_dedup": False, "num_shards": shards,
            "pii": {**(corpus.get("pii") or {}), "enabled": False}}


def after_cleaning(corpus: dict[str, Any]) -> dict[str, Any]:
    """An arm's own options over the cleaning's data/: every step the cleaning ran marked applied (language id and
    PII run here), no second decontamination."""
    return {**corpus, "decontaminate": {**(corpus.get("decontaminate") or {}), "files": []},
            "applied_steps": [s for s in APPLICABLE if s != "pii"]}


def data_dir(cleaned: str) -> str:
    """The cleaning's kept documents (what an arm reads): its data/ folder, never dropped/ or duplicates/."""
    return os.path.join(cleaned, "data")


def merged_counts(cleaned: dict[str, Any], arm: dict[str, Any], where: str) -> dict[str, Any]:
    """One corpus's counts from the cleaning's and the arm's (module docstring); ValueError if they do not add up."""
    if arm.get("in") != cleaned.get("kept"):
        raise ValueError(f"{where}: the arm read {arm.get('in')} documents, the cleaning kept {cleaned.get('kept')}")

    def plus(key: str) -> dict[str, int]:
        return dict(Counter(cleaned.get(key) or {}) + Counter(arm.get(key) or {}))

    return {**arm, "in": cleaned["in"], "dropped": plus("dropped"), "quarantined_by_reason": plus("quarantined_by_reason"),
            "quarantined": int(cleaned.get("quarantined", 0)) + int(arm.get("quarantined", 0)),
            "contamination": cleaned.get("contamination") or {},
            "skipped_non_document_records": cleaned.get("skipped_non_document_records") or {}}
