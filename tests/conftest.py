"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from hermes.home import HermesHome
from hermes.state.registry import Registry
from hermes.terminal.reaper import become_subreaper, reap
from hermes.terminal.tree import ProcessId, descendant_pids
from tests.fakes.openai import FakeOpenAI
from tests.processes import start_serve


@pytest.fixture
def io_clock():
    """A mock clock for tests whose work also crosses threads, processes or sockets.

    It jumps only after 20 ms of real idleness, not at once: SQLite runs in a
    worker thread and providers answer over real sockets, and a zero threshold
    would jump virtual time (firing timeouts) while that work is in flight.
    """
    return trio.testing.MockClock(autojump_threshold=0.02)


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fail any test that leaves a descendant process of the test process alive.

    The test process is a child subreaper, so even a daemon that double-forked
    away from its tree stays our descendant and is seen here.
    """
    become_subreaper()
    yield
    alive = [p for p in map(ProcessId.of, descendant_pids(os.getpid())) if p is not None]
    for proc in alive:
        proc.signal(signal.SIGKILL)
    reap(descendant_pids(os.getpid()))
    if alive:
        names = []
        for proc in alive:
            try:
                names.append(f"{proc.pid}: {Path(f'/proc/{proc.pid}/cmdline').read_bytes()!r}")
            except OSError:
                names.append(str(proc.pid))
        pytest.fail(f"the test left {len(alive)} process(es) running: {names}")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HermesHome:
    """A fresh HERMES_HOME, also exported for subprocesses."""
    root = tmp_path / "hermes-home"
    monkeypatch.setenv("HERMES_HOME", str(root))
    return HermesHome(root).ensure()


@pytest.fixture
async def registry():
    reg = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        yield reg
        reg.request_drain(trio.current_time() + 30)


@pytest.fixture
def fake():
    """The fake OpenAI-compatible model server (tests/fakes/openai.py), one per test."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "state.db"


@pytest.fixture
def spawn(home):
    """Start `hermes serve` processes on the test's home; kill any still running at the end.

    Unless the test wrote its own config.yaml first, the local endpoint listens on
    an ephemeral port (0) so tests never collide.
    """
    if not home.config_path.exists():
        home.config_path.write_text("gateway:\n  local:\n    port: 0\nops:\n  port: 0\n")
    procs = []

    def start(*args: str):
        procs.append(start_serve(*args))
        return procs[-1]

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket holds (listening) for the whole test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]
