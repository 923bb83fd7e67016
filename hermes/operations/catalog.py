"""Every operator action by its name, found in the module of its area (`cron.add` in
hermes.operations.cron), which is imported only when one of its actions is asked for: a
CLI command loads its own area, not every action's dependencies."""

from __future__ import annotations

import importlib

from hermes.operations.context import Operation

AREAS = {  # an action's first word: the module that lists it
    "pairing": "pairing",
    "identities": "identities",
    "approvals": "approvals",
    "cron": "cron",
    "outbox": "outbox",
    "sessions": "sessions",
    "channels": "channels",
    "status": "status",
    "context": "skills",
}


def find(name: str) -> Operation | None:
    """The action called `name`, or None."""
    module = AREAS.get(name.split(".")[0])
    if module is None:
        return None
    listed = importlib.import_module(f"hermes.operations.{module}").OPERATIONS
    return next((op for op in listed if op.name == name), None)


def every() -> dict[str, Operation]:
    """All actions by name (every area imported)."""
    found = {}
    for module in dict.fromkeys(AREAS.values()):
        for op in importlib.import_module(f"hermes.operations.{module}").OPERATIONS:
            found[op.name] = op
    return found
