"""/ready: whether the gateway is doing its job, not only whether it runs.

Ready means state.db answers, every adapter is live and made progress within its
own deadline, and nothing in the tree has stopped that should run. An MCP server
that keeps failing is listed under `degraded`: it costs its tools, not readiness. The body says
what was looked at, so an operator sees which part is behind and by how much.
"""

from __future__ import annotations

from typing import Any

import apsw
import attrs

from hermes.actors.link import DOWN, LIVE
from hermes.actors.snapshot import RunState, Snapshot
from hermes.cron.store import list_jobs
from hermes.delivery.outbox_store import DEAD, UNKNOWN, depth, state_counts
from hermes.state.db import Db
from hermes.state.errors import StateError


@attrs.frozen
class Readiness:
    ready: bool
    body: dict[str, Any]


def walk(node: Snapshot, path: str = "") -> list[tuple[str, Snapshot]]:
    """Every node of the tree with its path (serve/adapters/telegram)."""
    here = f"{path}/{node.name}" if path else node.name
    return [(here, node)] + [pair for child in node.children for pair in walk(child, here)]


def find(node: Snapshot, name: str) -> Snapshot | None:
    return next((c for c in node.children if c.name == name), None)


def adapters(tree: Snapshot) -> dict[str, dict[str, Any]]:
    """Each adapter's state, reason, age of its last progress, deadline and restarts."""
    node = find(tree, "adapters")
    if node is None:
        return {}
    return {
        a.name: {
            "state": a.detail.get("adapter", str(a.state)),
            "reason": a.detail.get("reason"),
            "progress_age": a.detail.get("progress_age"),
            "deadline": a.detail.get("deadline"),
            "restarts": a.restarts,
        }
        for a in node.children
    }


def mcp_servers(tree: Snapshot) -> dict[str, dict[str, Any]]:
    """Each MCP server's state, reason and restarts (under `mcp`, each server has its own
    supervisor over its actor)."""
    node = find(tree, "mcp")
    if node is None:
        return {}
    found = {}
    for server in node.children:
        actor = server.children[0] if server.children else None
        detail = actor.detail if actor is not None else {}
        found[server.name] = {
            "state": detail.get("mcp", str(server.state)),
            "reason": detail.get("reason"),
            "restarts": actor.restarts if actor is not None else 0,
        }
    return found


def _adapter_problem(name: str, a: dict[str, Any]) -> str | None:
    if a["state"] != LIVE:
        why = f": {a['reason']}" if a["reason"] else ""
        return f"adapter {name} is {a['state']}{why}"
    age, deadline = a["progress_age"], a["deadline"]
    if age is not None and deadline is not None and age > deadline:
        return f"adapter {name} made no progress for {age:g} s (deadline {deadline:g} s)"
    return None


def _state_of(conn: apsw.Connection, now: float) -> dict[str, Any]:
    """The outbox and the scheduler as state.db has them, in one read."""
    count, oldest = depth(conn)
    states = state_counts(conn)
    jobs = list_jobs(conn)
    due = [j.next_run_at for j in jobs if j.next_run_at is not None and j.state == "scheduled"]
    return {
        "outbox": {
            "depth": count,
            "oldest_pending_age": round(now - oldest, 1) if oldest is not None else None,
            "dead": states.get(DEAD, 0),
            "unknown": states.get(UNKNOWN, 0),  # sent, never confirmed: possibly delivered
        },
        "scheduler": {
            "next_fire": min(due) if due else None,
            "failing": [
                {"job": j.id, "name": j.name, "streak": j.failure_streak, "error": j.last_error}
                for j in jobs
                if j.failure_streak > 0
            ],
        },
    }


async def readiness(tree: Snapshot, db: Db, now: float) -> Readiness:
    """Ready or not, and why, as of `now` (ages of the outbox's oldest rows)."""
    problems = []
    body: dict[str, Any] = {"tree": str(tree.state)}
    try:
        body.update(await db.read(_state_of, now))
        body["state_db"] = "open"
    except (StateError, apsw.Error) as exc:
        body["state_db"] = f"unusable: {exc}"
        problems.append(f"state.db: {exc}")
    body["adapters"] = adapters(tree)
    problems += [p for n, a in body["adapters"].items() if (p := _adapter_problem(n, a))]
    if tree.state is not RunState.RUNNING:
        problems.append(f"the serve tree is {tree.state}")
    problems += [
        f"{path} has stopped"
        for path, node in walk(tree)
        if node.kind.startswith("Supervisor") and node.state is RunState.STOPPED
    ]
    body["mcp"] = mcp_servers(tree)
    # A failing MCP server costs its tools, not the gateway: listed, never unready.
    body["degraded"] = [
        f"MCP server {name} is down: {m['reason']}"
        for name, m in body["mcp"].items()
        if m["state"] == DOWN
    ]
    body["problems"] = problems
    body["ready"] = not problems
    return Readiness(not problems, body)
