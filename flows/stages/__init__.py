"""The stages as the CLI and the flows both know them, and how a flow task runs one: `table.py` (`STAGE_TABLE`:
each stage's config class, run function, help text and whether it is Beam, as "module:attribute" strings imported
on use), `runner.py` (a stage as a subprocess with its logs, the skip key, the one-line failure and the retry rule;
bench's step runner reuses it) and `lines.py` (the console line of a finished stage). None imports Prefect when it
is imported (runner reads the task's context inside a function), so `lmforge --help` and every stage command load
them without Prefect. They import the layers below flows only, nothing else of flows."""
