"""Test session settings.

Prefect's temporary server logs "Stopping temporary server" at interpreter exit, after pytest
has closed its captured streams, which prints a logging traceback; warnings and errors still show.
"""
import os
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")  # tasks called outside a flow in unit tests


@pytest.fixture
def checkout_root(tmp_path, monkeypatch):
    """The checkout as the working directory, with it and tmp_path as the data root (flows/data_root.py): what a
    worker started in the checkout allows a run from the Prefect UI to name."""
    checkout = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", f"{checkout}:{tmp_path}")
    return tmp_path
