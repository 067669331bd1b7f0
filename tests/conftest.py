"""Test session settings.

Prefect's temporary server logs "Stopping temporary server" at interpreter exit, after pytest
has closed its captured streams, which prints a logging traceback; warnings and errors still show.
"""
import os

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")  # tasks called outside a flow in unit tests
