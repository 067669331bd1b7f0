"""How good and how costly a model is: `lmforge evaluate` (evaluate), the model card (card and its
card_* parts), probing (probing), pseudo-perplexity (pppl) and the cost runs the card launches as
`python -m training.evaluation.resources`.

May import: common, schemas, and every training subpackage but launch and doctor.
"""
