"""Training's benches: `lmforge bench train` (`throughput.py`, `throughput_report.py`, `machine.py`, `host_work.py`:
tokens/s and MFU against the HF Trainer on the CPU), `gpu` (`gpu.py`, `gpu_report.py`, `gpu_block.py`: the step on
one GPU), `learn` (`learn.py`, `learn_masks.py`, `learn_transfer.py`: held-out loss at equal tokens) and `attention`;
the peers they run as processes of their own: `step_peers.py` (the plain loop) and `hf_trainer.py` (the Trainer). It
may import bench.kit and the layers below bench, never another bench subpackage."""
