"""An answer's Markdown as Signal shows it: the plain text, and signal-cli's text-style
ranges over it (`start:length:STYLE`, in UTF-16 code units) for bold, italic,
strikethrough and monospace. Parsed by markdown-it-py (CommonMark), so what the model
wrote as Markdown is read as a Markdown reader would; what Signal cannot show (headings,
lists, links) becomes plain text that reads the same."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token

_PARSER = MarkdownIt("commonmark").enable("strikethrough")
_INLINE = {"strong": "BOLD", "em": "ITALIC", "s": "STRIKETHROUGH"}


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.at = 0  # UTF-16 code units written
        self.styles: list[str] = []
        self.open: dict[str, list[int]] = {}
        self.after_bullet = False

    def write(self, text: str, bullet: bool = False) -> None:
        self.parts.append(text)
        self.at += utf16(text)
        self.after_bullet = bullet

    def start(self, style: str) -> None:
        self.open.setdefault(style, []).append(self.at)

    def end(self, style: str) -> None:
        starts = self.open.get(style)
        if starts:
            begin = starts.pop()
            if self.at > begin:
                self.styles.append(f"{begin}:{self.at - begin}:{style}")

    def styled(self, text: str, style: str) -> None:
        self.start(style)
        self.write(text)
        self.end(style)

    def block_gap(self) -> None:
        """A blank line before the next block (none at the start)."""
        tail = "".join(self.parts[-2:])
        if self.parts and not tail.endswith("\n\n"):
            self.write("\n" if tail.endswith("\n") else "\n\n")


def styled(markdown: str) -> tuple[str, list[str]]:
    """The text to send and its text-style ranges."""
    out = _Writer()
    lists: list[list[int]] = []  # the counters of the lists we are in (-1: bullets)
    for token in _PARSER.parse(markdown):
        kind = token.type
        if kind in ("paragraph_open", "heading_open", "fence", "code_block", "hr", "html_block"):
            if not (token.hidden or out.after_bullet):  # a tight list's items: no gap
                out.block_gap()
        if kind == "heading_open":
            out.start("BOLD")
        elif kind == "heading_close":
            out.end("BOLD")
        elif kind in ("bullet_list_open", "ordered_list_open"):
            start = int(token.attrGet("start") or 1) if kind == "ordered_list_open" else -1
            lists.append([start])
            if len(lists) == 1:
                out.block_gap()
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open":
            if out.parts and not out.parts[-1].endswith("\n"):
                out.write("\n")
            out.write("  " * (len(lists) - 1) + _bullet(lists), bullet=True)
            if lists[-1][0] >= 0:
                lists[-1][0] += 1
        elif kind in ("fence", "code_block"):
            out.styled(token.content.rstrip("\n"), "MONOSPACE")
        elif kind == "hr":
            out.write("———")
        elif kind == "html_block":
            out.write(token.content.rstrip("\n"))
        elif kind == "inline":
            _inline(out, token.children or [])
    return "".join(out.parts).rstrip("\n"), out.styles


def _bullet(lists: list[list[int]]) -> str:
    number = lists[-1][0]
    return "• " if number < 0 else f"{number}. "


def _inline(out: _Writer, children: list[Token]) -> None:
    link: list[str] = []
    for child in children:
        kind = child.type
        if kind == "text" or kind == "html_inline":
            out.write(child.content)
        elif kind in ("softbreak", "hardbreak"):
            out.write("\n")
        elif kind == "code_inline":
            out.styled(child.content, "MONOSPACE")
        elif kind.endswith("_open") and kind[:-5] in _INLINE:
            out.start(_INLINE[kind[:-5]])
        elif kind.endswith("_close") and kind[:-6] in _INLINE:
            out.end(_INLINE[kind[:-6]])
        elif kind == "link_open":
            link.append(str(child.attrGet("href") or ""))
        elif kind == "link_close" and link:
            href = link.pop()
            if href and not "".join(out.parts).endswith(href):
                out.write(f" ({href})")
        elif kind == "image":
            out.write(child.content or str(child.attrGet("src") or ""))
