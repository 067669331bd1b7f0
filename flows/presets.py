"""Named DAG presets: per-stage options, as plain functions (torchtitan style).

`demo()` is sized for a first look at the bundled sample on 2 CPU cores: every stage and every control,
`make demo` from a fresh clone in under 10 minutes, set-up included (README, "The two commands").
`full()` is the larger run on the same sample (about 10 minutes for the DAG alone): twice the
pretraining, twice the fine-tuning data, MOROCCO-sized cost runs closer to the protocol.
`tiny()` is for the end-to-end test on tests/data/tiny (a minute or two).
"""
from __future__ import annotations

from typing import Any

from schemas.objectives import objective as record


def full() -> dict[str, dict[str, Any]]:
    return {
        "corpus": {"num_shards": 2, "line_dedup": True},
        "tokenizer": {"vocab_size": 8000},
        # 128 tokens/row, 10 mask variants (BERT's dupe factor). 15% held out, as `tiny`: the card's probes need
        # >= 10 held-out sentences per class and language, and the sample keeps only ~250 Russian documents (at 5%
        # SentLen's 26-28-word bin had 7 Russian sentences, at 10% WC found too few words; 15% passes both)
        "shards": {"seq_len": 128, "num_shards": 2, "valid_per_mille": 150},
        # 2 procs x 16 rows x 128 tokens = 4,096 tokens/step; 1,000 steps = 4.1M tokens, about 5.5
        # epochs of the sample's ~750k train tokens, at ~0.25 s/step = ~4 minutes on 2 cores.
        "pretrain": {"model": "demo", "steps": 1000, "micro_batch_size": 16, "lr": 1e-3, "log_every": 50},
        # VADER, 3 classes: 8,000 of its 19k train sentences / 32 = 250 steps/epoch; the pretrained model and
        # its random-init twin (one seed each in the demo), plus the majority and TF-IDF controls. The cap
        # keeps the demo under 15 minutes with the student's fine-tune below (all 19k: 16 minutes).
        "finetune": {"epochs": 2, "batch_size": 32, "lr": 3e-4, "max_length": 64, "max_train": 8000,
                     "init": ["pretrained", "scratch"]},
        # KL only at masked positions: full-vocabulary KL at every position costs ~0.7 s/step here.
        "distill": {"steps": 200, "batch_size": 16, "restrict_ce_to_mask": True, "log_every": 25},
        "evaluate": {},
        # the distilled student fine-tuned on the same task with the teacher's recipe (one seed, no controls: the
        # teacher's run has them) plus task-level distillation from the fine-tuned teacher, for its task score
        "student_finetune": {},
        # the fine-tuned model compressed two ways: int8 weights, and a quarter of its heads pruned
        "compress": {"shares": [0.25]},
        # the card of teacher, student, fine-tuned model, int8 and pruned: 512 inputs x 3 repeats per
        # model keeps its cost measurement to ~10 s a model here (MOROCCO's 2,000 x 5 is an option away)
        "card": {"cost_inputs": 512, "cost_repeats": 3, "latency_inputs": 50, "pppl_sentences": 50, "probe": True},
    }


def demo() -> dict[str, dict[str, Any]]:
    """full(), smaller where the time goes (measured 2026-11-26 on 2 cores, full: pretraining 233 s, fine-tune
    110 s, the student's fine-tune 44 s, the card 129 s of a 585 s DAG): half the pretraining steps (about 2.5
    epochs of the sample's train tokens), half the fine-tuning sentences, and shorter cost runs on the card.
    The controls are all there: the pretrained model's task score stands beside its random-init twin's, the
    majority class and TF-IDF + logistic regression, on the same test split."""
    opts = full()
    opts["pretrain"] = {**opts["pretrain"], "steps": 500}
    opts["finetune"] = {**opts["finetune"], "max_train": 4000}
    opts["card"] = {**opts["card"], "cost_inputs": 256, "latency_inputs": 32, "pppl_sentences": 25}
    return opts


def tiny() -> dict[str, dict[str, Any]]:
    return {
        "corpus": {"num_shards": 1, "line_dedup": True},
        "tokenizer": {"vocab_size": 1500},
        "shards": {"seq_len": 64, "num_shards": 2, "valid_per_mille": 150, "mask_num_variants": 3},
        "pretrain": {"model": "tiny", "steps": 30, "micro_batch_size": 8, "lr": 2e-3, "log_every": 10, "eval_batches": 2},
        "finetune": {"epochs": 1, "max_train": 600, "max_validation": 300, "max_test": 300, "batch_size": 32, "lr": 3e-4,
                     "max_length": 64, "init": ["pretrained", "scratch"]},
        "distill": {"steps": 10, "batch_size": 8},
        "evaluate": {"max_batches": 4},
        "student_finetune": {},
        "compress": {"shares": [0.25], "importance_examples": 64},
        # the tiny crawl's held-out part is too small for probing's balanced classes. One cost repeat: each is a
        # fresh process per model (~5 s of imports here), half of the tiny card's time at two; tiny's cost
        # figures test the path, not a machine
        "card": {"cost_inputs": 64, "cost_repeats": 1, "latency_inputs": 8, "max_batches": 4, "probe": False},
    }


RUN_PRESETS = {"demo": demo, "full": full, "tiny": tiny}
"""What a flow's `preset` parameter names: every stage's options for a run of that size (model sizes are
training.models.model.MODEL_PRESETS)."""


def with_objective(opts: dict[str, dict[str, Any]], objective: str) -> dict[str, dict[str, Any]]:
    """A preset's options training for `objective` (schemas.objectives; empty: the preset's own, mlm): the shards
    masked for it and, where the objective names one, its tokenizer family (a decoder's byte-level BPE, T5's unigram
    with sentinels) in place of the preset's WordPiece. `opts` is changed and returned."""
    if objective:
        opts["shards"]["mask_objective"] = objective
        if record(objective).tokenizer:
            opts["tokenizer"]["model"] = record(objective).tokenizer
    return opts
