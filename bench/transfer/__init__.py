"""Does pretraining pay: `lmforge bench transfer` (`payoff.py`, its section `payoff_report.py`, its compression part
`compression.py`), its one-GPU run `--gpu` (`gpu.py`, `gpu_report.py`) and `lmforge bench ablate` (`ablate.py`: a
corpus ablation scored on the same tasks). It may import bench.kit and the layers below bench, never another bench
subpackage."""
