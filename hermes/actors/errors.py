"""The root of hermes's errors, its families, and the kernel's own errors.

Every error hermes raises on purpose is a HermesError (config.py's, which sits
beside the kernel and imports nothing, are the one exception). A caller that
only needs to know what to do next catches a family: Invalid (the request is
wrong; asking again the same way fails again) or Unavailable (a part is
stopped, busy or replaced; the same request may succeed later). The CLI, the
dashboard and JSON-RPC map these two families to their exit statuses, HTTP
statuses and error codes in one place each.
"""

from __future__ import annotations


class HermesError(Exception):
    """Root of every error hermes raises on purpose."""


class Invalid(HermesError):
    """The request is wrong (bad input, a rule says no): the same request fails again."""


class NotFound(Invalid):
    """The request names something that does not exist (a job, a session, a row, a code)."""


class Unavailable(HermesError):
    """Something the request needs is stopped, busy or replaced: it may succeed later."""


class Outside(Unavailable):
    """A failure outside hermes (a network down, a peer gone, a peer silent): expected in a
    long life, so the supervisor that restarts the actor says it in one line, its
    traceback only at debug level."""


class PortInUse(Unavailable):
    """A port this process must listen on is taken (another hermes, another program)."""

    def __init__(self, host: str, port: int, key: str = "gateway.local.port") -> None:
        super().__init__(f"{host}:{port} is already in use; stop what holds it or set {key}")


class Throttled(Unavailable):
    """Refused for now: too many tries or requests (a pairing lockout); later it may pass."""


class ActorError(HermesError):
    """Base for every error raised by the actor kernel."""


class ActorStopped(ActorError, Unavailable):
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
