"""Ref: a stable way to reach a supervised child across its restarts.

Whoever needs a sibling holds the sibling's Ref, given when the tree is wired.
The supervisor points it at the handle the child reports each time it starts
(an Address, or a service's typed handle) and clears it when that incarnation
ends, so nobody looks a sibling up by name or keeps a dead one's address.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from hermes.actors.errors import ActorStopped

H = TypeVar("H")


class Ref(Generic[H]):
    __slots__ = ("name", "kind", "_handle")

    def __init__(self, name: str, kind: type[H]) -> None:
        self.name = name
        self.kind = kind
        self._handle: H | None = None

    def __repr__(self) -> str:
        return f"<Ref {self.name}: {'running' if self._handle is not None else 'down'}>"

    def get(self) -> H:
        """The running child's handle; ActorStopped while it is down (restarting,
        stopped, not started yet)."""
        if self._handle is None:
            raise ActorStopped(self.name)
        return self._handle

    def current(self) -> H | None:
        """The running child's handle, or None while it is down."""
        return self._handle

    def point(self, handle: object | None) -> None:
        """Its supervisor's: the child (re)started with `handle`, or ended (None)."""
        if handle is not None and not isinstance(handle, self.kind):
            raise TypeError(
                f"child {self.name!r} handed out {type(handle).__name__}, not {self.kind.__name__}"
            )
        self._handle = handle
