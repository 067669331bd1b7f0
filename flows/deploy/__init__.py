"""Deploying the flows and checking a deployment: `pull_step.py` (the deployments' pull step in
infra/prefect/prefect.yaml: the checkout to run in, and a run or work pool that could change how it runs refused),
`automations.py` (`lmforge alerts`: a webhook when a refresh fails), and developer tooling the Makefile and the tests
use: `ops.py` (a local Prefect server, the work pool and deployments made by infra/README.md's own commands, a
worker; `make ui-check`) and `ablate_ui.py` (the ablation's run form in a real browser; `make ablate-ui-check`).
It may import anything in flows; nothing else in flows imports it."""
