"""Pseudo-perplexity of a masked LM (Salazar et al. 2020, "Masked Language Model Scoring"), and the
within-word left-to-right variant of Kauf & Ivanova 2023 ("A Better Way to Do Masked Language Model
Scoring").

PLL(S) = sum over the sentence's tokens t of log P(w_t | S with w_t masked); PPPL = exp(-sum PLL / N)
over N scored tokens of all sentences. Scoring a token with the rest of its word visible inflates the
score of multi-token words (the other pieces give it away); PLL-word-l2r also masks the tokens to the
right of t within the same word. Special tokens are context, never scored. One forward pass per
scored token, batched per sentence.
"""
from __future__ import annotations

import math
from typing import Any


def sentence_pll(model, tok, sentence: str, variant: str, max_length: int) -> tuple[float, int]:
    """(sum of log-probabilities, tokens scored) of one sentence."""
    import torch

    enc = tok(sentence, truncation=True, max_length=max_length, return_tensors="pt")
    ids = enc["input_ids"][0]
    words = enc.word_ids(0)
    positions = [i for i, w in enumerate(words) if w is not None]
    if not positions:
        return 0.0, 0
    batch = ids.repeat(len(positions), 1)
    for row, t in enumerate(positions):
        batch[row, t] = tok.mask_token_id
        if variant == "word_l2r":
            for u in range(t + 1, len(words)):
                if words[u] != words[t]:
                    break
                batch[row, u] = tok.mask_token_id
    with torch.inference_mode():
        logits = model(input_ids=batch, attention_mask=torch.ones_like(batch)).logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    rows = torch.arange(len(positions))
    cols = torch.tensor(positions)
    return float(logp[rows, cols, ids[cols]].sum()), len(positions)


def pseudo_perplexity(model, tok, sentences: list[str], max_length: int = 64) -> dict[str, Any]:
    if tok.mask_token_id is None:
        raise ValueError("pseudo-perplexity needs a tokenizer with a mask token (a masked LM's)")
    if not getattr(tok, "is_fast", False):
        raise ValueError("pseudo-perplexity's word-l2r variant needs a fast tokenizer (word ids)")
    model.eval()
    out: dict[str, Any] = {"sentences": len(sentences)}
    for variant in ("original", "word_l2r"):
        total, n = 0.0, 0
        for s in sentences:
            ll, k = sentence_pll(model, tok, s, variant, max_length)
            total, n = total + ll, n + k
        if not n:
            raise ValueError("pseudo-perplexity: no tokens to score in the sentences given")
        out[variant] = {"pppl": round(math.exp(min(-total / n, 50)), 2), "tokens": n}
    return out
