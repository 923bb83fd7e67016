"""Process trees left behind by an earlier hermes of the same home, found and killed.

A hermes that is SIGKILLed cannot kill its trees: they are re-parented and
run on. So every tree this process starts carries, in its environment, the
home it belongs to (a hash of its path: a sandboxed command sees no more of
HERMES_HOME) and the hermes that started it (pid and start time). The
next serve (or `hermes cron run`) of that home kills every process of the
home whose hermes is gone, before it starts anything; trees of a hermes that
still runs (a second serve on purpose) are left alone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
from pathlib import Path

import psutil

from hermes.terminal.tree import DEFAULT_GRACE, KILL_WAIT, ProcessId, wait_gone

log = logging.getLogger(__name__)

HOME_VARIABLE = "HERMES_TREE_HOME"
OWNER_VARIABLE = "HERMES_TREE_OWNER"

_marker: dict[str, str] = {}  # set once per process by `mark_trees`


def _owner_text(proc: ProcessId) -> str:
    return f"{proc.pid}:{proc.started}"


def _home_tag(home_root: Path) -> str:
    return hashlib.sha256(str(home_root.resolve()).encode()).hexdigest()[:24]


def mark_trees(home_root: Path) -> None:
    """From now on every tree this process starts says it belongs to `home_root`."""
    me = ProcessId.of(os.getpid())
    _marker.clear()
    if me is not None:  # without an owner, another hermes would take our trees for leftovers
        _marker[HOME_VARIABLE] = _home_tag(home_root)
        _marker[OWNER_VARIABLE] = _owner_text(me)


def tree_marker() -> dict[str, str]:
    """The variables `spawned` adds to every tree's environment (none before mark_trees)."""
    return dict(_marker)


def _owner_alive(text: str) -> bool:
    pid, _, started = text.partition(":")
    try:
        return ProcessId(int(pid), int(started)).alive()
    except ValueError:
        return False


def find_leftovers(home_root: Path) -> list[ProcessId]:
    """Processes of trees started for `home_root` by a hermes that is no longer running."""
    home = _home_tag(home_root)
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue  # gone, or not ours to read
        if env.get(HOME_VARIABLE) != home or _owner_alive(env.get(OWNER_VARIABLE, "")):
            continue
        named = ProcessId.of(proc.pid)
        if named is not None:
            found.append(named)
    return found


async def kill_leftovers(home_root: Path, grace: float = DEFAULT_GRACE) -> int:
    """SIGTERM every leftover process of the home, SIGKILL what is still alive after
    `grace`; returns how many there were."""
    procs = find_leftovers(home_root)
    if not procs:
        return 0
    log.warning(
        "killing %d process(es) left running by an earlier hermes of %s: %s",
        len(procs),
        home_root,
        ", ".join(str(p.pid) for p in procs),
    )
    groups = _groups_led(procs)
    every = procs + _members(groups, procs)  # waited for: a SIGKILLed member dies a moment later
    for proc in procs:
        proc.signal(signal.SIGTERM)
    _signal_groups(groups, signal.SIGTERM)
    await wait_gone(every, grace)
    alive = [p for p in every if p.alive()]
    for proc in alive:
        proc.signal(signal.SIGKILL)
    _signal_groups(groups, signal.SIGKILL)
    await wait_gone(alive, KILL_WAIT)
    return len(procs)


def _groups_led(procs: list[ProcessId]) -> list[int]:
    """The process groups the leftovers lead (a tree's leader started its own session): a
    member that rewrote its environment's memory with its title (Chromium's children do)
    carries no readable tag, and is reached through its group."""
    led = []
    for proc in procs:
        try:
            if os.getpgid(proc.pid) == proc.pid:
                led.append(proc.pid)
        except ProcessLookupError:
            continue
    return led


def _members(groups: list[int], known: list[ProcessId]) -> list[ProcessId]:
    """The other processes of `groups` (their tags unreadable), so they are waited for."""
    wanted, seen = set(groups), {p.pid for p in known}
    found = []
    for pid in psutil.pids():
        try:
            if pid not in seen and os.getpgid(pid) in wanted and (proc := ProcessId.of(pid)):
                found.append(proc)
        except ProcessLookupError:
            continue
    return found


def _signal_groups(groups: list[int], signum: int) -> None:
    for group in groups:
        try:
            os.killpg(group, signum)
        except (ProcessLookupError, PermissionError):
            pass
