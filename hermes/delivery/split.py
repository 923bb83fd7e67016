"""Split one outgoing text into chunks that each fit a platform's message limit.

Why: in the field, chunks went over the platform's limit because the text grew
when it was escaped (Telegram MarkdownV2 puts a backslash before `_`, `*`, ...),
and code blocks broke when a split fell inside them. So a chunk is measured as
it will be sent: after `escape`, in the platform's own unit (Telegram counts
UTF-16 code units), with the fence text the split adds. A split inside a fenced
block closes the block and reopens it, with its opening line, in the next chunk.

The rules, kept simple so that `join` can undo them exactly:

- A chunk boundary keeps its separator ("\\n\\n", "\\n" or " ") at the end of the
  chunk before it, so the chunks concatenate back to the text once the added
  fences are removed: `join(split(t, limit)) == t`.
- Boundaries, best first: a paragraph, a line, a space, the latest one in the
  back half of what fits, else the latest anywhere in what fits; then a space
  inside inline code (a `...` span on one line); then a hard cut between two
  code points. Python strings hold code points, so a cut never splits a
  surrogate pair (it may split a multi-code-point emoji such as a flag).
- A fence line is a line starting with ```; outside a block it opens one (its
  text after ``` is the language), inside it closes the block. Where a block
  is open at a boundary, the chunk gets CLOSE ("\\n```") and the next chunk
  starts with the block's opening line and "\\n". A cut never falls inside a
  fence line, nor just before a "```" in the middle of a line, so every chunk
  has an even number of fence lines (the last one: if the text has) and `join`
  can tell the added fences from the text's own.
- `split("")` is `[]`; a text that fits is returned unchanged as one chunk.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator

from hermes.adapters.platform import Limit, Unit, as_is
from hermes.adapters.registry import DEFAULT_LIMIT, PLATFORMS

FENCE = "```"
CLOSE = "\n```"  # added at the end of a chunk cut inside a block

_INLINE_CODE = re.compile(r"`[^`\n]+`")
_MIDLINE_FENCE = re.compile(r"(?<=[^\n])(?=```)")  # overlapping, so "````" counts twice


def measure(text: str, unit: Unit) -> int:
    """The length of `text` in `unit`: code points, or UTF-16 code units (above
    U+FFFF a character counts 2)."""
    if unit == "chars":
        return len(text)
    if unit == "utf16":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    raise ValueError(f"unknown unit {unit!r}")


def chunks_for(text: str, platform: str) -> list[str]:
    """`text` split for `platform`: its limit, measured after its adapter's escaping."""
    known = PLATFORMS.get(platform)
    if known is None:  # one hermes does not speak (a mirror's, say): a safe default
        return split(text, DEFAULT_LIMIT)
    return split(text, known.limit, known.escape)


def split(text: str, limit: Limit, escape: Callable[[str], str] = as_is) -> list[str]:
    """Chunks of `text` such that `measure(escape(chunk), limit.unit) <= limit.size`.

    `escape` is the platform's escaping, applied to each whole chunk before it is
    sent; it may make the text grow, not shrink. Raises ValueError when the limit
    is too small to make progress (it must hold a reopened fence, a fence line,
    the closing fence and a character).
    """
    if not text:
        return []

    def fits(chunk: str) -> bool:
        return measure(escape(chunk), limit.unit) <= limit.size

    if len(text) <= limit.size and fits(text):
        return [text]  # most replies: no layout to build (it runs in a write's transaction)
    layout = _Layout(text)

    chunks: list[str] = []
    start = 0
    while not _rest_fits(layout, start, fits, limit):
        cut = _cut(layout, start, fits, limit)
        chunks.append(layout.chunk(start, cut))
        start = cut
    chunks.append(layout.chunk(start, len(text)))
    return chunks


def _rest_fits(layout: _Layout, start: int, fits: Callable[[str], bool], limit: Limit) -> bool:
    # Escaping does not shrink text and a code point is at least one unit: a rest
    # longer than the limit does not fit, and need not be escaped to know it.
    n = len(layout.text)
    return n - start <= limit.size and fits(layout.chunk(start, n))


def join(chunks: list[str]) -> str:
    """The text `split` cut into `chunks`: drops the fences it added and concatenates.

    Raises ValueError for chunks `split` could not have made (a chunk after one
    cut inside a block that does not start with the block's opening line).
    """
    parts: list[str] = []
    opening: str | None = None  # the open block's opening line, at the chunk's start
    for i, chunk in enumerate(chunks):
        if opening is not None:
            chunk = _drop_reopen(chunk, opening, i)
        last = i == len(chunks) - 1
        if not last and chunk.endswith(CLOSE):
            if _opening_after(chunk[: -len(CLOSE)], opening) is not None:
                chunk = chunk[: -len(CLOSE)]
        opening = _opening_after(chunk, opening)
        parts.append(chunk)
    return "".join(parts)


def _drop_reopen(chunk: str, opening: str, index: int) -> str:
    head = opening + "\n"
    if not chunk.startswith(head):
        raise ValueError(f"chunk {index} does not reopen {opening!r}: not made by split")
    return chunk[len(head) :]


def _fence_lines(text: str, opening: str | None) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, open block after it) for each fence line of `text`, whose start
    is taken as a line start; `end` is the index of the line's "\\n" (or len(text))."""
    pos = 0
    for line in text.split("\n"):
        end = pos + len(line)
        if line.startswith(FENCE):
            opening = line if opening is None else None
            yield pos, end, opening
        pos = end + 1


def _opening_after(text: str, opening: str | None) -> str | None:
    """The opening line of the block open after the complete lines of `text`."""
    for _, end, after in _fence_lines(text, opening):
        if end < len(text):
            opening = after
    return opening


# Ranks of a cut position, best first.
_PARAGRAPH, _LINE, _SPACE, _CODE_SPACE, _HARD, _POOR_HARD = range(6)
_BOUNDARIES = (_PARAGRAPH, _LINE, _SPACE)


class _Layout:
    """Where `text` may be cut, how good each cut is, and which block is open where."""

    def __init__(self, text: str) -> None:
        n = len(text)
        self.text = text
        self.blocked = bytearray(n + 1)  # a cut here would break a fence line
        self.in_code = bytearray(n + 1)  # strictly inside an inline code span
        self.poor = bytearray(n + 1)  # a cut here leaves an empty block behind or ahead
        self._ends: list[int] = []  # just after each complete fence line
        self._after: list[str | None] = []  # the open block there
        for start, end, after in _fence_lines(text, None):
            self.blocked[start + 1 : end + 1] = b"\x01" * (end - start)
            if after is None:
                self.poor[start] = 1  # just before a closing fence line
            elif end < n:
                self.poor[end + 1] = 1  # just after an opening fence line
            if end < n:
                self._ends.append(end + 1)
                self._after.append(after)
        for m in _MIDLINE_FENCE.finditer(text):
            self.blocked[m.start()] = 1
        self._mark_inline_code()

    def _mark_inline_code(self) -> None:
        pos = 0
        for line in self.text.split("\n"):
            if not line.startswith(FENCE) and self.opening_at(pos) is None:
                for m in _INLINE_CODE.finditer(line):
                    a, b = pos + m.start() + 1, pos + m.end()
                    self.in_code[a:b] = b"\x01" * (b - a)
            pos += len(line) + 1

    def opening_at(self, p: int) -> str | None:
        """The opening line of the block open at position `p`, if any."""
        i = bisect.bisect_right(self._ends, p)
        return self._after[i - 1] if i else None

    def chunk(self, start: int, cut: int) -> str:
        """text[start:cut] as sent: with the fences a cut inside a block adds."""
        opening = self.opening_at(start)
        head = "" if opening is None else opening + "\n"
        tail = CLOSE if cut < len(self.text) and self.opening_at(cut) is not None else ""
        return head + self.text[start:cut] + tail

    def rank(self, p: int) -> int | None:
        if self.blocked[p]:
            return None
        before = self.text[p - 1]
        if not self.poor[p]:
            if before == "\n":
                return _PARAGRAPH if self.text[p - 2 : p] == "\n\n" else _LINE
            if before == " ":
                return _CODE_SPACE if self.in_code[p] else _SPACE
        return _POOR_HARD if self.in_code[p] or self.poor[p] else _HARD

    def candidates(self, start: int, end: int) -> Iterator[int]:
        """Cut positions in (start, end], best first."""
        by_rank: list[list[int]] = [[] for _ in range(_POOR_HARD + 1)]
        for p in range(end, start, -1):
            rank = self.rank(p)
            if rank is not None:
                by_rank[rank].append(p)
        half = start + (end - start + 1) // 2
        for rank in _BOUNDARIES:
            yield from (p for p in by_rank[rank] if p >= half)
        for ranked in by_rank:
            yield from ranked


def _cut(layout: _Layout, start: int, fits: Callable[[str], bool], limit: Limit) -> int:
    """Where the chunk starting at `start` ends (the text from `start` does not fit)."""
    end = _furthest_fit(layout, start, fits, limit)
    for p in layout.candidates(start, end):
        if fits(layout.chunk(start, p)):
            return p
    raise ValueError(
        f"a limit of {limit.size} {limit.unit} is too small: no chunk of the text from"
        f" offset {start} fits (it must hold a reopened code fence, a whole fence line,"
        " the closing fence and one character, after escaping)"
    )


def _furthest_fit(layout: _Layout, start: int, fits: Callable[[str], bool], limit: Limit) -> int:
    """The furthest position p < len(text) whose chunk from `start` fits (`start` if
    none), by bisection: a longer piece does not measure less. Escaping does not
    shrink text and a code point is at least one unit, so p <= start + size."""
    lo, hi = start, min(len(layout.text) - 1, start + limit.size)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(layout.chunk(start, mid)):
            lo = mid
        else:
            hi = mid - 1
    return lo
