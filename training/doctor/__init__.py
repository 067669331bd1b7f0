"""`lmforge doctor`: can this node train? The report and its arithmetic (node) and the checks it runs
(checks: the GPUs, NCCL, the optimizers, a short pretraining with resume).

May import: common, schemas, and every training subpackage (it is the top of training/).
"""
