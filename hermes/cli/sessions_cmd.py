"""`hermes sessions list | show ID | search QUERY | export ID`: read state.db directly."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from hermes.cli import exit_codes
from hermes.home import HermesHome
from hermes.state.export import to_json, to_markdown
from hermes.state.maintenance import open_plain
from hermes.state.messages import messages_of
from hermes.state.search import search_messages
from hermes.state.sessions import get_session, list_sessions

NO_DB_YET = "no state.db yet: hermes serve creates it"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sessions", help="list, show, search and export conversations")
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
    path = HermesHome.from_env().state_db
    if not path.exists():
        return _without_db(args)
    conn = open_plain(path)
    try:
        return ACTIONS[args.action](conn, args)
    finally:
        conn.close()


def _without_db(args: argparse.Namespace) -> int:
    """A home where serve never ran has no sessions yet: say so and create nothing."""
    if args.action == "list":
        print(f"no sessions ({NO_DB_YET})")
        return exit_codes.OK
    if args.action == "search":
        print(f"no matches ({NO_DB_YET})")
        return exit_codes.OK
    return _missing(args.id)


def _list(conn, args: argparse.Namespace) -> int:
    rows = list_sessions(conn, args.limit, args.source)
    if not rows:
        print("no sessions")
        return exit_codes.OK
    print(f"{'ID':<24} {'SOURCE':<10} {'MSGS':>5} {'LAST ACTIVE':<17} TITLE")
    for r in rows:
        active = _when(r.last_activity_at or r.started_at)
        ended = " (ended)" if r.ended_at else ""
        print(f"{r.id:<24} {r.source:<10} {r.message_count:>5} {active:<17} {r.title or ''}{ended}")
    return exit_codes.OK


def _missing(session_id: str) -> int:
    print(f"hermes: no session {session_id!r}", file=sys.stderr)
    return exit_codes.FAILED


def _show(conn, args: argparse.Namespace) -> int:
    session = get_session(conn, args.id)
    if session is None:
        return _missing(args.id)
    for key, value in session.to_dict().items():
        if value is not None:
            print(f"{key}: {value}")
    print()
    for m in messages_of(conn, args.id):
        who = m.role if m.role != "tool" else f"tool:{m.tool_name}"
        print(f"[{_when(m.timestamp)}] {who}: {m.content or m.tool_calls or ''}")
    return exit_codes.OK


def _search(conn, args: argparse.Namespace) -> int:
    hits = search_messages(conn, args.query, args.limit, args.tools)
    for h in hits:
        print(f"{h.session_id:<24} #{h.message_id:<7} {h.role:<9} {h.snippet}")
    if not hits:
        print("no matches")
    return exit_codes.OK


def _export(conn, args: argparse.Namespace) -> int:
    session = get_session(conn, args.id)
    if session is None:
        return _missing(args.id)
    messages = messages_of(conn, args.id)
    print(to_json(session, messages) if args.format == "json" else to_markdown(session, messages))
    return exit_codes.OK


ACTIONS = {"list": _list, "show": _show, "search": _search, "export": _export}
