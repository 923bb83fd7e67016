"""A small pool of read-only connections, so reads never queue behind the writer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import apsw
import outcome
import trio

from hermes.state.connection import open_reader
from hermes.state.errors import StateError

T = TypeVar("T")


class PoolClosed(StateError):
    """The pool was closed (its generation retired or released); the handle turns it
    into the NotWritten that says why."""


class ReadPool:
    """Up to `size` read-only connections, opened on demand, each used by one thread at a time."""

    def __init__(self, path: Path, size: int = 4) -> None:
        self.path = path
        self._idle: list[apsw.Connection] = []
        self._limiter = trio.CapacityLimiter(size)
        self._busy = 0
        self._closed = False
        self._all_back = trio.Event()
        self._all_back.set()

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(conn, *args, **kwargs)` on a read connection in a worker thread."""
        if self._closed:
            raise PoolClosed(str(self.path))
        async with self._limiter:
            if self._closed:
                raise PoolClosed(str(self.path))
            conn = self._idle.pop() if self._idle else None
            self._busy += 1
            self._all_back = trio.Event() if self._busy == 1 else self._all_back
            try:
                conn, result = await trio.to_thread.run_sync(self._use, conn, fn, args, kwargs)
            finally:
                self._busy -= 1
                if conn is not None:
                    if self._closed:
                        conn.close()
                    else:
                        self._idle.append(conn)
                if self._busy == 0:
                    self._all_back.set()
            return result.unwrap()

    def _use(
        self, conn: apsw.Connection | None, fn: Callable[..., T], args: tuple, kwargs: dict
    ) -> tuple[apsw.Connection, outcome.Outcome]:
        if conn is None:
            conn = open_reader(self.path)
        return conn, outcome.capture(fn, conn, *args, **kwargs)

    async def close(self) -> None:
        """Close idle connections now and busy ones as their reads finish."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        await self._all_back.wait()
