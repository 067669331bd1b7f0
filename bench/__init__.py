"""`lmforge bench`: speed and quality measured side by side with named peers, in one run.

Results go to docs/BENCHMARKS.md (one section per benchmark, replaced on each run) and to
docs/benchmarks/<name>.json. Timings are single-process wall clock on whatever machine runs
them, so read the ratios, not the absolute numbers; nothing here is asserted in a test.
"""
