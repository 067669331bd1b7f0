"""Batches of token shards, one builder per objective (the loader, training.pretraining.data.RankLoader, picks the rows).

mlm, whole_word and span give input_ids, attention_mask and labels (-100 outside masked positions); t5_span gives
the encoder's input_ids and attention_mask, labels (the target, -100 padding) and decoder_input_ids (labels
shifted right, pad first, as HF T5 does); causal gives input_ids, attention_mask and labels = input_ids with -100
at padding (the model shifts them). Under `document` attention a batch also carries `doc_ids` and `position_ids`
(training.models.attention). `MlmView` is the fast path for MLM shards: numpy views of the memory-mapped buffers.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from schemas.objectives import objective as objective_record
from schemas.shards import ShardMeta
from training.models.attention import document_ids

IGNORE_INDEX = -100
"""Label for positions that carry no loss (torch CrossEntropyLoss's default ignore_index)."""


def build_batch(table: pa.Table, rows: np.ndarray, variant: int, *, objective: str | None = None) -> dict[str, torch.Tensor]:
    """The batch of `rows` with mask variant `variant`, for the objective in the table's metadata
    (or `objective`); see the module docstring for what each objective's batch holds."""
    meta = ShardMeta.from_schema(table.schema)
    objective = objective or meta.objective
    sub = table.take(pa.array(rows, type=pa.int64()))
    ids = pc.list_flatten(sub["input_ids"]).to_numpy().astype(np.int64).reshape(sub.num_rows, -1)
    lengths = sub["length"].to_numpy()
    attention = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
    kind = objective_record(objective).model_kind
    if kind not in BATCHES:
        raise ValueError(f"no batches for objective {objective!r} (model kind {kind})")
    out = BATCHES[kind](sub, ids, lengths, attention, variant, meta, rows)
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}


def _masked_lm_batch(sub, ids, lengths, attention, variant, meta, rows) -> dict[str, np.ndarray]:
    inputs, labels = _mlm(sub, ids, variant)
    return {"input_ids": inputs, "attention_mask": attention, "labels": labels}


def _causal_lm_batch(sub, ids, lengths, attention, variant, meta, rows) -> dict[str, np.ndarray]:
    return {"input_ids": ids, "attention_mask": attention, "labels": np.where(attention == 1, ids, IGNORE_INDEX)}


def _seq2seq_batch(sub, ids, lengths, attention, variant, meta, rows) -> dict[str, np.ndarray]:
    return _t5(sub, ids, lengths, variant, meta, rows)


BATCHES = {"masked_lm": _masked_lm_batch, "causal_lm": _causal_lm_batch, "seq2seq": _seq2seq_batch}
"""Per model kind (schemas.objectives `model_kind`): the batch of a table's rows, as numpy arrays."""


def _variant(sub: pa.Table, variant: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row of each stored position, positions, tokens) of one variant, flat over the batch."""
    pos_lists = pc.list_element(sub["mask_positions"], variant)
    positions = pc.list_flatten(pos_lists).to_numpy().astype(np.int64)
    tokens = pc.list_flatten(pc.list_element(sub["mask_tokens"], variant)).to_numpy().astype(np.int64)
    row_of = np.repeat(np.arange(sub.num_rows), pc.list_value_length(pos_lists).to_numpy())
    return row_of, positions, tokens


def _mlm(sub: pa.Table, ids: np.ndarray, variant: int) -> tuple[np.ndarray, np.ndarray]:
    """Replacements placed at the variant's positions; labels the original ids there, IGNORE_INDEX elsewhere."""
    row_of, positions, replacements = _variant(sub, variant)
    labels = np.full_like(ids, IGNORE_INDEX)
    labels[row_of, positions] = ids[row_of, positions]
    inputs = ids.copy()
    inputs[row_of, positions] = replacements
    return inputs, labels


class MlmView:
    """Batches of MLM shards straight from the memory-mapped buffers: numpy views of each record
    batch's input_ids, lengths and the flat mask lists, so a batch is a few fancy-indexing calls
    instead of an Arrow `take` over every column (all K variants included). `batch` gives what
    `build_batch` gives, tensor for tensor; it is the loader's path for mlm, whole_word and span."""

    def __init__(self, table: pa.Table, documents: bool = False):
        self.chunks: list[tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...], tuple[np.ndarray, ...]]] = []
        self.doc_starts: list[tuple[np.ndarray, np.ndarray]] | None = [] if documents else None
        """Per record batch: doc_starts' offsets and values, when batches carry `document` attention's ids."""
        starts = [0]
        for rb in table.to_batches():
            if rb.num_rows == 0:
                continue
            ids = rb.column("input_ids")
            flat = ids.values.to_numpy()  # absolute offsets below, so a sliced batch is fine
            off = ids.offsets.to_numpy()
            seq_len = int(off[1] - off[0])
            ids2d = flat[off[0]:off[-1]].reshape(rb.num_rows, seq_len)
            pos, tok = rb.column("mask_positions"), rb.column("mask_tokens")
            # each column with its own offsets: equal lengths are checked on open, equal buffers are not
            self.chunks.append((ids2d, rb.column("length").to_numpy(),
                                (pos.offsets.to_numpy(), pos.values.offsets.to_numpy(), pos.values.values.to_numpy()),
                                (tok.offsets.to_numpy(), tok.values.offsets.to_numpy(), tok.values.values.to_numpy())))
            if self.doc_starts is not None:
                ds = rb.column("doc_starts")
                self.doc_starts.append((ds.offsets.to_numpy(), ds.values.to_numpy()))
            starts.append(starts[-1] + rb.num_rows)
        self.starts = np.array(starts, np.int64)
        if self.starts[-1] != table.num_rows:
            raise ValueError(f"MlmView: {self.starts[-1]} rows in the record batches, {table.num_rows} in the table")

    def batch(self, rows: np.ndarray, variant: int) -> dict[str, torch.Tensor]:
        rows = np.asarray(rows, np.int64)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        seq_len = self.chunks[0][0].shape[1]
        ids = np.empty((len(rows), seq_len), np.int64)
        lengths = np.empty(len(rows), np.int64)
        row_of, positions, tokens = [], [], []
        doc_row, doc_at = [], []
        for c in np.unique(which):
            at = np.flatnonzero(which == c)
            local = rows[at] - self.starts[c]
            ids2d, length, pos, tok = self.chunks[c]
            ids[at] = ids2d[local]
            lengths[at] = length[local]
            if self.doc_starts is not None:
                off, values = self.doc_starts[c]
                s, e = off[local], off[local + 1]
                n = e - s
                doc_row.append(np.repeat(at, n))
                doc_at.append(values[np.arange(n.sum()) + np.repeat(s - np.concatenate([[0], np.cumsum(n)[:-1]]), n)]
                              .astype(np.int64))
            n = None
            for (outer, inner, values), into in ((pos, positions), (tok, tokens)):
                j = outer[local] + variant  # this variant's list among all (row, variant) lists
                s, e = inner[j], inner[j + 1]
                n = e - s
                into.append(values[np.arange(n.sum()) + np.repeat(s - np.concatenate([[0], np.cumsum(n)[:-1]]), n)]
                            .astype(np.int64))
            row_of.append(np.repeat(at, n))
        row_of, positions, tokens = np.concatenate(row_of), np.concatenate(positions), np.concatenate(tokens)
        labels = np.full_like(ids, IGNORE_INDEX)
        labels[row_of, positions] = ids[row_of, positions]
        inputs = ids.copy()
        inputs[row_of, positions] = tokens
        attention = (np.arange(seq_len)[None, :] < lengths[:, None]).astype(np.int64)
        out = {"input_ids": torch.from_numpy(inputs), "attention_mask": torch.from_numpy(attention),
               "labels": torch.from_numpy(labels)}
        if self.doc_starts is not None:
            doc, pos_ids = document_ids((np.concatenate(doc_row), np.concatenate(doc_at)), lengths, seq_len)
            out.update(doc_ids=torch.from_numpy(doc), position_ids=torch.from_numpy(pos_ids))
        return out

    def most_masks_per_row(self) -> int:
        """The most masked positions any row has in any variant (fixes SparseMLM's head shape under compile)."""
        most = 0
        for _, _, (outer, inner, _), _ in self.chunks:
            counts = np.diff(inner[outer[0]:outer[-1] + 1])
            most = max(most, int(counts.max()) if len(counts) else 0)
        return most


def t5_example(ids: np.ndarray, positions: np.ndarray, tokens: np.ndarray, eos_id: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(encoder ids, target ids) of one unpadded row: each noise span becomes its sentinel in the
    encoder; the target is sentinel_0 span_0 sentinel_1 span_1 ... then eos (if any)."""
    first = tokens >= 0
    keep = np.ones(len(ids), bool)
    keep[positions[~first]] = False
    encoder = ids.copy()
    encoder[positions[first]] = tokens[first]
    target = np.insert(ids[positions], np.flatnonzero(first), tokens[first])
    if eos_id is not None:
        target = np.append(target, eos_id)
    return encoder[keep], target


def _t5(sub: pa.Table, ids: np.ndarray, lengths: np.ndarray, variant: int, meta: ShardMeta,
        rows: np.ndarray) -> dict[str, np.ndarray]:
    """Encoder inputs padded with pad to max_encoder_len, labels with IGNORE_INDEX to max_target_len,
    decoder_input_ids = labels shifted right with pad as the start token (HF T5's _shift_right)."""
    enc_len, tgt_len = meta.max_encoder_len or ids.shape[1], meta.max_target_len
    if tgt_len is None:
        raise ValueError("t5_span shards lack lmforge.max_target_len in their schema metadata")
    row_of, positions, tokens = _variant(sub, variant)
    cuts = np.searchsorted(row_of, np.arange(sub.num_rows + 1))
    b = sub.num_rows
    inputs = np.full((b, enc_len), meta.pad_id, np.int64)
    attention = np.zeros((b, enc_len), np.int64)
    labels = np.full((b, tgt_len), IGNORE_INDEX, np.int64)
    for i in range(b):
        s = slice(cuts[i], cuts[i + 1])
        enc, tgt = t5_example(ids[i, : lengths[i]], positions[s], tokens[s], meta.eos_id)
        if len(enc) > enc_len or len(tgt) > tgt_len:
            raise ValueError(f"table row {int(rows[i])}: t5 encoder {len(enc)} / target {len(tgt)} tokens exceed "
                             f"the shards' bounds {enc_len} / {tgt_len}")
        inputs[i, : len(enc)], attention[i, : len(enc)], labels[i, : len(tgt)] = enc, 1, tgt
    decoder = np.concatenate([np.full((b, 1), meta.pad_id, np.int64), labels[:, :-1]], axis=1)
    decoder[decoder == IGNORE_INDEX] = meta.pad_id
    return {"input_ids": inputs, "attention_mask": attention, "labels": labels, "decoder_input_ids": decoder}


def with_documents(batch: dict[str, torch.Tensor], table: pa.Table, rows: np.ndarray) -> dict[str, torch.Tensor]:
    """A causal batch plus `document` attention's `doc_ids` and `position_ids` (training.models.attention)."""
    sub = table.take(pa.array(rows, type=pa.int64()))
    starts = [np.asarray(s, np.int64) for s in sub["doc_starts"].to_pylist()]
    doc, pos = document_ids(starts, sub["length"].to_numpy(), batch["input_ids"].shape[1])
    return {**batch, "doc_ids": torch.from_numpy(doc), "position_ids": torch.from_numpy(pos)}


