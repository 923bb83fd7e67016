"""Files going out: a file to send is copied into HERMES_HOME/outgoing (named by its
content, so one file queued twice is one copy) and queued in the outbox as a row of
its own. A file larger than its platform takes is never queued: the chat gets a line
saying so instead, and nothing is uploaded, retried or left dead."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import apsw

from hermes.adapters.contract import OutFile, Target
from hermes.adapters.media import PIECE, mime_of
from hermes.adapters.registry import PLATFORMS
from hermes.delivery.outbox_store import drop_unsent, enqueue

MAX_CAPTION = 1000  # characters of a file's caption (Telegram's is 1024 units)


def stage(
    outgoing: Path,
    source: Path,
    voice: bool = False,
    name: str | None = None,
    allowed: Callable[[Path], bool] | None = None,
) -> OutFile:
    """hermes's own copy of `source` to send, copied and hashed in one pass, then named by
    its content (blocking: run it in a thread). A copy already there is reused, and
    touched: retention removes copies by age. `allowed`: asked of the real path of the
    file as opened, before a byte is read (PermissionError when it says no): a link
    swapped in after the caller checked the path leads nowhere."""
    name = Path(name or source.name).name
    outgoing.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, part_name = tempfile.mkstemp(dir=outgoing, suffix=".part")
    part, digest = Path(part_name), hashlib.sha256()
    try:
        with source.open("rb") as f, os.fdopen(fd, "wb") as out:
            opened = Path(os.readlink(f"/proc/self/fd/{f.fileno()}"))
            if allowed is not None and not allowed(opened):
                raise PermissionError(
                    f"{source} is not a file you may send (it leads to {opened.name})"
                )
            while piece := f.read(PIECE * 16):
                digest.update(piece)
                out.write(piece)
        copy = outgoing / f"{digest.hexdigest()[:16]}-{name}"
        if copy.exists():
            part.unlink()
            os.utime(copy)
        else:
            part.replace(copy)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return OutFile(str(copy), name, mime_of(name), copy.stat().st_size, voice)


def too_large(platform: str, name: str, size: int) -> str | None:
    """What the chat is told instead when a file of `size` bytes is more than `platform`
    takes; None: it may go. Asked before a copy is made."""
    known = PLATFORMS.get(platform)
    limit = known.max_upload if known is not None else 0
    if limit == 0:
        return f"(The file {name} was not sent: hermes cannot send files on {platform}.)"
    if size > limit:
        return (
            f"(The file {name} was not sent: it is {_mb(size)}, over the "
            f"{_mb(limit)} {platform} takes from a bot.)"
        )
    return None


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


def queue_file(
    conn: apsw.Connection,
    target: Target,
    file: OutFile,
    caption: str,
    kind: str,
    key: str,
    now: float,
    origin: str | None = None,
    reply_to: str | None = None,
) -> list[int]:
    """Queue `file` (checked with too_large) with its caption, as one row."""
    return enqueue(
        conn,
        target,
        [caption[:MAX_CAPTION]],
        kind,
        key,
        now,
        reply_to=reply_to,
        origin=origin,
        file=file,
    )


def voice_instead(
    conn: apsw.Connection,
    target: Target,
    file: OutFile,
    answer_key: str,
    now: float,
    origin: str | None = None,
    reply_to: str | None = None,
) -> list[int]:
    """A voice note in place of its answer's text, which waits (`hold`) for it: the text
    taken back where it has not gone, the voice note queued, in one transaction."""
    drop_unsent(conn, answer_key)
    return queue_file(conn, target, file, "", "reply", f"{answer_key}:voice", now, origin, reply_to)
