"""session_search: full-text search over past conversations: the caller's own, or
every one for an owner."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.state.errors import SearchQueryError
from hermes.state.search import search_messages


@attrs.frozen
class SessionSearchTool:
    name = "session_search"
    description = "Search past conversations (full text). Returns matching snippets."
    parameters = obj(["query"], query={"type": "string"}, limit={"type": "integer"})

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        caller = ctx.caller
        mine = None if caller.is_owner else (caller.platform, caller.user_id)
        try:
            hits = await ctx.db.read(
                search_messages, need(args, "query"), int(args.get("limit", 10)), made_by=mine
            )
        except SearchQueryError as exc:
            raise ToolError(str(exc)) from None
        for hit in hits:
            if hit.untrusted:  # an old message of someone else's is still their words
                ctx.took_in(f"session_search found {hit.untrusted}")
                break
        return json.dumps(
            [{"session": h.session_id, "role": h.role, "snippet": h.snippet} for h in hits]
        )
