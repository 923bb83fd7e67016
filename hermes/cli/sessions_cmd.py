"""`hermes sessions list | show ID | search QUERY | export ID`, through the operator
actions (hermes.operations.sessions)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hermes.actors.errors import NotFound
from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.act import perform
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.sessions import (
    ExportArgs,
    Exported,
    Hit,
    ListArgs,
    SearchArgs,
    ShowArgs,
    Transcript,
)
from hermes.state.rows import SessionRow

NO_DB_YET = "no state.db yet: hermes serve creates it"


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="sessions, most recently active first")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--source", help="only this platform (local, telegram, cron, ...)")
    show = actions.add_parser("show", help="one session and its messages")
    show.add_argument("id")
    search = actions.add_parser("search", help="full-text search over messages")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--tools", action="store_true", help="search tool output too")
    export = actions.add_parser("export", help="a session as JSON or Markdown on stdout")
    export.add_argument("id")
    export.add_argument("--format", choices=["json", "md"], default="json")
    parser.set_defaults(func=sessions)


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M") if ts else "-"


def sessions(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    if not home.state_db.exists():
        return _without_db(args)
    config = load_config(home.config_path, Config, SECTIONS)
    name, request = REQUESTS[args.action](args)
    return SHOW[args.action](perform(home, config, name, request))


def _without_db(args: argparse.Namespace) -> int:
    """A home where serve never ran has no sessions yet: say so and create nothing."""
    if args.action == "list":
        print(f"no sessions ({NO_DB_YET})")
        return exit_codes.OK
    if args.action == "search":
        print(f"no matches ({NO_DB_YET})")
        return exit_codes.OK
    raise NotFound(f"no session {args.id!r}")


REQUESTS: dict[str, Callable[[argparse.Namespace], tuple[str, Any]]] = {
    "list": lambda a: ("sessions.list", ListArgs(a.limit, a.source)),
    "show": lambda a: ("sessions.show", ShowArgs(a.id)),
    "search": lambda a: ("sessions.search", SearchArgs(a.query, a.limit, a.tools)),
    "export": lambda a: ("sessions.export", ExportArgs(a.id, a.format)),
}


def _list(rows: list[SessionRow]) -> int:
    if not rows:
        print("no sessions")
        return exit_codes.OK
    print(f"{'ID':<24} {'SOURCE':<10} {'MSGS':>5} {'LAST ACTIVE':<17} TITLE")
    for r in rows:
        active = _when(r.last_activity_at or r.started_at)
        ended = " (ended)" if r.ended_at else ""
        print(f"{r.id:<24} {r.source:<10} {r.message_count:>5} {active:<17} {r.title or ''}{ended}")
    return exit_codes.OK


def _show(found: Transcript) -> int:
    for key, value in found.session.to_dict().items():
        if value is not None:
            print(f"{key}: {value}")
    print()
    for m in found.messages:
        who = m.role if m.role != "tool" else f"tool:{m.tool_name}"
        undone = " (undone)" if m.undone_at is not None else ""
        print(f"[{_when(m.timestamp)}] {who}{undone}: {m.content or m.tool_calls or ''}")
    if found.children:
        print("\nsubagents:")
    for child in found.children:  # each one's own transcript: hermes sessions show ID
        tokens = f"{child.input_tokens} in, {child.output_tokens} out"
        print(f"  {child.id}  {child.end_reason or 'running'}  {tokens}  {child.title or ''}")
    return exit_codes.OK


def _search(hits: list[Hit]) -> int:
    for h in hits:
        print(f"{h.session:<24} #{h.message:<7} {h.role:<9} {h.snippet}")
    if not hits:
        print("no matches")
    return exit_codes.OK


def _export(exported: Exported) -> int:
    print(exported.text)
    return exit_codes.OK


SHOW: dict[str, Callable[[Any], int]] = {
    "list": _list,
    "show": _show,
    "search": _search,
    "export": _export,
}
