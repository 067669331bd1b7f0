"""An ablation for bench learn: the HF Trainer (bench.train.hf_trainer) fed lmforge's precomputed masks instead of
fresh ones.

    python -m bench.train.learn_masks <bench.train.hf_trainer's arguments>
    python -m bench.train.learn_masks --fixed-count <bench.train.hf_trainer's arguments>

lmforge masks each row K times when it writes the shards (exactly round(15%) of the row's maskable tokens, 80/10/10,
random ids drawn outside the special tokens) and trains on variant k at the row's k-th visit (epoch % K); the
Trainer's `DataCollatorForLanguageModeling` draws a Bernoulli(15%) mask afresh every batch. This runs bench.train.hf_trainer
unchanged but for the collator: `PrecomputedMasks` looks each row up in the shards and returns its stored variant for
that visit, so the two systems differ in their training loops only. If the Trainer with these masks lands where
lmforge does, the masks explain a gap between them; if it lands where the plain Trainer does, they do not.

`--fixed-count` (`FixedCountMasks`) splits the masks' two differences: masks drawn afresh at every visit as the
collator does (80/10/10, random ids from the whole vocabulary, seeded by the training seed), but exactly round(15%)
of a row's non-special tokens, as lmforge and Google's BERT mask, instead of a Bernoulli(15%) draw per token.
"""
from __future__ import annotations

import sys
from typing import Any


class PrecomputedMasks:
    """A data collator: each row's stored mask variants in turn (visit k: variant k % K), padded to the row length."""

    def __init__(self, tokenizer: Any = None, mlm: bool = True, mlm_probability: float = 0.15, **_: Any):
        self.table = self.rows = None
        self.visits: dict[int, int] = {}

    def attach(self, shards_dir: str) -> None:
        from training.pretraining.shard_set import ShardSet

        shards = ShardSet.open(shards_dir)
        self.table, self.k = shards.read("train"), max(1, shards.num_variants)
        ids, lengths = self.table.column("input_ids").to_pylist(), self.table.column("length").to_pylist()
        # the Trainer hands the collator the rows' ids (bench.train.hf_trainer cuts each at its length): find each row by them
        self.rows = {tuple(r[:n]): i for i, (r, n) in enumerate(zip(ids, lengths))}

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import numpy as np
        import torch

        from training.pretraining.batches import build_batch

        parts = []
        for e in examples:
            row = self.rows[tuple(e["input_ids"])]
            visit = self.visits.get(row, 0)
            self.visits[row] = visit + 1
            parts.append(build_batch(self.table, np.array([row]), visit % self.k))
        return {key: torch.cat([p[key] for p in parts]) for key in ("input_ids", "attention_mask", "labels")}


class FixedCountMasks(PrecomputedMasks):
    """Fresh masks at every visit, exactly round(rate x maskable tokens) of them (at least one), 80/10/10 as the
    collator draws them (random ids from the whole vocabulary)."""

    def __init__(self, tokenizer: Any, seed: int, rate: float = 0.15):
        super().__init__()
        self.tok, self.seed, self.rate = tokenizer, seed, rate
        self.special = sorted(set(tokenizer.all_special_ids))

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import numpy as np
        import torch

        width = max(len(e["input_ids"]) for e in examples)
        ids = np.full((len(examples), width), self.tok.pad_token_id, np.int64)
        labels = np.full_like(ids, -100)
        attention = np.zeros_like(ids)
        for i, e in enumerate(examples):
            row_ids = np.asarray(e["input_ids"], np.int64)
            row = self.rows[tuple(e["input_ids"])]
            visit = self.visits.get(row, 0)
            self.visits[row] = visit + 1
            rng = np.random.default_rng([self.seed, row, visit])
            maskable = np.flatnonzero(~np.isin(row_ids, self.special))
            pos = rng.choice(maskable, min(len(maskable), max(1, round(self.rate * len(maskable)))), replace=False)
            n = len(row_ids)
            ids[i, :n], attention[i, :n] = row_ids, 1
            labels[i, pos] = row_ids[pos]
            draw = rng.random(len(pos))
            ids[i, pos[draw < 0.8]] = self.tok.mask_token_id
            swap = pos[(draw >= 0.8) & (draw < 0.9)]
            ids[i, swap] = rng.integers(len(self.tok), size=len(swap))
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(attention),
                "labels": torch.from_numpy(labels)}


def main(argv: list[str] | None = None) -> int:
    import transformers

    from bench.train import hf_trainer

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--fixed-count" in argv:
        argv.remove("--fixed-count")
        tok = transformers.AutoTokenizer.from_pretrained(argv[argv.index("--tokenizer") + 1])
        collator = FixedCountMasks(tok, int(argv[argv.index("--seed") + 1]))
    else:
        collator = PrecomputedMasks()
    collator.attach(argv[argv.index("--shards") + 1])
    transformers.DataCollatorForLanguageModeling = lambda *a, **k: collator  # hf_trainer imports it at call time
    return hf_trainer.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
