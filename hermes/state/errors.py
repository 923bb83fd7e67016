"""Typed errors of the state layer."""

from __future__ import annotations


class StateError(Exception):
    """Base for errors raised by hermes.state."""


class NotWritten(StateError):
    """Raised before anything of the request was written: the same write through a
    fresh generation is safe (DbHolder retries it once)."""


class StateDbReplacedError(NotWritten):
    """The database file was replaced (mv or cp) under a live generation.

    The generation is retired: nothing more is written through it. Release it
    and acquire the path again to reach the new file.
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path} was replaced ({why}); release and acquire it again")
        self.path = path
        self.why = why

    def __reduce__(self) -> tuple:  # it crosses from the writer's process
        return type(self), (self.path, self.why)


class WriterStopped(NotWritten):
    """The generation's writer had already stopped (its process died); acquire the
    path again for a new one."""


class SessionNotFound(StateError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id

    def __reduce__(self) -> tuple:  # it crosses from the writer's process
        return type(self), (self.session_id,)


class SearchQueryError(StateError):
    """A full-text query that FTS5 cannot parse, or one that is too long."""


class SchemaTooNew(StateError):
    """The file was written by a newer hermes than this one."""
