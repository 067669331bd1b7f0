"""Core of one shard group (no Beam): documents -> encoded, packed, masked rows -> shard files.

    files, counts = write_group(out, "train", 3, docs, DocEncoder(tok), spec, mask_vocab, mask_cfg, target_bytes)

`group_table` is the pure part: `ids[i]` are document i's token ids (no special tokens),
`words[i]` its word starts (only for whole_word and span masking). Masks are a pure function of
(seed, mask_shard, row, k), with rows numbered across the whole group, so cutting the group into
files of another size never changes a mask. The Beam shell and `stage.run_local` both call
`write_group`, so they write the same bytes.
"""
from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipelines.shards.mask_config import MaskConfig, MaskVocab
from pipelines.shards.mask_config import check_objective as check_vocab
from pipelines.shards.masking import BLOCK_MASKERS, mask_variants, t5_lengths
from pipelines.shards.packing import Frame, frame_for, pack, word_starts
from pipelines.shards.write import split_parts
from pipelines.tokenizer import special_ids
from schemas import storage
from schemas.manifest import atomic_write_bytes
from schemas.objectives import objective as objective_record
from schemas.objectives import tokenizer_problem
from schemas.shards import SHARD_SCHEMA_VERSION, ShardMeta, mask_token_bits, shard_file_name

VALID_SHARD_OFFSET = 1_000_000
"""Masks of valid rows are seeded with shard + this, so they never repeat a train shard's."""


def split_of(doc_id: str, valid_per_mille: int) -> str:
    """train or valid, by a hash of the id (stable across processes and runs)."""
    return "valid" if zlib.crc32(b"split:" + doc_id.encode()) % 1000 < valid_per_mille else "train"


@dataclass(frozen=True)
class ShardSpec:
    seq_len: int
    frame: Frame
    pad_id: int
    packing: str
    schema: pa.Schema


def needs_words(objective: str) -> bool:
    """whole_word and span masking need word starts from the tokenizer; the others do not pay for them."""
    return objective_record(objective).needs_word_starts


def check_objective(ids: Mapping[str, Any], objective: str, where: str) -> None:
    """A clear error when the tokenizer (its `special_ids`) cannot serve the objective."""
    problem = tokenizer_problem(objective, ids.get("mask") is not None, bool(ids.get("sentinels")), ids["family"])
    if problem:
        raise ValueError(f"{where}: {problem}")


def shard_meta(ids: Mapping[str, Any], seq_len: int, cfg: MaskConfig, packing: str, vocab_size: int) -> ShardMeta:
    """The facts every shard file carries in its schema metadata (mask tokens int16 when the vocabulary fits)."""
    enc, tgt = t5_lengths(seq_len, cfg) if objective_record(cfg.objective).bounded_lengths else (None, None)
    return ShardMeta(SHARD_SCHEMA_VERSION, seq_len, cfg.variants(), cfg.objective, ids["family"], packing,
                     int(ids["pad"]), None if ids.get("eos") is None else int(ids["eos"]), enc, tgt,
                     mask_token_bits(vocab_size))


def _lists(values: np.ndarray, lengths: np.ndarray) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values))


def build_table(input_ids: np.ndarray, length: np.ndarray, doc_starts: list[np.ndarray],
                positions: list[list[np.ndarray]], tokens: list[list[np.ndarray]], schema: pa.Schema) -> pa.Table:
    """Columns from per-row lists of K variant arrays (see `build_table_flat`)."""
    flat_pos = [p for row in positions for p in row]
    flat_tok = [t for row in tokens for t in row]
    return build_table_flat(
        input_ids, length, doc_starts,
        np.concatenate(flat_pos).astype(np.int16) if flat_pos else np.zeros(0, np.int16),
        np.concatenate(flat_tok).astype(np.int32) if flat_tok else np.zeros(0, np.int32),
        np.array([len(p) for p in flat_pos], np.int64), np.array([len(p) for p in positions], np.int64), schema)


def build_table_flat(input_ids: np.ndarray, length: np.ndarray, doc_starts: list[np.ndarray], positions: np.ndarray,
                     tokens: np.ndarray, per_variant: np.ndarray, per_row: np.ndarray, schema: pa.Schema) -> pa.Table:
    """Columns from flat buffers and offsets (no per-element Python objects): positions and tokens
    in (row, variant) order, per_variant[j] the size of variant j, per_row[i] row i's variants."""
    rows, seq_len = input_ids.shape
    columns = [
        _lists(input_ids.reshape(-1).astype(np.int32), np.full(rows, seq_len)),
        pa.array(length.astype(np.int32)),
        _lists(np.concatenate(doc_starts).astype(np.int32) if doc_starts else np.zeros(0, np.int32),
               np.array([len(d) for d in doc_starts], np.int64)),
        _lists(_lists(positions.astype(np.int16), per_variant), per_row),
        _lists(_lists(tokens.astype(schema.field("mask_tokens").type.value_type.value_type.to_pandas_dtype()),
                      per_variant), per_row),
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def group_table(ids: Sequence[Sequence[int]], words: Sequence[Sequence[bool]] | None, spec: ShardSpec,
                vocab: MaskVocab, cfg: MaskConfig, mask_shard: int) -> tuple[pa.Table, dict[str, int]]:
    """The group's rows, masked, and counts (documents, empty documents, rows, tokens, masked positions)."""
    packed = pack(ids, spec.seq_len, spec.frame, spec.pad_id, spec.packing, words)
    block = BLOCK_MASKERS.get(cfg.objective)
    if block is not None:  # the whole group in a few numpy calls
        check_vocab(cfg, vocab)
        pos, tok, per_variant = block(packed.input_ids, packed.length, vocab, cfg, mask_shard, np.arange(packed.rows))
        table = build_table_flat(packed.input_ids, packed.length, packed.doc_starts, pos, tok, per_variant,
                                 np.full(packed.rows, cfg.num_variants, np.int64), spec.schema)
        masked = int(pos.size)
    else:
        positions, tokens = [], []
        masked = 0
        for r in range(packed.rows):
            ws = packed.word_starts[r] if packed.word_starts is not None else None
            pos, tok = mask_variants(packed.input_ids[r], int(packed.length[r]), vocab, cfg, mask_shard, r,
                                     word_starts=ws)
            positions.append(pos)
            tokens.append(tok)
            masked += sum(len(p) for p in pos)
        table = build_table(packed.input_ids, packed.length, packed.doc_starts, positions, tokens, spec.schema)
    empty = sum(1 for d in ids if not len(d))
    counts = {"documents": len(ids) - empty, "empty_documents": empty, "rows": packed.rows,
              "tokens": int(packed.length.sum()), "masked_positions": masked}
    return table, counts


def shard_setup(tok: Any, seq_len: int, cfg: MaskConfig, packing: str) -> tuple[ShardSpec, MaskVocab]:
    """What every group of a run shares, from the tokenizer and the config."""
    ids = special_ids(tok)
    meta = shard_meta(ids, seq_len, cfg, packing, tok.get_vocab_size())
    spec = ShardSpec(seq_len, frame_for(ids, cfg.objective), meta.pad_id, packing, meta.schema())
    return spec, MaskVocab.from_special_ids(ids, tok.get_vocab_size())


@contextmanager
def tokenizer_threads() -> Iterator[None]:
    """HF tokenizers' Rust thread pool on for the calls inside, whatever TOKENIZERS_PARALLELISM says.

    The lmforge CLI sets TOKENIZERS_PARALLELISM=false process-wide, so that no process forks
    while the pool is live (a forked child that used it could deadlock). Encoding a shard
    group is one large `encode_batch` that forks nothing; with the pool it uses every core
    instead of one. tokenizers reads the variable at each call, so setting it around the call
    is enough, and the old value is back afterwards."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def encode(tok: Any, texts: list[str], with_words: bool) -> tuple[list[list[int]], list[np.ndarray] | None]:
    """Token ids of each text without special tokens (a `tokenizers.Tokenizer` set up by `load_tokenizer`),
    and the word starts when asked; on every core (`tokenizer_threads`)."""
    with tokenizer_threads():
        if with_words:
            encs = tok.encode_batch(texts, add_special_tokens=False)
            return [e.ids for e in encs], [word_starts(e.word_ids) for e in encs]
        # encode_batch_fast skips character offsets (and so word ids): ~30% less time here
        fast = getattr(tok, "encode_batch_fast", tok.encode_batch)
        return [e.ids for e in fast(texts, add_special_tokens=False)], None


def load_tokenizer(tokenizer_json: str | Path) -> Any:
    """The tokenizer stage's `tokenizers.Tokenizer`, encoding whole documents with no added specials."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(storage.read_text(tokenizer_json)) if storage.is_remote(tokenizer_json) \
        else Tokenizer.from_file(str(tokenizer_json))
    tok.no_padding()
    tok.no_truncation()
    # A page that contains the text "[SEP]" or "</s>" must not produce the special token.
    tok.encode_special_tokens = True
    return tok


CHECK_EVERY = 64
"""`DocEncoder` re-encodes every CHECK_EVERY-th document of a group with HF tokenizers and compares."""


ENCODE_CHUNK = 2048
"""Documents the word cache encodes at once: only their words are Python strings at a time."""


class DocEncoder:
    """A group's documents -> token ids per document (no special tokens) and word starts when asked.

    With `fast` (the default) and a tokenizer `fast_encode.WordCacheEncoder` can reproduce (BERT's
    pre-tokenizer, Metaspace or GPT-2's ByteLevel: all four families of the tokenizer stage), the
    ids come from its word cache, on one core in less time than `encode_batch` takes on every
    core; otherwise from `encode`. Every `check_every`-th document of each group (0 turns this
    off) is encoded again by HF tokenizers, and a difference stops the run with the document's
    id, so a wrong id never reaches a shard silently."""

    def __init__(self, tok: Any, fast: bool = True, check_every: int = CHECK_EVERY):
        from pipelines.shards.fast_encode import WordCacheEncoder, why_not

        self.tok, self.check_every = tok, check_every
        self.cache = WordCacheEncoder.for_tokenizer(tok) if fast else None
        self.why_slow = None if self.cache is not None else ("fast_encode is off" if not fast else why_not(tok))
        self.checked = 0

    def __call__(self, texts: list[str], with_words: bool, names: Sequence[str] | None = None
                 ) -> tuple[Sequence[np.ndarray | list[int]], list[np.ndarray] | None]:
        if self.cache is None:
            return encode(self.tok, texts, with_words)
        parts = [self.cache.encode(texts[a:a + ENCODE_CHUNK], with_words) for a in range(0, len(texts), ENCODE_CHUNK)]
        if not parts:
            return [], [] if with_words else None
        flat = np.concatenate([p[0] for p in parts])
        lens = np.concatenate([p[1] for p in parts])
        starts = np.concatenate([p[2] for p in parts]) if with_words else None
        cuts = np.cumsum(lens)[:-1]
        ids = np.split(flat, cuts)
        words = np.split(starts, cuts) if starts is not None else None
        if self.check_every:
            self.check(texts, ids, words, names)
        return ids, words

    def check(self, texts: list[str], ids: Sequence[np.ndarray], words: list[np.ndarray] | None,
              names: Sequence[str] | None) -> None:
        """HF tokenizers' ids (and word starts) for every `check_every`-th text must equal the cache's."""
        picked = list(range(0, len(texts), self.check_every))
        want, want_words = encode(self.tok, [texts[i] for i in picked], words is not None)
        for n, i in enumerate(picked):
            same = np.array_equal(ids[i], want[n]) and (words is None or np.array_equal(words[i], want_words[n]))
            if not same:
                got, ref = ids[i].tolist(), list(want[n])
                name = names[i] if names is not None else f"#{i}"
                if got == ref:
                    what = "the same ids but different word starts"
                else:
                    at = next((j for j, (a, b) in enumerate(zip(got, ref)) if a != b), min(len(got), len(ref)))
                    what = f"token {at}: {got[at:at + 5]} vs HF {ref[at:at + 5]}"
                raise RuntimeError(f"shards: the word-cache encoder and HF tokenizers disagree on document {name} "
                                   f"({what}); please report it, and rerun with --no-fast-encode")
        self.checked += len(picked)


def replay_mask(ids: list[str], fraction: float) -> list[bool]:
    """Which documents of an earlier corpus a replay takes: sha1("replay:" + id) below `fraction` of
    the hash space, so a document is in or out on every run, whatever file or order it comes in."""
    import hashlib

    cut = int(fraction * (1 << 32))
    return [int.from_bytes(hashlib.sha1(b"replay:" + i.encode()).digest()[:4], "big") < cut for i in ids]


def sample_batch(table: pa.Table, fraction: float) -> pa.Table:
    return table.filter(pa.array(replay_mask(table.column("id").to_pylist(), fraction)))


def key_batch(table: pa.Table, num_shards: int, valid_per_mille: int) -> Iterator[tuple[tuple[str, int], bytes]]:
    """A batch of corpus rows (id, text) cut into its (split, shard) groups, each as one zstd-compressed
    Arrow IPC stream: the shuffle then moves a few compact byte strings per batch, not a Python
    object per document (at 100x the demo corpus, 7.6 s of Beam data movement instead of 14 s)."""
    from pipelines.io import shard_of

    keys: dict[tuple[str, int], list[int]] = {}
    for i, doc_id in enumerate(table.column("id").to_pylist()):
        split = split_of(doc_id, valid_per_mille)
        keys.setdefault((split, shard_of(doc_id, num_shards if split == "train" else 1)), []).append(i)
    for key, rows in sorted(keys.items()):
        part = table.take(pa.array(rows, pa.int64())).select(["id", "text"])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, part.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_table(part)
        yield key, sink.getvalue().to_pybytes()


def sorted_docs(docs: Iterable[Mapping[str, Any]] | Iterable[bytes]) -> tuple[list[str], list[str]]:
    """(ids, texts) of a group in id order, from documents or from `key_batch`'s Arrow streams."""
    docs = list(docs)
    if docs and isinstance(docs[0], bytes):
        table = pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in docs])
        names, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
    else:
        names, texts = [d["id"] for d in docs], [d["text"] for d in docs]
    order = sorted(range(len(names)), key=names.__getitem__)
    return [names[i] for i in order], [texts[i] for i in order]


def write_group(out: str | Path, split: str, shard: int, docs: Iterable[Mapping[str, Any]] | Iterable[bytes],
                enc: DocEncoder, spec: ShardSpec,
                vocab: MaskVocab, cfg: MaskConfig, target_bytes: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Encode, pack and mask one (split, shard) group in id order and write its files atomically.
    `docs` are the group's documents ({"id", "text"}) or `key_batch`'s Arrow streams of them.

    Returns one record per file written and the group's counts.
    """
    names, texts = sorted_docs(docs)
    ids, words = enc(texts, needs_words(cfg.objective), names)
    mask_shard = shard + (0 if split == "train" else VALID_SHARD_OFFSET)
    table, counts = group_table(ids, words, spec, vocab, cfg, mask_shard)
    files = []
    for part, data in enumerate(split_parts(table, target_bytes)):
        rel = shard_file_name(split, shard, part)
        atomic_write_bytes(storage.join(out, rel), data)
        files.append({"path": rel, "split": split, "shard": shard, "part": part, "bytes": len(data)})
    return files, counts
