"""`lmforge finetune` and `lmforge labeled file`: a labelled task's readers and splits (readers, dataset,
prepare), encoding (encode), the data-parallel trainer (trainer), metrics and the controls every score
stands next to (metrics, baselines), and the stage (finetune).

May import: common, schemas, training.runtime, training.models.
"""
