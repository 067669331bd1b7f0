"""The shards stage: clean corpus + tokenizer -> packed token sequences with precomputed masks."""
