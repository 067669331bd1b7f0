"""The band index admits one writer at a time: a second run waits or fails naming the holder."""
from __future__ import annotations

import multiprocessing as mp
import os
import socket
import time

import pytest

from pipelines.corpus.index import IndexLocked, index_lock, lock_holder


def _hold(root, ready, release):
    with index_lock(root, what="corpus -> elsewhere"):
        ready.set()
        release.wait(30)


def test_second_run_fails_naming_the_holder_then_gets_the_lock(tmp_path):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(IndexLocked) as e:
            with index_lock(tmp_path):
                pytest.fail("a second writer got the lock")
        msg = str(e.value)
        assert f"index locked by pid {holder.pid} on {socket.gethostname()}" in msg and "corpus -> elsewhere" in msg
        assert "--index-wait" in msg
        t0 = time.monotonic()
        with pytest.raises(IndexLocked, match="after waiting 1s"):
            with index_lock(tmp_path, wait_seconds=1.0, poll_seconds=0.1):
                pass
        assert time.monotonic() - t0 >= 1.0
    finally:
        release.set()
        holder.join(30)
    with index_lock(tmp_path, wait_seconds=5):  # released when the holder finished
        assert lock_holder(tmp_path).startswith(f"pid {os.getpid()} ")
    assert lock_holder(tmp_path) == "another process"  # nothing stale left once released


def test_waiting_run_goes_on_when_the_holder_finishes(tmp_path):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path, ready, release))
    holder.start()
    assert ready.wait(30)
    try:
        import threading

        threading.Timer(0.5, release.set).start()
        t0 = time.monotonic()
        with index_lock(tmp_path, wait_seconds=20, poll_seconds=0.1):
            assert time.monotonic() - t0 >= 0.4
    finally:
        release.set()
        holder.join(30)


def test_lock_dies_with_a_killed_holder(tmp_path):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path, ready, release))
    holder.start()
    assert ready.wait(30)
    holder.kill()
    holder.join(30)
    with index_lock(tmp_path):  # no stale lock to clean up by hand
        pass
