"""`document` attention (training.models.attention): a packed row computes what its documents compute alone."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from training.models.attention import PAD_DOC, document_ids, document_mask
from training.models.model import SparseMLM, bert_config, build_model, preset

VOCAB = 300


def test_document_ids_and_positions():
    # row 0: a continued document (3 tokens), then documents at 3 and 7, padding from 10
    # row 1: one document from 0; row 2: no start at all (continues a document), full length
    doc, pos = document_ids([np.array([3, 7]), np.array([0]), np.array([], np.int64)], np.array([10, 12, 12]), 12)
    assert doc[0].tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, PAD_DOC, PAD_DOC]
    assert pos[0].tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 0, 0]
    assert doc[1].tolist() == [1] * 12 and pos[1].tolist() == list(range(12))
    assert doc[2].tolist() == [0] * 12 and pos[2].tolist() == list(range(12))


def _model(kind: str = "sdpa") -> SparseMLM:
    torch.manual_seed(0)
    m = dataclasses.replace(preset("tiny"), dropout=0.0)
    cfg = bert_config(m, VOCAB, 0, 64)
    cfg._attn_implementation = "flex_attention" if kind == "flex" else "sdpa"
    module = SparseMLM(build_model(cfg)).eval()
    module.attention_kernel = kind
    return module


def _hidden(module: SparseMLM, ids, mask, positions=None, doc=None):
    m = mask if doc is None else document_mask(doc, module.attention_kernel)
    with torch.no_grad():
        return module.mlm.base_model(input_ids=ids, attention_mask=m, position_ids=positions).last_hidden_state


@pytest.mark.parametrize("kind", ["sdpa", "flex"])
def test_packed_row_equals_its_documents_alone(kind):
    module = _model(kind)
    g = torch.Generator().manual_seed(1)
    docs = [torch.randint(5, VOCAB, (n,), generator=g) for n in (9, 14, 5)]
    seq = 32
    row = torch.zeros(1, seq, dtype=torch.long)
    row[0, :28] = torch.cat(docs)
    doc, pos = document_ids([np.array([0, 9, 23])], np.array([28]), seq)
    packed = _hidden(module, row, (row != 0).long(), torch.from_numpy(pos), torch.from_numpy(doc))
    start = 0
    for d in docs:
        alone = _hidden(module, d[None], torch.ones(1, len(d), dtype=torch.long))
        torch.testing.assert_close(packed[0, start:start + len(d)], alone[0], rtol=1e-5, atol=1e-5)
        start += len(d)
    # under row attention the same row mixes the documents: the first one's states change
    mixed = _hidden(module, row, (row != 0).long())
    assert (mixed[0, :9] - _hidden(module, docs[0][None], torch.ones(1, 9, dtype=torch.long))[0]).abs().max() > 1e-3


def test_row_without_doc_starts_is_row_attention():
    """A row that continues one document (no start in it) under document attention computes what row attention
    computes: same mask over the real tokens, positions 0..n-1."""
    module = _model()
    g = torch.Generator().manual_seed(2)
    row = torch.randint(5, VOCAB, (2, 24), generator=g)
    row[1, 20:] = 0
    lengths = np.array([24, 20])
    doc, pos = document_ids([np.array([], np.int64), np.array([], np.int64)], lengths, 24)
    a = _hidden(module, row, (row != 0).long(), torch.from_numpy(pos), torch.from_numpy(doc))
    b = _hidden(module, row, (row != 0).long())
    torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a[1, :20], b[1, :20], rtol=1e-5, atol=1e-5)


def test_sparse_mlm_forward_takes_document_batches():
    """The training module's forward with the loader's doc_ids/position_ids gives a finite loss, different from
    row attention's on a row of several documents."""
    module = _model()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, VOCAB, (2, 32), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, ::5] = ids[:, ::5]
    doc, pos = document_ids([np.array([0, 10, 20]), np.array([4])], np.array([32, 32]), 32)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    with torch.no_grad():
        row = module(**batch)
        document = module(**batch, doc_ids=torch.from_numpy(doc), position_ids=torch.from_numpy(pos))
    assert torch.isfinite(document) and abs(row.item() - document.item()) > 1e-4


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_a_decoders_packed_documents_compute_what_they_compute_alone(family):
    """Causal `document` attention on the decoders causal shards train (the Llama-style default and GPT-2): each
    document of a packed row gets the logits it gets alone, where row attention lets the second see the first."""
    from training.models.model import build_for_objective

    torch.manual_seed(0)
    m = dataclasses.replace(preset("tiny"), dropout=0.0, family=family)
    module = build_for_objective("causal", m, VOCAB, 0, 2, 64).eval()
    assert type(module.hf).__name__ == {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel"}[family]
    g = torch.Generator().manual_seed(4)
    docs = [torch.randint(5, VOCAB, (1, n), generator=g) for n in (9, 14)]
    row = torch.cat(docs, dim=1)
    doc, pos = document_ids([np.array([0, 9])], np.array([23]), 23)
    with torch.no_grad():
        packed = module.hf(input_ids=row, attention_mask=document_mask(torch.from_numpy(doc), causal=True),
                           position_ids=torch.from_numpy(pos)).logits
        alone = [module.hf(input_ids=d).logits for d in docs]
        mixed = module.hf(input_ids=row).logits
    torch.testing.assert_close(packed[0, :9], alone[0][0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(packed[0, 9:], alone[1][0], rtol=1e-4, atol=1e-4)
    assert (mixed[0, 9:] - alone[1][0]).abs().max() > 1e-3
