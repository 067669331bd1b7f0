"""The token path after the corpus: `lmforge bench tokenizer` (`tokenizer.py`: fertility and round trips of the four
tokenizer types) and `lmforge bench data` (`shards.py`, its section `shards_report.py`: the shards stage against HF
`datasets`, the loader against the collator, bytes per token). It may import bench.kit and the layers below bench,
never another bench subpackage."""
