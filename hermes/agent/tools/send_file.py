"""send_file: send a file to the chat (or, for an owner, any chat) through the outbox.

The file is one under the session's own directory (what its commands wrote); an owner
may also send from the media cache and the tools' output files. hermes sends its own
copy, so the file may change or go once the tool returned. A file larger than the
platform takes is not sent: the chat is told so, and the tool says why."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from hermes.adapters.contract import Target
from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.agent.tools.send_message import sendable
from hermes.delivery.files import queue_file, stage, too_large
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import enqueue


async def deliver(
    ctx: ToolContext,
    where: Target,
    source: Path,
    caption: str = "",
    allowed: Callable[[Path], bool] | None = None,
) -> dict:
    """Queue `source` to `where` (hermes's copy of it), or tell the chat it is over the
    platform's limit: what happened, for the tool's result. `allowed`: asked of the real
    path of the file as opened (PermissionError when it says no)."""
    assert ctx.files is not None
    key = f"file:{ctx.session_id}:{secrets.token_hex(6)}"
    size = (await trio.Path(source).stat()).st_size
    refused = too_large(where.platform, source.name, size)
    if refused is not None:  # the chat is told, and nothing is copied or uploaded
        await ctx.db.write(
            enqueue, where, [refused], "send", key, ctx.clock.now(), origin=ctx.session_id
        )
        nudge(ctx.outbox)
        return {"sent": False, "why": refused, "told_the_chat": True}
    file = await trio.to_thread.run_sync(lambda: stage(ctx.files.outgoing, source, allowed=allowed))
    rows = await ctx.db.write(
        queue_file, where, file, caption, "send", key, ctx.clock.now(), ctx.session_id
    )
    nudge(ctx.outbox)
    return {"queued": True, "file": file.name, "bytes": file.size, "outbox_rows": rows}


@attrs.frozen
class SendFileTool:
    name = "send_file"
    description = (
        "Send a file to the chat: path is a file your commands wrote (relative paths are in"
        " the session's directory); caption is optional; target (platform:chat_id) only to"
        " send elsewhere."
    )
    parameters = obj(
        ["path"], path={"type": "string"}, caption={"type": "string"}, target={"type": "string"}
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.files is None:
            raise ToolError("files cannot be sent from here")
        # Else the chat this turn's answer goes to (an inbound webhook's: the one it names).
        where = ctx.origin.answers() if ctx.origin is not None else None
        if args.get("target"):
            where = sendable(ctx, str(args["target"]), "files")
        elif where is None:
            raise ToolError("there is no chat to send to: name a target")
        source = await trio.to_thread.run_sync(self._allowed, need(args, "path"), ctx)
        caption = str(args.get("caption") or "")
        try:
            # the file opened is checked again: a link swapped in since leads nowhere
            done = await deliver(ctx, where, source, caption, lambda real: permitted(real, ctx))
        except PermissionError as exc:
            raise ToolError(str(exc)) from None
        return json.dumps(done)

    def _allowed(self, path: str, ctx: ToolContext) -> Path:
        """The file, resolved (links followed), if it lies where this caller may send from."""
        files = ctx.files
        assert files is not None
        found = (files.workspace / path).resolve()  # an absolute path replaces the workspace
        if not permitted(found, ctx):
            owns = files.own or ctx.caller.is_owner
            where = f"under {files.workspace}" if owns else "of this session's own directory"
            raise ToolError(f"{path} is not a file you may send: only files {where} are")
        if not found.is_file():
            raise ToolError(f"{path} is not a file")
        return found


def permitted(found: Path, ctx: ToolContext) -> bool:
    """Whether the file at the real path `found` lies where this caller may send from."""
    files = ctx.files
    assert files is not None
    roots = [files.workspace] if files.own or ctx.caller.is_owner else []
    if ctx.caller.is_owner:
        roots += [files.cache, files.outputs]
    inside = [r.resolve() for r in roots if found.is_relative_to(r.resolve())]
    home = files.home.resolve()
    if found.is_relative_to(home):  # HERMES_HOME holds secrets: only these parts of it
        parts = (home / "workspace", files.cache.resolve(), files.outputs.resolve())
        inside = [r for r in inside if any(r.is_relative_to(p) for p in parts)]
    return bool(inside)
