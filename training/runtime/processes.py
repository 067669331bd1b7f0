"""Process helpers shared by the launcher and the workers (no training import here: both sides use it)."""
from __future__ import annotations

import os

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = 9) -> bool:
    """Ask Linux to send `sig` (SIGKILL) to this process when its parent dies, so a kill -9 of `lmforge pretrain`
    takes the torchrun agent with it and the agent's death takes each worker (torch starts the workers in a
    session of their own, so a signal to the launcher's process group never reaches them). Called in the agent
    (as the launcher's preexec_fn) and first thing in every worker. Returns False where prctl does not exist
    (not Linux); exits at once when the parent is already gone."""
    import ctypes
    import ctypes.util

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent or parent == 1:  # the parent died before prctl took effect
        os._exit(1)
    return True
