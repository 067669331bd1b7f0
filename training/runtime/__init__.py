"""Where training runs, shared by every loop: the device and its launch plan (accelerator), the process
group and gradient sync (distributed), child processes (processes), the recipe (precision, optimizer,
schedule, clipping: recipe), DeepSpeed's config (ds_config) and the step telemetry (telemetry).

May import: common, schemas. Nothing else in training/ (every other subpackage builds on this one).
"""
