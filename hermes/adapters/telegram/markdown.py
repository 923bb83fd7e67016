"""The agent's Markdown as Telegram MarkdownV2: code kept as code, **bold** as bold,
everything else escaped so Telegram shows it as written.

MarkdownV2 rejects a message with one unescaped reserved character ("can't parse
entities"); the outbox then sends that chunk once more as plain text. So this
converts only what it is sure of: fenced blocks, `inline code` and **bold**. In
code only ` and \\ are escaped; elsewhere every reserved character is. The
outbox splits the text measuring each chunk after this escaping (it grows the
text), so no chunk goes over Telegram's 4096 UTF-16 units.
"""

from __future__ import annotations

import re

RESERVED = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
_CODE = re.compile(r"([`\\])")
_FENCED = re.compile(r"^```([^\n`]*)\n(.*?)\n?```[ \t]*$", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`|\*\*([^*\n]+?)\*\*")


def escape(text: str) -> str:
    """Plain text that MarkdownV2 shows as written."""
    return RESERVED.sub(r"\\\1", text)


def _code(text: str) -> str:
    return _CODE.sub(r"\\\1", text)


def _inline(text: str) -> str:
    out, at = [], 0
    for found in _INLINE.finditer(text):
        out.append(escape(text[at : found.start()]))
        code, bold = found.groups()
        out.append(f"`{_code(code)}`" if code is not None else f"*{escape(bold)}*")
        at = found.end()
    out.append(escape(text[at:]))
    return "".join(out)


def to_markdown_v2(text: str) -> str:
    out, at = [], 0
    for block in _FENCED.finditer(text):
        out.append(_inline(text[at : block.start()]))
        language, body = block.groups()
        language = re.sub(r"[^\w+-]", "", language)  # a language tag is a bare word
        out.append(f"```{language}\n{_code(body)}\n```")
        at = block.end()
    out.append(_inline(text[at:]))
    return "".join(out)
