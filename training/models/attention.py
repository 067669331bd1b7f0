"""Attention within a packed row: over the whole row (`row`), or only within each document (`document`).

The shards stage packs documents back to back into fixed-length rows and records where each one starts
(`doc_starts`, schemas/shards.py). Under `row` attention a token sees the whole row, documents it has nothing
to do with included; under `document` it sees only the tokens of its own document, and position ids restart
at each document start, so a packed row computes what its documents would compute each alone (the test:
tests/unit/test_attention.py). A row's tokens before its first start continue a document from the previous
row: they form one document, numbered from position 0.

    ids, positions = document_ids(starts, lengths, seq_len)      # numpy, in the loader (training.pretraining.data)
    mask = document_mask(torch.from_numpy(ids), kernel="sdpa")   # on the device, inside the model's forward

Kernels: on the CPU, and wherever FlexAttention is missing, SDPA with a dense (rows, 1, seq, seq) boolean mask.
On CUDA, FlexAttention with a BlockMask (transformers' `flex_attention` implementation), which skips blocks of
128 x 128 query/key pairs that are wholly masked: nothing at 128-token rows (one block), most of the work at
long rows packed with short documents.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported where a tensor is made: `lmforge pretrain` reads ATTENTION and launches workers
    import torch

ATTENTION = ("row", "document")
KERNELS = ("sdpa", "flex")
PAD_DOC = -1
"""Document id of padding: padding sees only padding (a query row with nothing to attend to would be NaN)."""


def document_ids(starts: list[np.ndarray] | tuple[np.ndarray, np.ndarray], lengths: np.ndarray,
                 seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(document id, position id) of every token of a batch of rows, both (rows, seq_len) int64.

    `starts`: each row's document starts (a list of arrays), or flat (row of each start, start) arrays. Ids count
    the starts seen so far in the row (0 for a continued document), PAD_DOC at and after `lengths`; a position
    is the distance from its document's start (from the row's start for a continued document)."""
    rows = len(lengths)
    if isinstance(starts, tuple):
        row_of, at = starts
    else:
        row_of = np.repeat(np.arange(rows), [len(s) for s in starts])
        at = np.concatenate([np.asarray(s, np.int64) for s in starts]) if rows else np.zeros(0, np.int64)
    marks = np.zeros((rows, seq_len), np.int64)
    marks[row_of, at] = 1
    doc = np.cumsum(marks, axis=1)
    col = np.arange(seq_len)
    begin = np.maximum.accumulate(np.where(marks == 1, col, 0), axis=1)
    positions = col - begin
    pad = col[None, :] >= np.asarray(lengths)[:, None]
    doc[pad] = PAD_DOC
    positions[pad] = 0
    return doc, positions


def document_mask(doc_ids: torch.Tensor, kernel: str = "sdpa", causal: bool = False):
    """The attention mask of `document` attention for SDPA (a (rows, 1, seq, seq) bool tensor, True where a query
    may attend a key) or FlexAttention (a BlockMask); pure tensor work on doc_ids' device, no host sync."""
    if kernel == "flex":
        return _flex_mask(doc_ids, causal)
    if kernel != "sdpa":
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    same = doc_ids[:, None, :, None] == doc_ids[:, None, None, :]
    if causal:
        import torch

        n = doc_ids.shape[-1]
        same = same & torch.ones(n, n, dtype=torch.bool, device=doc_ids.device).tril()
    return same


def _flex_mask(doc_ids: torch.Tensor, causal: bool):
    from torch.nn.attention.flex_attention import create_block_mask

    def same_document(b, h, q, kv):
        keep = doc_ids[b, q] == doc_ids[b, kv]
        return keep & (q >= kv) if causal else keep

    rows, n = doc_ids.shape
    return create_block_mask(same_document, rows, None, n, n, device=doc_ids.device)


def flex_available(device: torch.device) -> bool:
    """FlexAttention's fused kernel: CUDA with a torch that has it (on the CPU flex_attention runs unfused)."""
    if device.type != "cuda":
        return False
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def kernel_for(device: torch.device) -> str:
    return "flex" if flex_available(device) else "sdpa"
