"""An MCP server's tool as the model sees it (`mcp_<server>_<tool>`), and its result as
text the model reads.

What a server sends is outside input: descriptions and schemas are capped before
they reach a prompt, results are capped like a command's output, and binary
content is written to a file in the session's spill directory and named, never
put in the prompt.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio
from mcp import types

from hermes.agent.mcp.link import ServerGone, ServerLink
from hermes.agent.tools.base import ToolContext, capped
from hermes.agent.tools.send_file import deliver
from hermes.config import Role

NAME_LIMIT = 64  # characters of a function name the model APIs take
DESCRIPTION_LIMIT = 1_000
SCHEMA_LIMIT = 16_000  # characters of one tool's JSON schema; a larger tool is not offered
BINARY_LIMIT = 10 * 1024 * 1024  # bytes of one image or blob written to disk
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str:
    """`mcp_<server>_<tool>` in the characters a model's function name may hold."""
    return f"mcp_{server}_{_NOT_NAME.sub('_', tool)}"[:NAME_LIMIT]


def fits(tool: types.Tool) -> bool:
    """Whether the tool's schema is small enough to offer in every prompt."""
    return len(json.dumps(tool.inputSchema)) <= SCHEMA_LIMIT


@attrs.frozen
class McpTool:
    """One tool of one server; `current_link` finds the server's live session at call time
    (it changes on every restart of the server)."""

    name: str
    server: str
    remote: str  # the tool's name on its server
    description: str
    parameters: dict[str, Any]
    roles: tuple[Role, ...]
    timeout: float
    current_link: Callable[[], ServerLink | None] = attrs.field(eq=False, repr=False)

    @classmethod
    def of(
        cls,
        server: str,
        tool: types.Tool,
        roles: tuple[Role, ...],
        timeout: float,
        link: Callable[[], ServerLink | None],
    ) -> McpTool:
        description = (tool.description or tool.title or tool.name)[:DESCRIPTION_LIMIT]
        schema = (
            tool.inputSchema
            if tool.inputSchema.get("type") == "object"
            else {"type": "object", "properties": {}}
        )
        described = f"[MCP server {server}] {description}"
        return cls(
            offered_name(server, tool.name),
            server,
            tool.name,
            described,
            schema,
            roles,
            timeout,
            link,
        )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        link = self.current_link()
        if link is None:
            raise ServerGone(f"the MCP server {self.server} is not running now (see /mcp)")
        result = await link.call(self.remote, args, self.timeout)
        ctx.took_in(f"the MCP server {self.server}'s answer")  # a server's, not the owner's
        images: list[Path] = []

        def read() -> str:  # decoding and writing up to megabytes: not on the Trio thread
            text = render(result, ctx.terminal.options.spill_dir, images)
            return capped(f"error: {text}" if result.isError else text, ctx)

        text = await trio.to_thread.run_sync(read)
        where = ctx.origin.answers() if ctx.origin is not None else None
        if where is None or ctx.files is None:
            return text
        for image in images:  # what the tool made goes to the chat as a file
            done = await deliver(ctx, where, image)
            said = "sent to the chat" if done.get("queued") else done.get("why")
            text += f"\n[{image.name}: {said}]"
        return text


def render(
    result: types.CallToolResult, spill_dir: Path | None, images: list[Path] | None = None
) -> str:
    """The result's content blocks as text: text as it is, embedded text resources with
    their URI, images, audio and blobs saved to a file and named (the images' files also
    added to `images`)."""
    parts = [_block(block, spill_dir, images) for block in result.content]
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent))
    return "\n".join(parts)


def _block(block: Any, spill_dir: Path | None, images: list[Path] | None) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        line, path = _saved(block.type, block.data, block.mimeType, spill_dir)
        if path is not None and isinstance(block, types.ImageContent) and images is not None:
            images.append(path)
        return line
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        return _saved(f"resource {resource.uri}", resource.blob, resource.mimeType, spill_dir)[0]
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}: {block.name}]"
    return f"[{getattr(block, 'type', 'content')} not shown]"


def _saved(
    kind: str, data: str, mime: str | None, spill_dir: Path | None
) -> tuple[str, Path | None]:
    """A base64 payload written to a private file in `spill_dir`: the line naming it, and
    the file (None: not kept)."""
    mime = mime or "application/octet-stream"
    if spill_dir is None or len(data) > BINARY_LIMIT * 4 // 3 + 4:
        return f"[{kind}: {mime}, {len(data) * 3 // 4:,} bytes, not kept]", None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{kind}: {mime}, not valid base64]", None
    spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    suffix = re.sub(r"[^a-z0-9]", "", mime.rpartition("/")[2].lower())[:8] or "bin"
    path = spill_dir / f"mcp-{secrets.token_hex(6)}.{suffix}"
    path.write_bytes(raw)
    path.chmod(0o600)
    return f"[{kind}: {mime}, {len(raw):,} bytes, saved to {path}]", path
