"""Fine-tuning's pure core: reading labelled data (`readers`, `dataset`), encoding it (`encode`),
metrics, the controls (`baselines`) and one seed's training loop (`trainer`). The shell is
`training.finetune`; the contract of its output is `schemas.finetune`."""
