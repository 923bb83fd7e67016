"""Keep orphaned descendants ours, and reap them.

A command's grandchild that double-forks into its own session would normally
be re-parented to init and escape us. As a child subreaper (Linux
PR_SET_CHILD_SUBREAPER) this process adopts such orphans instead, so a tree
kill can find them, and it reaps what it adopted so no zombie is left.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
_enabled = False


def become_subreaper() -> bool:
    """Adopt orphaned descendants from now on (idempotent). False where unsupported."""
    global _enabled
    if _enabled:
        return True
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("cannot become a child subreaper: %s", os.strerror(ctypes.get_errno()))
        return False
    _enabled = True
    return True


def reap(pids: Iterable[int]) -> list[int]:
    """Collect the exit status of these pids if they are our exited children.

    Only named pids are waited for, never -1: a wait for any child would steal
    the status of processes Trio or subprocess are waiting on.
    """
    reaped = []
    for pid in pids:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # not our child, or already reaped
        if done == pid:
            reaped.append(pid)
    return reaped
