"""Typed errors the kernel raises to callers and parents."""

from __future__ import annotations

import trio


class ActorError(Exception):
    """Base for every error raised by the actor kernel."""


class ActorStopped(ActorError):
    """The actor behind an address is stopped (or stopping) and takes no messages."""

    def __init__(self, name: str) -> None:
        super().__init__(f"actor {name!r} is stopped")
        self.name = name


class CallTimeout(ActorError):
    """A call got no reply within its timeout; a late reply is dropped."""

    def __init__(self, name: str, timeout: float) -> None:
        super().__init__(f"call to actor {name!r} got no reply within {timeout:g}s")
        self.name = name
        self.timeout = timeout


class SupervisorGaveUp(ActorError):
    """A supervisor exceeded its restart intensity, stopped its children and failed."""

    def __init__(self, name: str, restarts: int, period: float, child: str) -> None:
        super().__init__(
            f"supervisor {name!r} gave up: more than {restarts} restarts within {period:g}s "
            f"(last crash: child {child!r})"
        )
        self.name = name
        self.child = child


class ChildStartError(ActorError):
    """A child failed before it reported ready."""

    def __init__(self, supervisor: str, child: str) -> None:
        super().__init__(f"child {child!r} of supervisor {supervisor!r} failed to start")
        self.supervisor = supervisor
        self.child = child


def is_cancel(exc: BaseException) -> bool:
    """Whether `exc` is a cancellation: trio.Cancelled, or a group of nothing else (what
    a nursery raises when the scope around it was cancelled while its tasks ran)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_cancel(e) for e in exc.exceptions)
    return False
