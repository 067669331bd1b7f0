"""Smaller models from a trained one: distillation (distill), int8 quantisation and pruning with a
fine-tune of what they cost (compress, prune).

May import: common, schemas, training.runtime, training.models, training.pretraining, training.finetuning.
"""
