"""Starting training processes: torchrun on this machine or a hostfile's nodes (torchrun), and cluster
jobs: Slurm scripts and Kubernetes Job/PyTorchJob manifests (cluster) and their submission and
following (cluster_submit).

May import: common, schemas, training.runtime, training.models, training.pretraining.
"""
