# Two commands do everything on a fresh machine (Python 3.11, no GPU):
#   make demo   set up .venv and run the whole DAG on the bundled sample (runs/demo/)
#   make test   set up .venv and run the tests
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.lmforge-installed
RUN    ?= demo
# checkov, the scanner tests/unit/test_security_scan.py runs on the images and the cluster manifests, in a venv of
# its own: its pins (packaging 23, urllib3 1.26, networkx 2.6) would downgrade ones lmforge's environment has
SCAN       := .venv-scan
CHECKOV    := checkov==3.3.30
SCAN_STAMP := $(SCAN)/.installed-$(CHECKOV)

.PHONY: setup scan-setup demo test test-fast lint ui ui-check ablate-ui-check bench gpu-check clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first: 2.13.0 is the CPU wheel on these machines; the constraints keep anything from upgrading it
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(BIN)/python -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

setup: $(STAMP)

$(SCAN_STAMP):
	test -x $(SCAN)/bin/python || $(PYTHON) -m venv $(SCAN)
	$(SCAN)/bin/python -m pip install --quiet $(CHECKOV)
	touch $(SCAN_STAMP)

scan-setup: $(SCAN_STAMP)

demo: setup
	$(BIN)/lmforge run --name $(RUN)

# Two workers, each module's tests on one (their shared fixtures paid once), the slowest modules first
# (tests/session.py, from tests/durations.json); the end prints the total, the slowest tests and the time per
# file, and .pytest_cache/lmforge-durations.json keeps them (docs/TESTING.md: how to refresh the schedule).
XDIST := -n 2 --dist loadscope --no-loadscope-reorder
# --durations-json=PATH in one word: as two, pytest takes PATH for the tests' path before it knows the option, and
# once the file exists it looks there for the conftest that adds the option

test: setup scan-setup
	$(BIN)/python -m pytest -q $(XDIST) --durations=25 --durations-json=.pytest_cache/lmforge-durations.json

# no multi-process or whole-run test: under 5 minutes
test-fast: setup scan-setup
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow" --durations=10

lint: setup
	$(BIN)/ruff check .

# Benchmarks against named peers, written to docs/BENCHMARKS.md: each bench/registry.py marks for make, in its order
# and with its arguments, each in a process of its own (`lmforge bench --make --dry-run` lists them)
bench: setup
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/lmforge bench --make

# On a GPU node, before a long run: torch/CUDA/NCCL facts, the optimizers on the GPU, NCCL all-reduce bandwidth, a
# 20-step pretraining on every GPU resumed on the same and on another GPU count -> runs/doctor/doctor.{json,md}.
# Fails (exit 1) where no CUDA device answers; `lmforge doctor` alone checks what a CPU machine can.
gpu-check: setup
	$(BIN)/lmforge doctor --gpu-run

# The Prefect UI on http://127.0.0.1:4200, loopback only, telemetry off (infra/README.md says how
# to expose it safely; then run flows with PREFECT_API_URL set, see docs/USAGE.md, "The Prefect UI").
ui: setup
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/prefect server start --host 127.0.0.1

# Deploy as infra/README.md documents, run the demo deployment at preset tiny, screenshot the UI
# with headless Chromium (Debian: apt-get install chromium) into docs/ui/.
ui-check: setup
	$(BIN)/python -m flows.deploy.ops ui-check --out docs/ui

# The same deployment, then the ablation deployment's form filled in headless Chromium (playwright) and
# submitted; its run's page and artifacts screenshotted into docs/ui/ablate-*.png (about 20 minutes).
ablate-ui-check: setup
	$(BIN)/python -m pip install --quiet -c constraints.txt 'playwright==1.65.2'
	$(BIN)/python -m flows.deploy.ablate_ui --out docs/ui

# runs/ only: the refresh's shared band index (state/) and crawl snapshots (crawl/) stay.
clean:
	rm -rf runs .pytest_cache
