"""Prefect flows: orchestration only. Each task launches one stage's entry point and returns the
directory it wrote.

The top level holds the flows a deployment runs and what they share: `dag.py` (lmforge-dag and lmforge-train,
and the DAG's tasks), `refresh.py` (lmforge-refresh), `params.py` (their flat, checked parameters), `form.py`
(each flow's signature, and so its form in the UI, derived from its parameter model), `presets.py`
(the run presets), `data_root.py` (the paths a run may name), `credentials.py` (a Secret block into the stages'
environment), `artifacts.py` (what a run shows in the UI) and `run_cli.py` (`lmforge run`). The rest lives in
subpackages, each with its own docstring (tests/unit/test_layers.py holds the rule):
- stages    the stage table and the runner that the CLI, the flows and bench share: no Prefect at import,
            nothing else of flows imported; the top level may import it
- ablation  corpus ablations (`lmforge ablate`, the lmforge-ablate deployment): may import the top level and
            stages; nothing at the top imports it
- deploy    deploying and checking the flows: the deployments' pull step, `lmforge alerts`, and the developer
            tooling the Makefile and the tests use (a local deployment end to end, the UI checks); may import
            anything in flows, and nothing else in flows imports it
"""
