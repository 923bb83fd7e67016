"""Introspection: a plain-data picture of the actor tree for `hermes status`."""

from __future__ import annotations

import enum
from typing import Any

import attrs


class RunState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


@attrs.frozen
class Snapshot:
    """One node of the tree: what it is, how it is doing, and its children."""

    name: str
    kind: str
    state: RunState
    restarts: int = 0
    mailbox_depth: int = 0
    children: tuple[Snapshot, ...] = ()
    detail: dict[str, Any] = attrs.field(factory=dict)  # what the node adds (an adapter's state)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "state": str(self.state),
            "restarts": self.restarts,
            "mailbox_depth": self.mailbox_depth,
            "children": [c.to_dict() for c in self.children],
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(
            name=data["name"],
            kind=data["kind"],
            state=RunState(data["state"]),
            restarts=data["restarts"],
            mailbox_depth=data["mailbox_depth"],
            children=tuple(cls.from_dict(c) for c in data["children"]),
            detail=data.get("detail", {}),
        )

    def render(self, indent: int = 0) -> str:
        """An indented table, one line per node."""
        pad = "  " * indent
        line = (
            f"{pad}{self.name:<{max(1, 28 - len(pad))}} {self.kind:<14} {self.state:<9} "
            f"restarts={self.restarts} mailbox={self.mailbox_depth}"
        )
        if self.detail:
            line += " " + " ".join(f"{k}={v}" for k, v in self.detail.items() if v is not None)
        return "\n".join([line, *(c.render(indent + 1) for c in self.children)])
