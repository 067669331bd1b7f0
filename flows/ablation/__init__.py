"""Corpus ablations: `lmforge ablate` and the lmforge-ablate deployment (docs/ABLATIONS.md). `ablate.py` is the flow
and its form, `arm.py` one arm's subflow, `arms.py` the arms (presets and option objects), `cleaning.py` the cleaning
that arms differing only in deduplication share, `stats.py` intervals and paired differences, `report.py` the
figures and `outputs.py` the plot, HTML and artifacts. The arms reuse the DAG's tasks: it may import the top level of
flows and flows.stages, never flows.deploy, and nothing at the top of flows imports it."""
