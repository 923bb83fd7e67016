"""The file tools: read_file, write_file, patch and search_files.

Each reaches only what its caller's commands may see (hermes.agent.tools.file_view: a
user's session directory, an owner's machine less HERMES_HOME's secrets), and each is
bounded, so one call can neither fill the model's context nor hold a worker thread for
long: lines shown and their length, bytes read, files searched, matches returned, time.

Every path goes through `FileView.resolve`, and what is opened is checked again by the
real path of the open descriptor: a link swapped in after the check leads nowhere. A
write is atomic: a temporary file in the same directory, opened relative to that
directory's checked descriptor, fsync'd, then renamed over the old one; a failure at any
step leaves the old file as it was.

Blocking file work runs in a worker thread (`trio.to_thread.run_sync`).
"""

from __future__ import annotations

import codecs
import difflib
import errno
import fnmatch
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import regex
import trio

from hermes.agent.scan import binary
from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.agent.tools.file_view import FileRefused, FileView, opened_path, view_for

READ_LIMIT = 500  # lines read_file shows by default
READ_MAX = 2000  # lines it shows at most
LINE_CHARS = 2000  # characters of one line it shows
LINE_BYTES = LINE_CHARS * 4 + 4  # enough UTF-8 for LINE_CHARS characters
SIZE_CAP = 10 * 1024 * 1024  # files above: read only as far as the lines asked for
SCAN_CAP = 256 * 1024 * 1024  # how far read_file reads into a large file for an offset
SNIFF = 8192  # bytes looked at for a NUL (a binary file)
WRITE_CAP = 1024 * 1024  # bytes write_file writes
FUZZ = 10  # lines a diff's hunk may be found away from where it says
SEARCH_FILES = 5000  # files search_files looks into
SEARCH_MATCHES = 200  # matches it returns
SEARCH_FILE_BYTES = 1024 * 1024  # files above are skipped
SEARCH_SECONDS = 10.0  # its whole walk
MATCH_CHARS = 300  # characters of a matching line shown
CHUNK = 1 << 16
NOT_WALKED = frozenset({"/proc", "/sys", "/dev"})  # no files of their own, and endless


class Binary(ToolError):
    """A file that is not UTF-8 text."""


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` with the errors a file operation raises said for the model."""
    try:
        return fn(*args)
    except FileNotFoundError as exc:
        raise ToolError(f"{exc.filename or 'the path'}: no such file or directory") from None
    except PermissionError as exc:
        raise ToolError(f"{exc.filename or 'the path'}: permission denied") from None
    except IsADirectoryError as exc:
        raise ToolError(f"{exc.filename or 'the path'} is a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(f"{exc.filename or 'the path'}: too many levels of links") from None
        raise ToolError(f"{exc.filename or 'the path'}: {exc.strerror or exc}") from None


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return await trio.to_thread.run_sync(_run, fn, *args)


def _integer(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{key} must be a whole number, not {value!r}") from None


def _size(n: int) -> str:
    return f"{n:,} bytes"


# --- opening what the view holds ---------------------------------------------------------


def _open_file(view: FileView, real: Path, shown: str) -> int:
    """A descriptor of the regular file at `real`, opened for reading, whose real path as
    opened the view holds (FileRefused otherwise: a link swapped in since the check)."""
    if not stat.S_ISREG(os.stat(real).st_mode):  # no FIFO, device or socket is opened
        if real.is_dir():
            raise ToolError(f"{shown} is a directory (search_files with names=true lists it)")
        raise ToolError(f"{shown} is not a regular file")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not view.holds(opened_path(fd)):
            raise FileRefused(f"{shown} leads outside what your file tools may reach")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{shown} is not a regular file")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_dir(view: FileView, directory: Path, shown: str, create: bool) -> int:
    """A descriptor of the directory `directory` (a real path), which the view holds,
    creating what is missing of it when `create`: each part made and opened relative to
    its parent's descriptor, never through a link."""
    missing: list[str] = []
    top = directory
    while True:
        try:
            fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            break
        except FileNotFoundError:
            if not create or top.parent == top:
                raise
            missing.append(top.name)
            top = top.parent
    try:
        if not view.holds(opened_path(fd)):
            raise FileRefused(f"{shown} leads outside what your file tools may reach")
        for name in reversed(missing):
            try:
                os.mkdir(name, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = inner
        if not view.holds(opened_path(fd)):
            raise FileRefused(f"{shown} leads outside what your file tools may reach")
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_atomic(view: FileView, real: Path, data: bytes, shown: str) -> bool:
    """`data` as the whole of the file at `real` (creating its directory if missing), or
    the old file untouched: written to a new temporary file beside it (O_EXCL, the old
    file's mode, else 0o644), fsync'd, renamed over it, the directory fsync'd. Whether
    the file was created."""
    if real.is_dir() or not real.name:
        raise ToolError(f"{shown} is a directory")
    dir_fd = _open_dir(view, real.parent, shown, create=True)
    try:
        try:
            old = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise ToolError(f"{shown} is a directory")
        # a link put there since the check is replaced, never written through
        mode = stat.S_IMODE(old.st_mode) if old is not None and stat.S_ISREG(old.st_mode) else 0o644
        temporary = f".{real.name[:200]}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), mode)
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, real.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
        os.fsync(dir_fd)
        return old is None
    finally:
        os.close(dir_fd)


def _sniff(head: bytes, size: int, shown: str) -> None:
    """Binary when `head` (a file's first bytes) holds a NUL or is not UTF-8."""
    why = binary(head)
    if why is not None:
        raise Binary(
            f"{shown} is a binary file ({_size(size)}, {why}): the file tools take text only"
        )


def _read_text(view: FileView, real: Path, shown: str, cap: int) -> str:
    """The whole of the text file at `real`, up to `cap` bytes (ToolError above)."""
    fd = _open_file(view, real, shown)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise ToolError(
                f"{shown} is {_size(size)}, more than the {_size(cap)} this tool"
                " edits: change it with a command (sed, a script)"
            )
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ToolError(f"{shown} grew past {_size(cap)} while it was read")
    _sniff(data[:SNIFF], len(data), shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Binary(
            f"{shown} is a binary file ({_size(len(data))}, not UTF-8 text at byte {exc.start})"
        ) from None
    if "\0" in text:
        raise Binary(f"{shown} is a binary file ({_size(len(data))}, it holds NUL bytes)")
    return text


# --- read_file ---------------------------------------------------------------------------


def _lines(f: Any) -> Iterator[tuple[bytes, bool]]:
    """Each line of the binary file `f` (without its newline) up to LINE_BYTES, and
    whether it was longer: no line is held whole, however long it is. A line of
    LINE_BYTES bytes or more holds more than LINE_CHARS characters, so it is cut anyway."""
    while piece := f.readline(LINE_BYTES):
        if piece.endswith(b"\n"):
            yield piece[:-1], False
            continue
        longer = False
        while rest := f.readline(CHUNK):  # the rest of a long line, read and dropped
            longer = True
            if rest.endswith(b"\n"):
                break
        yield piece, longer


def _count_lines(f: Any) -> int:
    f.seek(0)
    count, last = 0, b"\n"
    while chunk := f.read(CHUNK * 16):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def read_lines(view: FileView, real: Path, shown: str, offset: int, limit: int) -> str:
    """Lines `offset`.. (1-based) of the text file at `real`, at most `limit`, numbered,
    each cut at LINE_CHARS; notes after them say what was left out and how to read on."""
    fd = _open_file(view, real, shown)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        _sniff(f.read(SNIFF), size, shown)
        f.seek(0)
        shown_lines: list[str] = []
        cut: list[int] = []
        number = 0
        more = False
        for raw, longer in _lines(f):
            number += 1
            if number < offset:
                if f.tell() > SCAN_CAP:
                    raise ToolError(
                        f"line {offset} of {shown} is more than {_size(SCAN_CAP)} into it:"
                        " read that part with a command (sed -n, tail)"
                    )
                continue
            if len(shown_lines) == limit:
                more = True
                break
            try:
                text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=not longer)
            except UnicodeDecodeError:
                raise Binary(
                    f"{shown} is a binary file ({_size(size)}, line {number} is not"
                    " UTF-8 text): read_file shows text only"
                ) from None
            text = text.removesuffix("\r")
            if longer or len(text) > LINE_CHARS:
                text = text[:LINE_CHARS]
                cut.append(number)
            shown_lines.append(f"{number:>5}\t{text}")
        total = _count_lines(f) if size <= SIZE_CAP else None
    if size == 0:
        return f"[{shown} is empty]"
    if not shown_lines:
        lines = f"{total:,} lines" if total is not None else f"fewer than {offset:,} lines"
        return f"[{shown} has {lines}: offset {offset:,} is past its end]"
    notes = []
    if cut:
        which = ", ".join(map(str, cut[:10])) + (", ..." if len(cut) > 10 else "")
        notes.append(f"line(s) {which} cut at {LINE_CHARS} characters")
    first, last = offset, offset + len(shown_lines) - 1
    if more or first > 1:
        of = f"of {total:,}" if total is not None else f"of a {_size(size)} file (not counted)"
        said = f"lines {first:,}-{last:,} {of}"
        if more:
            said += f"; read on with offset={last + 1}"
        notes.append(said)
    return "\n".join(shown_lines + [f"[{n}]" for n in notes])


# --- patch -------------------------------------------------------------------------------

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@attrs.frozen
class Hunk:
    header: str
    start: int  # 1-based line of the old file it begins at (the line after, for an insert)
    body: tuple[tuple[str, str], ...]  # (" " | "-" | "+", text)

    @property
    def old(self) -> list[str]:
        return [t for k, t in self.body if k != "+"]

    @property
    def new(self) -> list[str]:
        return [t for k, t in self.body if k != "-"]


def parse_diff(diff: str) -> list[Hunk]:
    """The hunks of a unified diff of one file. Headers before the first hunk are skipped;
    a hunk's lines are taken by its counts, and lines that look like a hunk's beyond
    them too (a model's counts are often off); a second file's headers are refused."""
    hunks: list[Hunk] = []
    header, start, body = "", 0, []
    old_left = new_left = 0
    files = 0
    lines = diff.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        match = HUNK.match(line)
        if match:
            if header:
                hunks.append(_hunk(header, start, body))
            header, body = match.group(0), []
            a, b, d = int(match.group(1)), match.group(2), match.group(4)
            old_left, new_left = int(b or 1), int(d or 1)
            start = a + 1 if b == "0" else a  # "-a,0": an insert after line a
            continue
        within = old_left > 0 or new_left > 0
        header_pair = line.startswith("--- ") and lines[i : i + 1] != [] and lines[i][:4] == "+++ "
        if not within and header_pair:
            files += 1
            if files > 1 or header:
                raise ToolError(
                    "the diff changes more than one file: patch takes one file's hunks at a time"
                )
            i += 1
            continue
        if not header or line.startswith("\\"):
            continue  # diff --git, index before the first hunk; "\ No newline at end of file"
        kind, text = (" ", "") if line == "" else (line[0], line[1:])
        if kind not in " -+":
            raise ToolError(
                f"hunk {len(hunks) + 1} ({header}): the line {line[:80]!r} starts"
                " with neither ' ', '-' nor '+'"
            )
        body.append((kind, text))
        old_left -= kind != "+"
        new_left -= kind != "-"
    if header:
        hunks.append(_hunk(header, start, body))
    if not hunks:
        raise ToolError("the diff has no hunk: each starts with a line '@@ -a,b +c,d @@'")
    return hunks


def _hunk(header: str, start: int, body: list[tuple[str, str]]) -> Hunk:
    while body and body[-1] == (" ", ""):  # the diff's own last newline, not a line
        body.pop()
    return Hunk(header, start, tuple(body))


def _at(lines: list[str], want: list[str], at: int, loose: bool) -> bool:
    if at < 0 or at + len(want) > len(lines):
        return False
    got = lines[at : at + len(want)]
    if loose:
        return [x.rstrip() for x in got] == [x.rstrip() for x in want]
    return got == want


def apply_diff(lines: list[str], hunks: list[Hunk]) -> tuple[list[str], list[str]]:
    """`lines` with every hunk applied, and notes on hunks found away from where they say;
    ToolError naming the first hunk that does not apply (and then none is). A hunk's
    context and removed lines must match exactly, or else but for trailing whitespace,
    within FUZZ lines of its stated place (moved by what the hunks before it changed, and
    by how far from its own place the one before was found)."""
    result = list(lines)
    notes: list[str] = []
    growth = 0  # lines the hunks applied so far added, less those they removed
    drift = 0  # how far from its stated place the last hunk was found
    floor = 0  # where the last applied hunk ended, in `result`
    for number, hunk in enumerate(hunks, 1):
        old = hunk.old
        expected = hunk.start - 1 + growth + drift
        found = None
        if not old:  # a pure insert: at its place exactly
            if floor <= expected <= len(result):
                found = expected
        else:
            for loose in (False, True):
                for delta in sorted(range(-FUZZ, FUZZ + 1), key=abs):
                    if expected + delta >= floor and _at(result, old, expected + delta, loose):
                        found = expected + delta
                        break
                if found is not None:
                    break
        if found is None:
            raise ToolError(_no_hunk(number, hunk, lines, expected - growth))
        kept = iter(result[found : found + len(old)])
        replaced = []
        for kind, text in hunk.body:  # a context line keeps the file's own text
            if kind == " ":
                replaced.append(next(kept))
            elif kind == "-":
                next(kept)
            else:
                replaced.append(text)
        result[found : found + len(old)] = replaced
        drift = found - growth - (hunk.start - 1)
        if drift:
            notes.append(
                f"hunk {number} applied at line {found - growth + 1} of the old file,"
                f" not {hunk.start}"
            )
        floor = found + len(replaced)
        growth += len(replaced) - len(old)
    return result, notes


def _no_hunk(number: int, hunk: Hunk, lines: list[str], expected: int) -> str:
    said = (
        f"hunk {number} ({hunk.header}) does not apply: its context and removed lines"
        f" are not in the file within {FUZZ} lines of line {hunk.start}"
    )
    first = next((t for t in hunk.old if t.strip()), None)
    if first is not None:
        exact = [i + 1 for i, t in enumerate(lines) if t == first]
        near = [i + 1 for i, t in enumerate(lines) if t != first and t.strip() == first.strip()]
        if exact:
            said += f"; its first line {first[:80]!r} is at line(s) {_numbers(exact)}"
        elif near:
            said += (
                f"; its first line {first[:80]!r} is at line(s) {_numbers(near)} with"
                " different whitespace"
            )
    if 0 <= expected < len(lines):
        said += f"; line {expected + 1} of the file is {lines[expected][:80]!r}"
    return said + ". No hunk was applied: read the file and send a diff of its text as it is"


def _numbers(found: list[int]) -> str:
    return ", ".join(map(str, found[:10])) + (", ..." if len(found) > 10 else "")


def _split(text: str) -> tuple[list[str], str, bool]:
    """`text` as lines without their ends, its line end, and whether it ends with one."""
    eol = "\r\n" if "\r\n" in text else "\n"
    ends = text.endswith(eol)
    body = text[: -len(eol)] if ends else text
    return (body.split(eol) if body or ends else []), eol, ends


def replace_once(text: str, old: str, new: str, shown: str) -> tuple[str, int]:
    """`text` with the one occurrence of `old` replaced by `new`, and the line it is at;
    ToolError when `old` is not there (with a hint at whitespace) or more than once."""
    if "\r\n" in text and "\r\n" not in old and old.replace("\n", "\r\n") in text:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # a CRLF file
    count = text.count(old)
    if count == 1:
        at = text.index(old)
        return text[:at] + new + text[at + len(old) :], text.count("\n", 0, at) + 1
    if count > 1:
        found, at = [], text.find(old)
        while at >= 0:
            found.append(text.count("\n", 0, at) + 1)
            at = text.find(old, at + len(old))
        raise ToolError(
            f"old appears {count} times in {shown} (at lines {_numbers(found)}):"
            " give more of the lines around it, so it matches once; the file is"
            " unchanged"
        )
    said = f"old is not in {shown}; the file is unchanged"
    file_lines = text.split("\n")
    for line in old.split("\n"):
        if not line.strip() or line in text:
            continue
        near = [i + 1 for i, t in enumerate(file_lines) if t.strip() == line.strip()]
        if near:
            raise ToolError(
                f"{said}. Its line {line.strip()[:80]!r} is at line(s) {_numbers(near)} of"
                " the file with different whitespace (indentation, tabs or spaces): copy it"
                " as read_file shows it"
            )
        break
    raise ToolError(
        f"{said}: read_file shows its exact text (old must match it exactly, whitespace included)"
    )


def _changes(before: str, after: str) -> tuple[int, int, str]:
    """Lines added and removed between two texts, and their diff (cut)."""
    diff = list(difflib.unified_diff(before.split("\n"), after.split("\n"), lineterm="", n=1))
    added = sum(1 for d in diff[2:] if d.startswith("+"))
    removed = sum(1 for d in diff[2:] if d.startswith("-"))
    said = "\n".join(diff[2:])
    if len(said) > 2000:
        said = said[:2000] + "\n[... the rest of the diff left out]"
    return added, removed, said


# --- search_files ------------------------------------------------------------------------


@attrs.define
class Search:
    """One search's walk, its results and what cut it short."""

    view: FileView
    pattern: Any  # a compiled `regex` pattern
    top: Path
    glob: str | None
    names: bool
    deadline: float
    found: list[str] = attrs.Factory(list)
    files: int = 0
    skipped: dict[str, int] = attrs.Factory(dict)
    stopped: str | None = None

    def run(self) -> None:
        if self.top.is_file():
            self._file(self.top, self.top.name)
            return
        for dirpath, dirnames, filenames in os.walk(self.top, followlinks=False):
            here = Path(dirpath)
            if time.monotonic() > self.deadline:
                self.stopped = f"the time cap ({SEARCH_SECONDS:g} s)"
                return
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d != ".git"
                and str(here / d) not in NOT_WALKED
                and self.view.reaches_into(here / d)
            )  # a link to a directory is never walked into (followlinks=False)
            for name in sorted(filenames):
                if self.stopped is None and time.monotonic() > self.deadline:
                    self.stopped = f"the time cap ({SEARCH_SECONDS:g} s)"
                if self.stopped is not None:
                    return
                path = here / name
                self._file(path, os.path.relpath(path, self.top))

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def _file(self, path: Path, rel: str) -> None:
        if self.glob is not None and not (
            fnmatch.fnmatchcase(rel, self.glob) or fnmatch.fnmatchcase(path.name, self.glob)
        ):
            return
        if self.files >= SEARCH_FILES:
            self.stopped = f"the cap on files searched ({SEARCH_FILES:,})"
            return
        real = Path(os.path.realpath(path))
        if not self.view.holds(real):
            self._skip("outside what you may reach")
            return
        self.files += 1
        if self.names:
            if self._search(path.name) is not None:
                self._add(rel)
            return
        try:
            text = self._text(real)
        except OSError:
            self._skip("unreadable")
            return
        if text is None:
            return
        for number, line in enumerate(text.split("\n"), 1):
            match = self._search(line)
            if self.stopped is not None:
                return
            if match is not None:
                line = line.rstrip("\r")
                self._add(f"{rel}:{number}: {line[:MATCH_CHARS]}")
                if self.stopped is not None:
                    return

    def _text(self, real: Path) -> str | None:
        try:
            fd = _open_file(self.view, real, str(real))
        except FileRefused:
            self._skip("outside what you may reach")
            return None
        except ToolError:
            self._skip("not regular files")
            return None
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > SEARCH_FILE_BYTES:
                self._skip(f"over {SEARCH_FILE_BYTES // (1024 * 1024)} MB")
                return None
            data = f.read(SEARCH_FILE_BYTES + 1)
        if len(data) > SEARCH_FILE_BYTES:
            self._skip(f"over {SEARCH_FILE_BYTES // (1024 * 1024)} MB")
            return None
        if b"\0" in data[:SNIFF]:
            self._skip("binary")
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self._skip("binary")
            return None

    def _search(self, text: str) -> Any:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.stopped = f"the time cap ({SEARCH_SECONDS:g} s)"
            return None
        try:
            return self.pattern.search(text, timeout=left)
        except TimeoutError:
            self.stopped = f"the time cap ({SEARCH_SECONDS:g} s)"
            return None

    def _add(self, line: str) -> None:
        self.found.append(line)
        if len(self.found) >= SEARCH_MATCHES:
            self.stopped = f"the cap on matches ({SEARCH_MATCHES})"

    def said(self) -> str:
        what = "names" if self.names else "matches"
        lines = list(self.found) or [f"[no {what} in {self.files:,} file(s) searched]"]
        if self.stopped is not None:
            lines.append(
                f"[{self.stopped} cut the search short after {self.files:,} file(s):"
                " narrow the pattern, path or glob]"
            )
        if self.skipped:
            skipped = ", ".join(f"{n:,} {why}" for why, n in sorted(self.skipped.items()))
            lines.append(f"[files skipped: {skipped}]")
        return "\n".join(lines)


# --- the tools ---------------------------------------------------------------------------

PATHS = (
    "Relative paths are in the session's working directory; only what your commands may"
    " see is reachable."
)


@attrs.frozen
class ReadFileTool:
    name = "read_file"
    description = (
        f"Read a text file's lines, numbered. offset: the first line (1-based, default 1);"
        f" limit: how many lines (default {READ_LIMIT}, at most {READ_MAX}). Lines longer"
        f" than {LINE_CHARS} characters are cut; binary files are refused. {PATHS}"
    )
    parameters = obj(
        ["path"],
        path={"type": "string"},
        offset={"type": "integer", "description": "the first line, 1-based (default 1)"},
        limit={"type": "integer", "description": f"lines (default {READ_LIMIT}, max {READ_MAX})"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = str(need(args, "path"))
        offset = max(1, _integer(args, "offset", 1))
        limit = min(max(1, _integer(args, "limit", READ_LIMIT)), READ_MAX)

        def read() -> str:
            view = view_for(ctx)
            return read_lines(view, view.resolve(path), path, offset, limit)

        return await _in_thread(read)


@attrs.frozen
class WriteFileTool:
    name = "write_file"
    description = (
        f"Write a whole text file (created, with its directory, or replaced), atomically."
        f" content: the file's full text, at most {WRITE_CAP // 1024 // 1024} MB. To change"
        f" part of a file, use patch. {PATHS}"
    )
    parameters = obj(["path", "content"], path={"type": "string"}, content={"type": "string"})

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = str(need(args, "path"))
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("missing argument 'content' (the file's text; '' for empty)")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(f"content is not valid text: {exc.reason} at {exc.start}") from None
        if len(data) > WRITE_CAP:
            raise ToolError(
                f"content is {_size(len(data))}, more than the {_size(WRITE_CAP)}"
                " write_file writes: write a smaller file, or make a large one"
                " with a command"
            )

        def write() -> str:
            view = view_for(ctx)
            real = view.resolve(path)
            created = write_atomic(view, real, data, path)
            lines = content.count("\n") + (bool(content) and not content.endswith("\n"))
            return json.dumps(
                {"path": str(real), "created": created, "bytes": len(data), "lines": lines}
            )

        return await _in_thread(write)


@attrs.frozen
class PatchTool:
    name = "patch"
    description = (
        "Change part of a text file, atomically. Either old and new: old (exact text,"
        " whitespace included, found exactly once; give surrounding lines to make it unique)"
        " is replaced by new. Or diff: a unified diff of this one file ('@@ -a,b +c,d @@'"
        " hunks with ' ' context, '-' removed and '+' added lines): all hunks apply or"
        f" none. {PATHS}"
    )
    parameters = obj(
        ["path"],
        path={"type": "string"},
        old={"type": "string", "description": "the exact text to replace"},
        new={"type": "string", "description": "what replaces it ('' deletes it)"},
        diff={"type": "string", "description": "a unified diff, instead of old and new"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = str(need(args, "path"))
        diff, old, new = args.get("diff"), args.get("old"), args.get("new")
        if diff not in (None, ""):
            if old not in (None, "") or new not in (None, ""):
                raise ToolError("give either old and new, or diff, not both")
            if not isinstance(diff, str):
                raise ToolError("diff must be text")
            hunks = parse_diff(diff)
        else:
            hunks = None
            if not isinstance(old, str) or not old:
                raise ToolError("missing argument 'old' (or give 'diff')")
            if not isinstance(new, str):
                raise ToolError("missing argument 'new' ('' deletes old)")

        def change() -> str:
            view = view_for(ctx)
            real = view.resolve(path)
            text = _read_text(view, real, path, SIZE_CAP)
            done: dict[str, Any] = {"path": str(real)}
            if hunks is None:
                after, line = replace_once(text, old, new, path)
                done["at_line"] = line
            else:
                lines, eol, ends = _split(text)
                changed, notes = apply_diff(lines, hunks)
                after = eol.join(changed) + (eol if ends and changed else "")
                done["hunks"] = len(hunks)
                if notes:
                    done["notes"] = notes
            try:
                data = after.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ToolError(f"the new text is not valid text: {exc.reason}") from None
            if after == text:
                done["unchanged"] = True
                return json.dumps(done)
            write_atomic(view, real, data, path)
            added, removed, said = _changes(text, after)
            done.update(lines_added=added, lines_removed=removed, diff=said)
            return json.dumps(done)

        return await _in_thread(change)


@attrs.frozen
class SearchFilesTool:
    name = "search_files"
    description = (
        "Search files under a directory: pattern is a regular expression matched against"
        " each line (or, with names=true, against file names). glob filters the files"
        " ('*.py', 'src/*.ts'). Answers 'path:line: text' relative to path; skips .git,"
        f" binary files and files over {SEARCH_FILE_BYTES // 1024 // 1024} MB; at most"
        f" {SEARCH_MATCHES} matches, {SEARCH_FILES:,} files and {SEARCH_SECONDS:g} s. {PATHS}"
    )
    parameters = obj(
        ["pattern"],
        pattern={"type": "string", "description": "a regular expression"},
        path={"type": "string", "description": "the directory (or file) to search, default '.'"},
        glob={"type": "string", "description": "only files whose path or name matches"},
        names={"type": "boolean", "description": "match file names instead of contents"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            pattern = regex.compile(str(need(args, "pattern")))
        except regex.error as exc:
            raise ToolError(f"the pattern is not a valid regular expression: {exc}") from None
        path = str(args.get("path") or ".")
        glob = str(args["glob"]) if args.get("glob") else None

        def search() -> str:
            view = view_for(ctx)
            top = view.resolve(path)
            if not top.exists():
                raise ToolError(f"{path}: no such file or directory")
            walk = Search(
                view, pattern, top, glob, bool(args.get("names")), time.monotonic() + SEARCH_SECONDS
            )
            walk.run()
            return walk.said()

        return await _in_thread(search)
