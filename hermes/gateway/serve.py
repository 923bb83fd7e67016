"""`hermes serve`: run the tree until a signal, then drain it in phases.

First SIGTERM/SIGINT: drain with `gateway.drain_timeout` as the deadline.
A second signal during the drain: cancel at once (shielded flushes still run).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import socket
from collections.abc import AsyncIterator, Callable

import attrs
import trio

from hermes.actors.errors import ChildStartError, HermesError, PortInUse
from hermes.actors.supervisor import Supervisor
from hermes.gateway.pidfile import hold_pid_file
from hermes.gateway.redaction import redacted_logs
from hermes.gateway.settings import Config
from hermes.gateway.tree import ServeKeys, Surfaces, build_root
from hermes.home import HermesHome
from hermes.state.errors import StateError
from hermes.terminal.leftovers import kill_leftovers, mark_trees
from hermes.terminal.reaper import become_subreaper

log = logging.getLogger(__name__)

READY_LINE = "HERMES_BACKEND_READY"
# A serve beside another on one home (--no-lock) is never told of the other's changes
# (jobs added, rows queued): it looks at state.db this often.
OTHER_SERVE_EVERY = 5.0


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def beside_another(config: Config) -> Config:
    """A second serve on this home (--no-lock) takes a free port where the first holds the
    configured one, and says so; its ports are written to serve.port and ops.port, where
    clients look, as for any serve."""
    local, ops = config.gateway.local, config.ops
    if local.port and not _port_free(local.host, local.port):
        log.warning(
            "gateway.local.port %d is taken (by the other serve?): this one takes a"
            " free port (HERMES_HOME/serve.port)",
            local.port,
        )
        gateway = attrs.evolve(config.gateway, local=attrs.evolve(local, port=0))
        config = attrs.evolve(config, gateway=gateway)
    if ops.enabled and ops.port and not _port_free(ops.bind_host(), ops.port):
        log.warning(
            "ops.port %d is taken (by the other serve?): this one's operator surfaces"
            " take a free port (HERMES_HOME/ops.port)",
            ops.port,
        )
        config = attrs.evolve(config, ops=attrs.evolve(ops, port=0))
    return config


def _forget_ports(home: HermesHome, lock: bool) -> None:
    """The port files this serve wrote: gone with it, so no client is sent to a port
    nothing of this home holds (a second serve of the home, --no-lock, leaves them)."""
    if lock:
        for path in home.port_files:
            path.unlink(missing_ok=True)


async def _watch_signals(
    signals: AsyncIterator[int], root: Supervisor, timeout: float, root_scope: trio.CancelScope
) -> None:
    count = 0
    async for signum in signals:
        count += 1
        name = signal.Signals(signum).name
        if count == 1:
            log.info("%s: draining (deadline %gs; signal again to stop at once)", name, timeout)
            root.drain(trio.current_time() + timeout)
        else:
            log.warning("%s during drain: cancelling what is left", name)
            root_scope.cancel()


async def serve_tree(root: Supervisor, timeout: float, on_ready: Callable[[], None]) -> None:
    """Run `root` until the first signal has drained it (or a second cancelled it)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            root_scope = trio.CancelScope()
            done = trio.Event()

            async def host(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                try:
                    with root_scope:
                        await root.run(task_status=task_status)
                finally:
                    done.set()

            await nursery.start(host)
            nursery.start_soon(_watch_signals, signals, root, timeout, root_scope)
            on_ready()
            await done.wait()
            nursery.cancel_scope.cancel()


class StateDbUnusable(HermesError):
    """state.db cannot be opened (written by a newer hermes, not a database, ...)."""


def _start_failure(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The `kind` error that made a child fail to start, if that is what happened."""
    if isinstance(exc, BaseExceptionGroup):
        return next((f for e in exc.exceptions if (f := _start_failure(e, kind))), None)
    if isinstance(exc, ChildStartError):
        return _start_failure(exc.__cause__, kind)
    return exc if isinstance(exc, kind) else None


def run_serve(
    home: HermesHome,
    config: Config,
    on_ready: Callable[[int], None],
    lock: bool = True,
    surfaces: Surfaces | None = None,
) -> None:
    """Hold the pid file for the life of the tree; AlreadyRunning if another serve has it.

    `lock=False` skips the one-serve-per-home lock (for a second serve on purpose:
    cron stays exactly-once through its leases, and state.db through SQLite's locks).
    `surfaces`: children the layers above add last (the operator surfaces).
    """
    home.ensure()
    become_subreaper()  # process trees that double-fork away stay ours to kill and reap
    mark_trees(home.root)  # so a later serve can clean up after this one if it is killed
    with hold_pid_file(home.serve_pid) if lock else contextlib.nullcontext():
        port = config.gateway.local.port

        def bound(actual: int) -> None:
            nonlocal port
            port = actual

        keys = ServeKeys.load(home, config)
        watch = None if lock else OTHER_SERVE_EVERY
        root = build_root(home, config, keys, bound, surfaces, watch_other_writers=watch)

        def ready() -> None:
            on_ready(port)

        async def main() -> None:
            await kill_leftovers(home.root)  # trees of an earlier, killed hermes of this home
            await serve_tree(root, config.gateway.drain_timeout, ready)

        try:
            with redacted_logs(keys.redact):
                trio.run(main)
        except (ChildStartError, BaseExceptionGroup) as exc:
            _forget_ports(home, lock)
            named = _start_failure(exc, PortInUse)
            if named is not None:
                raise named from None
            taken = _start_failure(exc, OSError)
            if taken is not None and taken.errno == errno.EADDRINUSE:
                local = config.gateway.local
                raise PortInUse(local.host, local.port) from None
            unusable = _start_failure(exc, StateError)
            if unusable is not None:
                raise StateDbUnusable(str(unusable)) from None
            raise
        _forget_ports(home, lock)
    log.info("serve stopped")
