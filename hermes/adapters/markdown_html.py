"""An answer's Markdown as HTML, for the platforms whose messages carry HTML beside the
text (an email's HTML part, Matrix's `formatted_body`): markdown-it-py, CommonMark with
tables and strikethrough. Raw HTML the model wrote is escaped, never passed on, and a link
to anything but a safe scheme (javascript:) is left as text. An image becomes a link to
it: a remote `<img>` would load when the message is opened, telling its server who read
the answer and when (a tracking pixel the model was talked into writing)."""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict


def _image_as_link(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """`![alt](src)` as `<a href="src">alt</a>` (the address itself when there is no alt
    text), or the alt text alone inside a link: a link holds no other link."""
    image = tokens[idx]
    alt = renderer.renderInlineAsText(image.children or [], options, env)
    opened = sum(t.nesting for t in tokens[:idx] if t.type in ("link_open", "link_close"))
    if opened > 0:
        return escapeHtml(alt)
    src = str(image.attrGet("src") or "")
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'


_RENDERER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_RENDERER.add_render_rule("image", _image_as_link)


def markdown_html(text: str) -> str:
    return _RENDERER.render(text)
