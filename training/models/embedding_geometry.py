"""How spread out a model's token embeddings are: a pretraining run's health figure, in metrics.json.

A tied output projection pushes the rows of every token a batch does not contain along the hidden
states' shared direction, and Adam's normalised update moves a rare token's row as far per step as a
frequent one's: after a short run most rows point the same way (representation degeneration, Gao et
al. 2019). A tagger fine-tuned from such rows cannot tell rare words apart and can trail the same
model from a random start (docs/BENCHMARKS.md, the transfer section's recipe measurements).

- `mean_cosine`: the mean cosine between two different rows, over every pair (exact, from the sum of
  the unit rows: (|sum|^2 - N) / (N (N - 1))). A random start gives about 0.
- `effective_rank`: exp of the entropy of the centred matrix's normalised squared singular values
  (Roy & Vetterli 2007), out of the width.
"""
from __future__ import annotations

from typing import Any

COLLAPSED_COSINE = 0.5
"""Above this mean cosine the embeddings are reported as collapsed (a fresh model: ~0; the demo
preset after 60 CPU-minutes with tied embeddings: 0.8)."""


def embedding_geometry(weight) -> dict[str, Any]:
    import torch

    w = weight.detach().float().cpu()
    n = w.shape[0]
    unit = torch.nn.functional.normalize(w, dim=1)
    total = unit.sum(0)
    mean_cos = float((total @ total - n) / max(n * (n - 1), 1))
    sv = torch.linalg.svdvals(w - w.mean(0))
    p = sv.square() / sv.square().sum().clamp(min=1e-30)
    p = p[p > 0]
    rank = float(torch.exp(-(p * p.log()).sum()))
    return {"rows": n, "width": int(w.shape[1]), "mean_cosine": round(mean_cos, 4), "effective_rank": round(rank, 1),
            "mean_norm": round(float(w.norm(dim=1).mean()), 4), "collapsed": mean_cos > COLLAPSED_COSINE}


def geometry_line(g: dict[str, Any]) -> str:
    """One line for the log: the figures, and what to do when the rows have collapsed."""
    line = (f"token embeddings: mean cosine {g['mean_cosine']:.2f} between rows, effective rank "
            f"{g['effective_rank']:.0f} of {g['width']}")
    if g["collapsed"]:
        line += ("; they have collapsed toward one direction, and fine-tuning from them can trail a random start "
                 "(pretrain --embeddings untied keeps the input rows apart)")
    return line
