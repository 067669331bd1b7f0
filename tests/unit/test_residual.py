"""training.models.residual: LayerNorm outputs in the autocast dtype under autocast, untouched outside it."""
from __future__ import annotations

import copy

import torch
from transformers import BertConfig, BertModel

from training.models.residual import bf16_residual


def tiny_bert() -> BertModel:
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertModel(cfg).eval()


def test_residual_stream_is_bf16_under_autocast_and_unchanged_outside():
    plain = tiny_bert()
    hooked = copy.deepcopy(plain)
    assert bf16_residual(hooked) == 1 + 2 * 2  # the embeddings' LayerNorm and two per block
    ids = torch.randint(5, 64, (2, 16))
    with torch.no_grad():
        assert torch.equal(hooked(input_ids=ids).last_hidden_state, plain(input_ids=ids).last_hidden_state)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fp32_stream = plain(input_ids=ids).last_hidden_state
            bf16_stream = hooked(input_ids=ids).last_hidden_state
    assert fp32_stream.dtype == torch.float32 and bf16_stream.dtype == torch.bfloat16
    # the same computation, rounded to bf16 between the blocks: close, not equal
    assert not torch.equal(bf16_stream.float(), fp32_stream)
    torch.testing.assert_close(bf16_stream.float(), fp32_stream, atol=0.1, rtol=0.05)
    assert hooked.state_dict().keys() == plain.state_dict().keys()


def test_gradients_reach_the_fp32_weights():
    model = tiny_bert().train()
    bf16_residual(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=torch.randint(5, 64, (2, 16))).last_hidden_state.float().pow(2).mean()
    loss.backward()
    norm = model.encoder.layer[0].output.LayerNorm
    assert norm.weight.dtype == torch.float32 and norm.weight.grad is not None and norm.weight.grad.abs().sum() > 0
