"""Training: every stage that turns token shards or labelled data into a model, and what checks one.

One subpackage per responsibility, each with its own docstring; bottom first (a subpackage may import
those above it in this list, never one below; tests/unit/test_layers.py holds the rule):
- runtime      where training runs: device, process group, recipe, DeepSpeed config, telemetry
- models       what is trained: presets and families, heads, Hugging Face formats, attention, FLOPs
- pretraining  `lmforge pretrain`: the loop, its config, resume, checkpoints, budget, outputs, the shards reader
- launch       torchrun here or on a hostfile's nodes; Slurm and Kubernetes jobs
- finetuning   `lmforge finetune` and `lmforge labeled file`: a labelled task's data, trainer and controls
- compression  distillation, int8, pruning
- evaluation   `lmforge evaluate`, the model card, probing, pseudo-perplexity, cost runs
- doctor       `lmforge doctor`: can this node train?

Every stage writes `<output>/hf` (a Hugging Face model with its tokenizer where it has one),
`<output>/metrics.json` and, last, `<output>/manifest.json`.
"""
