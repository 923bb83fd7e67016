"""A system daemon a test runs (Dovecot, sshd) and what it writes to standard error, read
line by line on a thread: started on a port, known to listen once it says so, counted and
waited on by the lines it logs."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence

from tests.fakes.kit import wait


class DaemonFailed(RuntimeError):
    """The daemon would not start; the message holds what it logged."""


class DaemonLog:
    """The lines a daemon logged; `start` runs one and waits until it says `ready`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._lines: list[str] = []
        self._closed = False
        self._reader: threading.Thread | None = None

    def start(
        self, argv: Sequence[str], ready: str, timeout: float
    ) -> subprocess.Popen[bytes] | None:
        """Run `argv` (a session of its own, stdin and stdout closed) and read its stderr
        until a line holds `ready`: the process then; None when it ended because its port
        was taken meanwhile (try another); DaemonFailed, with what it said, otherwise."""
        with self._cond:
            self._lines.clear()
            self._closed = False
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # one process group: every process of it, killed at once
        )
        assert proc.stderr is not None
        self._reader = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._reader.start()

        def said() -> str:
            return f"{self.name} did not start within {timeout:g} s:\n{self.text}"

        try:
            wait(self._cond, lambda: self._closed or ready in "".join(self._lines), timeout, said)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if not self.closed and proc.poll() is None:
            return proc
        proc.wait()
        self.join(timeout)
        proc.stderr.close()
        if "Address already in use" in self.text:
            return None
        raise DaemonFailed(f"{self.name} exited at start:\n{self.text}")

    @property
    def text(self) -> str:
        with self._cond:
            return "".join(self._lines)

    @property
    def closed(self) -> bool:
        """Its stderr ended: no process of it holds the pipe any more."""
        with self._cond:
            return self._closed

    def count(self, *parts: str) -> int:
        """How many lines hold every one of `parts`."""
        with self._cond:
            return self._count(parts)

    def wait_count(self, *parts: str, count: int = 1, timeout: float = 10.0) -> None:
        """Until `count` lines hold every one of `parts`."""
        wait(self._cond, lambda: self._count(parts) >= count, timeout,
             lambda: f"{self.name} logged no {count} line(s) with {parts} within {timeout:g} s:"
                     f"\n{''.join(self._lines)[-3000:]}")  # fmt: skip

    def join(self, timeout: float) -> None:
        if self._reader is not None:
            self._reader.join(timeout)

    def _count(self, parts: tuple[str, ...]) -> int:
        return sum(all(p in line for p in parts) for line in self._lines)

    def _read(self, stream: object) -> None:
        assert hasattr(stream, "readline")
        for line in iter(stream.readline, b""):
            with self._cond:
                self._lines.append(line.decode(errors="replace"))
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
