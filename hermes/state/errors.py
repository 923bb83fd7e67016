"""Typed errors of the state layer."""

from __future__ import annotations


class StateError(Exception):
    """Base for errors raised by hermes.state."""


class StateDbReplacedError(StateError):
    """The database file was replaced (mv or cp) under a live generation.

    The generation is retired: nothing more is written through it. Release it
    and acquire the path again to reach the new file.
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path} was replaced ({why}); release and acquire it again")
        self.path = path


class SessionNotFound(StateError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id


class SearchQueryError(StateError):
    """A full-text query that FTS5 cannot parse, or one that is too long."""


class SchemaTooNew(StateError):
    """The file was written by a newer hermes than this one."""
