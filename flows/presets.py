"""Named DAG presets: per-stage options, as plain functions (torchtitan style).

`demo()` is sized for the bundled sample on 2 CPU cores (under 15 minutes end to end);
`tiny()` for the end-to-end test on tests/data/tiny (a minute or two).
"""
from __future__ import annotations

from typing import Any


def demo() -> dict[str, dict[str, Any]]:
    return {
        "corpus": {"num_shards": 2},
        "tokenizer": {"vocab_size": 8000},
        # 128 tokens/row, 10 mask variants (BERT's dupe factor)
        "shards": {"seq_len": 128, "num_shards": 2, "valid_per_mille": 50},
        # 2 procs x 16 rows x 128 tokens = 4,096 tokens/step
        "pretrain": {"model": "demo", "epochs": 6, "micro_batch_size": 16, "lr": 1e-3, "log_every": 20},
        "finetune": {"epochs": 2, "batch_size": 32, "lr": 1e-4},
        "distill": {"epochs": 2, "batch_size": 16},
        "evaluate": {},
    }


def tiny() -> dict[str, dict[str, Any]]:
    return {
        "corpus": {"num_shards": 1},
        "tokenizer": {"vocab_size": 1500},
        "shards": {"seq_len": 64, "num_shards": 2, "valid_per_mille": 150, "mask_num_variants": 3},
        "pretrain": {"model": "tiny", "steps": 30, "micro_batch_size": 8, "lr": 2e-3, "log_every": 10, "eval_batches": 2},
        "finetune": {"epochs": 1, "max_train": 600, "batch_size": 32, "lr": 3e-4},
        "distill": {"steps": 10, "batch_size": 8},
        "evaluate": {"max_batches": 4},
    }


PRESETS = {"demo": demo, "tiny": tiny}
