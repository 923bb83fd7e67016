"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from hermes.home import HermesHome
from hermes.state.registry import Registry
from hermes.terminal.background import BackgroundProcesses
from hermes.terminal.reaper import become_subreaper, reap
from hermes.terminal.tree import ProcessId, descendant_pids
from tests.adapters.telegram.serving import TOKEN as TELEGRAM_TOKEN
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.processes import start_serve

REQUIRE_SYSTEM = "HERMES_TEST_REQUIRE_SYSTEM"  # "1": a missing system package fails (CI)


def _require_system(*programs: str | Path, packages: tuple[str, ...]) -> None:
    """Skip the test unless every one of `programs` (absolute paths) is an executable file,
    saying which Debian `packages` provide them and the command that installs them; with
    HERMES_TEST_REQUIRE_SYSTEM=1 in the environment (.ci/run, which installs them) fail
    instead, so a test that must run never passes as skipped."""
    missing = [str(p) for p in programs if not (Path(p).is_file() and os.access(p, os.X_OK))]
    if not missing:
        return
    reason = (
        f"needs Debian's {' and '.join(packages)}: apt-get install {' '.join(packages)}"
        f" ({', '.join(missing)} missing)"
    )
    if os.environ.get(REQUIRE_SYSTEM) == "1":
        pytest.fail(f"{reason}; {REQUIRE_SYSTEM}=1 says it must run", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def require_system() -> Callable[..., None]:
    """`require_system(*programs, packages=(...))` for a test that drives a system program
    (Chromium, Dovecot): skipped with the install command as its reason when one is
    missing, failed instead under HERMES_TEST_REQUIRE_SYSTEM=1."""
    return _require_system


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
    end_leftover_processes()


def end_leftover_processes() -> None:
    """Kill and reap every descendant of the test process still running, then fail if
    there was one (also run by a module whose serve outlives its tests, at its end)."""
    alive = [p for p in map(ProcessId.of, descendant_pids(os.getpid())) if p is not None]
    alive = _past_exits(alive)
    names = [_described(proc.pid) for proc in alive]  # before the kill takes what says it
    for proc in alive:
        proc.signal(signal.SIGKILL)
    reap(descendant_pids(os.getpid()))
    if alive:
        pytest.fail(f"the test left {len(alive)} process(es) running: {names}")


EXIT_WAIT = 5.0  # seconds a process already on its way out gets to finish exiting


def _past_exits(alive: list[ProcessId]) -> list[ProcessId]:
    """`alive` less the processes that were only exiting: killed, their memory already
    gone (an empty command line, which no running process has), not yet zombies. Each is
    waited for on its pidfd, which is readable once it has exited (bounded)."""
    deadline = time.monotonic() + EXIT_WAIT
    for proc in alive:
        try:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                continue  # running
            fd = os.pidfd_open(proc.pid)
        except OSError:
            continue  # gone already
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
    return [proc for proc in alive if proc.alive()]


def _described(pid: int) -> str:
    """A process's pid, state, parent and command line, as /proc says them now."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return str(pid)
    return f"{pid} ({stat[0]}, parent {stat[1]}): {cmdline!r}"


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
def tg() -> Iterator[FakeTelegram]:
    """The fake Telegram Bot API (tests/fakes/telegram.py) with serve's test token."""
    with FakeTelegram(token=TELEGRAM_TOKEN) as fake:
        yield fake


@pytest.fixture
async def procs():
    """A BackgroundProcesses actor (a short kill grace), stopped at the end."""
    actor = BackgroundProcesses(grace=0.5)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(actor.run)
        yield address
        actor.stop()


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


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A skip inside a Trio test (in its nursery) keeps its reason: pytest-trio unwraps
    the group it comes in but skips again with no message, so the install line the skip
    says would be lost ("Skipped"). The skip as it was raised is raised instead."""
    try:
        return (yield)
    except pytest.skip.Exception as exc:
        if not exc.msg and isinstance(exc.__context__, BaseExceptionGroup):
            leaves = _leaves(exc.__context__)
            said = [e for e in leaves if isinstance(e, pytest.skip.Exception) and e.msg]
            if said:
                raise said[0] from None
        raise


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (`pytest.mark.long`): the workers take them at the
    start, and the rest, short, evens out at the end; met last, one of them would keep a
    worker busy long after the others had finished."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
