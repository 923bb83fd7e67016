"""Full-text search over messages: bm25 ranking, snippets, a typed error for bad queries."""

from __future__ import annotations

import apsw
import attrs

from hermes.state.errors import SearchQueryError

MAX_QUERY_CHARS = 500


@attrs.frozen
class SearchHit:
    message_id: int
    session_id: str
    role: str
    timestamp: float
    snippet: str
    rank: float
    untrusted: str | None = None  # why the message's text is not an owner's (None: it is)


def search_messages(
    conn: apsw.Connection,
    query: str,
    limit: int = 20,
    include_tool: bool = False,
    session_id: str | None = None,
    made_by: tuple[str, str] | None = None,
) -> list[SearchHit]:
    """Best matches first. Tool output is searched only when asked (`include_tool`);
    `made_by` (platform, user id) keeps to that user's sessions."""
    query = query.strip()
    if not query:
        raise SearchQueryError("the search query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchQueryError(f"the search query is longer than {MAX_QUERY_CHARS} characters")
    where = ["messages_fts MATCH ?"]
    args: list[object] = [query]
    if not include_tool:
        where.append("m.role != 'tool'")
    if session_id is not None:
        where.append("m.session_id = ?")
        args.append(session_id)
    if made_by is not None:
        where.append("m.session_id IN (SELECT id FROM sessions WHERE source = ? AND user_id = ?)")
        args.extend(made_by)
    sql = (
        "SELECT m.id, m.session_id, m.role, m.timestamp,"
        " snippet(messages_fts, 0, '[', ']', '…', 12), bm25(messages_fts), m.untrusted"
        " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
        f" WHERE {' AND '.join(where)} ORDER BY bm25(messages_fts), m.id DESC LIMIT ?"
    )
    try:
        rows = list(conn.execute(sql, (*args, limit)))
    except apsw.SQLError as exc:  # the statement is fixed: only the MATCH text can be wrong
        raise SearchQueryError(f"cannot search for {query!r}: {exc}") from None
    return [SearchHit(*row) for row in rows]
