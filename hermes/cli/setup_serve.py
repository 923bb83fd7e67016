"""The serve `hermes setup` works with: stopped if one runs for the home, started detached
with the config just written, and state.db read for what users sent it.

Owner discovery and the round trip read the inbound journal (every event an adapter
received, with its text and sender, whatever the router made of it): no platform is
polled here, and nothing scrapes a log. A stranger who writes to a serve with no
allowlist is offered pairing (a code, and nothing more), so the code a user sends
before they are the owner costs nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import apsw

from hermes.actors.errors import HermesError, Unavailable
from hermes.adapters.contract import InboundEvent
from hermes.delivery.outbox_store import message_state
from hermes.gateway.journal import first_since
from hermes.gateway.pidfile import holder_pid, serve_holds
from hermes.gateway.serve import READY_LINE
from hermes.home import HermesHome
from hermes.state import maintenance

T = TypeVar("T")
START_TIMEOUT = 60.0  # seconds serve gets to say it is ready, or to stop when asked
LOOK_EVERY = 0.25  # seconds between looks at state.db or the log (a person is typing)


class ServeFailed(HermesError):
    """The serve setup started stopped, or never said it was ready; its log's end says
    why."""


def log_path(home: HermesHome) -> Path:
    """Where the serve setup starts writes its output."""
    return home.logs / "setup-serve.log"


def stop(home: HermesHome) -> bool:
    """SIGTERM the serve of this home (it drains) and wait until it let go; False if none
    ran."""
    pid = holder_pid(home.serve_pid)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + START_TIMEOUT
    while serve_holds(home.serve_pid):
        if time.monotonic() > deadline:
            raise Unavailable(f"hermes serve (pid {pid}) did not stop within {START_TIMEOUT:g} s")
        time.sleep(LOOK_EVERY)
    return True


def start(home: HermesHome) -> int:
    """`hermes serve` in a session of its own (it outlives the wizard), its output in
    `log_path`; its pid once it said it is ready. If a service manager restarted the
    serve stopped before (it holds the home), that one is used: it read the new config."""
    log = log_path(home)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hermes.cli.main", "serve"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while READY_LINE not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            other = holder_pid(home.serve_pid)
            if other is not None:
                return other
            raise ServeFailed(f"hermes serve stopped at start: {tail(log)}")
        if time.monotonic() > deadline:
            proc.terminate()
            proc.wait(timeout=START_TIMEOUT)  # it drains; not left a zombie
            raise ServeFailed(f"hermes serve was not ready within {START_TIMEOUT:g} s: {tail(log)}")
        time.sleep(LOOK_EVERY)
    return proc.pid


def tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def restart(home: HermesHome) -> int:
    """The config just written in effect: the running serve stopped, one started."""
    stop(home)
    return start(home)


def journal_event(
    home: HermesHome,
    platform: str,
    since: float,
    text: str | None = None,
    user_id: str | None = None,
) -> InboundEvent | None:
    """The first event on `platform` since `since` (wall clock) holding `text` and sent by
    `user_id` (each when given), read on a read-only connection."""
    if not home.state_db.exists():
        return None
    conn = maintenance.open_plain(home.state_db)
    try:
        if not maintenance.has_table(conn, "inbound_journal"):
            return None
        return first_since(conn, platform, since, text, user_id)
    except apsw.BusyError:
        return None  # a checkpoint holds it this instant: the next look sees it
    finally:
        conn.close()


def wait_for(
    look: Callable[[], T | None],
    timeout: float,
    progress: Callable[[float], None],
) -> T | None:
    """`look` again and again until it finds an event or `timeout` seconds pass;
    `progress` is told the seconds waited, about once a second."""
    started = time.monotonic()
    shown = -1
    while True:
        found = look()
        waited = time.monotonic() - started
        if found is not None or waited >= timeout:
            return found
        if int(waited) != shown:
            shown = int(waited)
            progress(waited)
        time.sleep(LOOK_EVERY)


def outbox_state(home: HermesHome, key: str) -> str | None:
    """How the message queued under `key` fared: sent, dead, unknown, or still on its way
    (pending, retry, sending); None while no row is seen."""
    conn = maintenance.open_plain(home.state_db)
    try:
        found = message_state(conn, key)
    except apsw.BusyError:
        return None
    finally:
        conn.close()
    return None if found is None else found[0]
