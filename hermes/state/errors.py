"""Typed errors of the state layer."""

from __future__ import annotations

from hermes.actors.errors import HermesError, Invalid, NotFound, Unavailable


class StateError(HermesError):
    """Base for errors raised by hermes.state."""


class NotWritten(StateError, Unavailable):
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


class SessionNotFound(StateError, NotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id


class SearchQueryError(StateError, Invalid):
    """A full-text query that FTS5 cannot parse, or one that is too long."""


class SchemaTooNew(StateError, Invalid):
    """The file was written by a newer hermes than this one."""

    def __init__(self, path: str, version: int, known: int) -> None:
        super().__init__(
            f"{path}: schema version {version} is newer than this hermes knows ({known})"
        )
        self.path = path
        self.version = version


class SchemaUnknown(StateError, Invalid):
    """The file's schema was not made by the baseline: a development build's state.db
    from before it (nothing of those was released, so nothing migrates them), or a
    file that is not a state.db."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(
            f"{path}: {why}; this hermes cannot use it: move it aside and hermes serve"
            " makes a new one"
        )
        self.path = path
        self.why = why
