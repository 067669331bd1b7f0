"""A time budget for cleaning one document: a page crafted to make a rule slow is quarantined as `too_slow`, with
its size, instead of holding a Beam worker for minutes (issue 50).

`process_document` (clean.py) starts the budget; the loops a page's size drives (the word splitter's passes and
chunks, pipelines/corpus/words.py) call `tick()`, which reads the clock every CHECK_EVERY calls, and process_document checks again after each step.
Over the budget, `TooSlow` unwinds to process_document, which quarantines the page. The budget is the cleaning's
wall time, so which crafted pages go over it depends on the machine; real pages are far under it (a 1 MB page of
real text splits into words in about 0.2-0.5 s on a 2-core AMD EPYC).
"""
from __future__ import annotations

import threading
import time

CHECK_EVERY = 256
"""Ticks (uncached chunks, affix passes) between clock reads: a tick costs ~0.1 us, a pass ~2 us."""

_state = threading.local()


class TooSlow(Exception):
    """The current document's cleaning went over its budget."""


def start(seconds: float) -> None:
    """Budget the current thread's next cleaning `seconds` from now (0: none)."""
    _state.deadline = time.monotonic() + seconds if seconds > 0 else None


def stop() -> None:
    _state.deadline = None


def tick() -> None:
    """One unit of a size-driven loop's work (an uncached chunk, an affix pass): the clock is read every CHECK_EVERY
    ticks of this thread."""
    n = getattr(_state, "ticks", 0) + 1
    _state.ticks = n
    if n >= CHECK_EVERY:
        _state.ticks = 0
        check()


def check() -> None:
    """TooSlow if the current budget is spent."""
    deadline = getattr(_state, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise TooSlow
