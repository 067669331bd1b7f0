"""The corpus stage: crawl files in, clean deduplicated documents out (Parquet)."""
