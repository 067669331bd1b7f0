"""`lmforge bench`: speed and quality measured side by side with named peers, in one run.

Results go to docs/BENCHMARKS.md (one section per benchmark, replaced on each run) and to
docs/benchmarks/<name>.json. Timings are single-process wall clock on whatever machine runs
them, so read the ratios, not the absolute numbers; nothing here is asserted in a test.

`registry.py` holds `BENCHES`, one record per `lmforge bench <name>` (its module, its line of help, whether and
how `make bench` runs it), and `HELPERS`, the modules a bench runs as a process of their own. The benches live in
subpackages by what they measure; each may import `kit` and the layers below bench, never another subpackage
(tests/unit/test_layers.py holds the rule):
- kit       what every bench uses: options, the report writer, the step runner, peak RSS, the shared real text
            and tasks
- corpus    the corpus stage: cleaning, dedup, agreement with datatrove, decontamination, extraction, language id,
            hostile pages, scale
- data      the token path after the corpus: the tokenizer and the shards stage with its loader
- train     training: step speed (CPU and GPU) against the plain loop and the HF Trainer, learning per token,
            attention
- transfer  does pretraining pay: fine-tuning beside the controls (CPU and GPU), compression, corpus ablations
"""
