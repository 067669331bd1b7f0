"""Beam data pipelines (corpus, shards) and the tokenizer stage."""
