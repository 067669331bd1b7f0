"""What is trained: the model presets and families (model), the kinds of head (model_kinds), reading and
writing Hugging Face formats (model_formats, export), attention kernels (attention) and the FLOP count
that MFU figures divide by (flops).

May import: common, schemas, training.runtime.
"""
