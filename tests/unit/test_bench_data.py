"""lmforge bench data: the peer's packing recipe, the replicated corpus, the fit and the report's verdicts."""
from __future__ import annotations

import pyarrow as pa
import pytest

from bench.data.shards import group_texts, replicate, stage_workers
from bench.data.shards_report import fixed_and_marginal, render, step_share


def test_group_texts_cuts_blocks_and_drops_the_remainder():
    ex = {"input_ids": [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11, 12], [13, 14, 15, 16]],
          "attention_mask": [[1] * 5, [1] * 7, [0] * 4]}
    out = group_texts(ex, 5)  # 16 tokens -> 3 blocks of 5, token 16 dropped
    assert out["input_ids"] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14, 15]]
    assert out["attention_mask"] == [[1] * 5, [1] * 5, [1, 1, 0, 0, 0]]


def test_replicate_keeps_copy_zero_and_makes_ids_distinct():
    t = pa.table({"id": ["a", "b"], "text": ["x y", "z"], "url": ["u1", "u2"]})
    r = replicate(t, 3)
    assert r.column("id").to_pylist() == ["a", "b", "a~1", "b~1", "a~2", "b~2"]
    assert r.column("text").to_pylist() == ["x y", "z"] * 3 and r.column("url").to_pylist() == ["u1", "u2"] * 3
    assert replicate(t, 1).equals(t)
    # the corpus schema's `id` is `not null`: the copies keep it, or the parts do not concatenate
    strict = t.cast(pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("text", pa.string()),
                               pa.field("url", pa.string())]))
    assert replicate(strict, 2).schema == strict.schema


def test_stage_workers():
    assert stage_workers(["--runner=DirectRunner", "--direct_num_workers=2"]) == 2
    with pytest.raises(ValueError):
        stage_workers(["--direct_running_mode=multi_processing"])


def test_fixed_and_marginal_and_share():
    fixed, marginal = fixed_and_marginal(10.0, 1_000_000, 28.0, 10_000_000)
    assert marginal == pytest.approx(500_000) and fixed == pytest.approx(8.0)
    assert fixed_and_marginal(10.0, 1_000, 9.0, 10_000) is None
    assert step_share(0.01, 0.19) == pytest.approx(0.05)


def _measured(lm_rate: float, peer_rate: float) -> dict:
    def write(scale: int, rate: float, extra: dict) -> dict:
        tokens = 100_000 * scale
        return {"tokens": tokens, "seconds": tokens / rate, "tokens_per_s": rate, "rows": tokens // 128, **extra}

    steps = {"from_parquet": 0.1, "map_tokenize": 1.0, "map_group_texts": 0.5, "save_to_disk": 0.1}
    hf = {"steps": steps, "tokens_before_grouping": 100_000}
    sizes = {s: {"lmforge": write(s, lm_rate * (1 + s / 10), {}),
                 "datasets num_proc=2": write(s, peer_rate, hf), "datasets num_proc=1": write(s, peer_rate / 2, hf)}
             for s in (1, 10)}
    side = {"bytes": 1000, "bytes_per_token": 14.0, "bytes_per_token_no_masks": 4.2, "mask_share": 0.7,
            "column_bytes_per_token": {"input_ids": 4.0}, "columns": {"input_ids": "list<item: int32>"}}
    loader = {"lmforge RankLoader": {"batches_per_s": 900.0},
              "DataCollatorForLanguageModeling, torch DataLoader": {"batches_per_s": 150.0},
              "DataCollatorForLanguageModeling, plain list": {"batches_per_s": 400.0}}
    return {"corpus": "c", "tokenizer": "t", "copies": 10, "repeat": 3, "repeat_large": 1, "seq_len": 128, "num_shards": 2,
            "workers": 2, "beam_args": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"], "tokenizers_parallelism": "false", "loader_epochs": 3, "num_variants": 10,
            "docs": {"1x": 10, "10x": 100}, "write": {f"{s}x": v for s, v in sizes.items()},
            "bytes": {"1x": {"lmforge": side, "datasets": side}, "10x": {"lmforge": side, "datasets": side}},
            "masking": {"rows": 100, "seconds": 1.0, "rows_per_s": 100.0},
            "loader": {"lmforge_rows": 700, "datasets_rows": 701, "by_batch": {16: loader}},
            "steps": [{"seconds_per_step": s, "steps": 20, "warmup": 2, "parameters": 1_000_000, "batch_size": 16,
                       "threads": t} for t, s in ((1, 0.25), (2, 0.02))]}


def test_report_verdicts_follow_the_numbers():
    slow = render(_measured(lm_rate=10_000, peer_rate=100_000))
    assert "1x 0.11x (**not met**), 10x 0.20x (**not met**)" in slow
    assert "the smallest ratio above is 2.2x (**not met**)" in slow  # 900 / 400
    assert "| 1 | 0.250 | 1.11 | 0.44% |" in slow and "| 2 | 0.020 | 1.11 | 5.26% |" in slow
    assert "Goal under 5%: at most 5.26% (**not met**)" in slow  # the shorter step decides
    fast = render(_measured(lm_rate=300_000, peer_rate=100_000))
    assert "1x 3.30x (met), 10x 6.00x (met)" in fast


def test_report_judges_the_goal_at_the_largest_input():
    slow = render(_measured(lm_rate=10_000, peer_rate=100_000))
    assert "judged at the largest input, 10x: 0.20x (**not met**)" in slow
    d = _measured(lm_rate=150_000, peer_rate=100_000)  # 1.65x at 1x, 3.0x at 10x
    assert "judged at the largest input, 10x: 3.00x (met)" in render(d)
    assert "1x 1.65x (**not met**)" in render(d)


def test_report_compares_the_encoders_against_the_peers_run():
    d = _measured(lm_rate=10_000, peer_rate=100_000)
    peer_s = d["write"]["10x"]["datasets num_proc=2"]["seconds"]
    wc = {"tokens": 1_000, "threads": 1, "distinct_words": 40, "distinct_chunks": 50, "chunks": 800, "same_ids": True}
    d["encode"] = {"input": "10x", "documents": 5, "tokens": 1_000, "seconds": peer_s * 0.6, "threads": 2,
                   "word_cache": {**wc, "seconds": peer_s * 0.2}}
    d["encode_cold"] = {"input": "1x", "documents": 1, "tokens": 100, "seconds": 1.0, "threads": 2,
                        "word_cache": {**wc, "seconds": 0.5, "chunks": 100}}
    text = render(d)
    assert f"| 10x | HF tokenizers `encode_batch_fast` | 2 | {peer_s * 0.6:.2f} | 1,000 | 60% |  |" in text
    assert f"| 10x | lmforge word cache | 1 | {peer_s * 0.2:.2f} | 1,000 | 20% | 6.2% |" in text
    assert "| 1x | lmforge word cache | 1 | 0.50 |" in text
    assert "Its ids equal HF tokenizers' on every one of the 1 texts of 1x and 5 texts of 10x" in text
    assert "where 50.0% of the chunks are distinct, the cold word cache on one core takes 0.50 s against HF " \
           "tokenizers' 1.00 s on 2, so 4.0x less CPU time; at 10x, 6.0x" in text
    d["encode"]["word_cache"]["same_ids"] = False
    assert "on **not every one** of the" in render(d)
    d["encode"]["word_cache"] = {"unavailable": "pre-tokenizer is ByteLevel, not BertPreTokenizer"}
    assert "The word-cache encoder did not apply: pre-tokenizer is ByteLevel" in render(d)


def test_report_with_a_largest_input_the_single_process_peer_skipped():
    d = _measured(lm_rate=150_000, peer_rate=100_000)
    big = {name: {**r, "tokens": r["tokens"] * 10, "seconds": r["seconds"] * 10}
           for name, r in d["write"]["10x"].items() if name != "datasets num_proc=1"}
    d["write"]["100x"], d["docs"]["100x"], d["bytes"]["100x"] = big, 1000, d["bytes"]["10x"]
    text = render(d)
    assert "judged at the largest input, 100x: 3.00x (met)" in text
    assert "A straight line through 1x and 100x" in text and "datasets num_proc=1 " not in text.split("straight line")[1]
    assert "**100x** = 1,000 documents (its texts 100 times under distinct ids)" in text
