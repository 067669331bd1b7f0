"""Test session settings.

Prefect's temporary server logs "Stopping temporary server" at interpreter exit, after pytest
has closed its captured streams, which prints a logging traceback; warnings and errors still show.
"""
import os

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
