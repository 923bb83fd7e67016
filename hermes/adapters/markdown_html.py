"""An answer's Markdown as HTML, for the platforms whose messages carry HTML beside the
text (an email's HTML part; Matrix's `formatted_body` to come): markdown-it-py, CommonMark
with tables and strikethrough. Raw HTML the model wrote is escaped, never passed on, and
a link to anything but a safe scheme (javascript:) is left as text."""

from __future__ import annotations

from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def markdown_html(text: str) -> str:
    return _RENDERER.render(text)
