"""Prefect pull step for lmforge's deployments (infra/prefect/prefect.yaml).

The worker runs a flow in the lmforge checkout: `LMFORGE_HOME` when the worker's environment sets
it, else the checkout this Python imports lmforge from (the editable install `make setup` makes).
Anything that is not an lmforge checkout fails here, naming the directory and the variable, instead
of the flow failing later on a missing `flows/dag.py` in a temporary directory.
"""
from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "LMFORGE_HOME"


def lmforge_home(directory: str = "") -> dict[str, str]:
    """Change to the lmforge checkout and return it (`{{ lmforge-home.directory }}` in later steps)."""
    chosen = directory or os.environ.get(HOME_ENV, "")
    home = Path(chosen or Path(__file__).resolve().parents[1]).expanduser().resolve()
    where = f"{HOME_ENV}={chosen}" if chosen else "the checkout this worker's Python imports lmforge from"
    if not (home / "flows" / "dag.py").is_file():
        raise RuntimeError(f"lmforge deployment: {home} ({where}) is not an lmforge checkout (no flows/dag.py). "
                           f"Set {HOME_ENV} in the worker's environment to the checkout, e.g. "
                           f"`{HOME_ENV}=/srv/lmforge prefect worker start --pool lmforge-process`.")
    os.chdir(home)
    print(f"lmforge deployment: working directory {home} ({where})", flush=True)
    return {"directory": str(home)}
