"""Training stages: MLM pretraining under DeepSpeed (`training.pretrain`), DistilBERT-style
distillation (`training.distill`), and their pure cores (`training.data`, `training.model`).

Every stage reads `schemas.shards` token shards and writes `<output>/hf` (a Hugging Face model
plus tokenizer), `<output>/metrics.json` and, last, `<output>/manifest.json`.
"""
