"""Typed errors of the state layer."""

from __future__ import annotations


class StateError(Exception):
    """Base for errors raised by hermes.state."""


class NotWritten(StateError):
    """Raised before anything of the request was written: the same write through a
    fresh generation is safe (the handle, hermes.state.db.Db, retries it once)."""


class StateDbReplacedError(NotWritten):
    """The database file was replaced (mv or cp) under a live generation.

    The generation is retired: nothing more is written through it. Release it
    and acquire the path again to reach the new file.
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path} was replaced ({why}); release and acquire it again")
        self.path = path
        self.why = why


class WriterStopped(NotWritten):
    """The generation's writer had already stopped (a batch failed as a whole and
    crashed it); acquire the path again for a new one."""


class SessionNotFound(StateError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id


class SearchQueryError(StateError):
    """A full-text query that FTS5 cannot parse, or one that is too long."""


class SchemaTooNew(StateError):
    """The file was written by a newer hermes than this one."""
