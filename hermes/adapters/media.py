"""Media a chat sends (photos, documents, voice notes), saved under
HERMES_HOME/cache/<platform>/ for the agent, by every adapter that fetches media.

A download is streamed to disk in pieces and hashed on the way: no attachment is ever
held in memory whole, so a 5 MB voice note costs a 64 KiB buffer. One file is at most
`MediaLimits.max_file` bytes; a platform's cache at most `cache_cap` bytes and
`max_age` seconds old, oldest evicted first. What was saved is a `Saved` record, kept
on the message (name, type, size, path, sha256)."""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from hermes.actors.clock import Clock

if TYPE_CHECKING:  # types only: a record of a saved file needs no HTTP client loaded
    import httpx

MAX_FILE = 20 * 1024 * 1024  # Telegram's Bot API's own download limit
CACHE_CAP = 500 * 1024 * 1024
MAX_AGE = 30 * 86400.0
PIECE = 64 * 1024
MAX_ATTACHMENTS = 10  # files of one message taken; the rest are left unread
FILE_SECONDS = 120.0  # one file's download, a lookup of where it is included
STALE_PART = 3600.0  # seconds: a partial file older than this was left by a kill


UNTYPED = "application/octet-stream"
_MIME = re.compile(r"[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\[\]()]")


class MediaError(Exception):
    """A file that was not saved, and why (over the cap, refused by the platform)."""


@attrs.frozen
class MediaLimits:
    """How much media a platform's cache takes: per file, in all, and for how long."""

    max_file: int = MAX_FILE
    cache_cap: int = CACHE_CAP
    max_age: float = MAX_AGE


DEFAULT_LIMITS = MediaLimits()


@attrs.frozen
class Saved:
    """One file saved to the cache, as its message records it."""

    name: str
    mime: str
    size: int
    path: str
    sha256: str

    @property
    def kind(self) -> str:
        """`image`, `audio` or `file`: how the turn offers it to the model."""
        top = self.mime.split("/", 1)[0]
        return top if top in ("image", "audio") else "file"


def mime_of(name: str, given: str | None = None) -> str:
    """The file's type: as the platform said (without parameters) where it said one, else
    by its name (a generic octet-stream says nothing)."""
    said = (given or "").split(";", 1)[0].strip().lower()
    if _MIME.fullmatch(said) and said != UNTYPED:
        return said
    return mimetypes.guess_type(name)[0] or UNTYPED


def safe_name(name: str) -> str:
    """A file name, never a path out of the cache, and nothing in it that could be read as
    the end of its transcript line (brackets, parentheses, control characters)."""
    cleaned = _UNSAFE.sub("_", Path(name.replace("\\", "/")).name).lstrip(".")
    return cleaned[:200] or "attachment"


def save(
    directory: Path,
    name: str,
    data: bytes,
    mime: str | None = None,
    limits: MediaLimits = DEFAULT_LIMITS,
) -> Saved:
    """Write bytes already read (a base64 answer, a mail's part) as `directory/name`
    (0600), then evict past the limits. MediaError past `limits.max_file`."""
    if len(data) > limits.max_file:
        raise MediaError(f"{name} is {len(data)} bytes, over the {limits.max_file} limit")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / safe_name(name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    evict(directory, limits, keep=path)
    digest = hashlib.sha256(data).hexdigest()
    return Saved(path.name, mime_of(name, mime), len(data), str(path), digest)


async def save_stream(
    directory: Path,
    name: str,
    pieces: AsyncIterator[bytes],
    mime: str | None = None,
    limits: MediaLimits = DEFAULT_LIMITS,
    progress: Callable[[], None] = lambda: None,
) -> Saved:
    """Write `pieces` as `directory/name` as they arrive, hashing them: a file past
    `limits.max_file` is removed and refused (MediaError), a half-written one never left
    under its name. `progress` is called per piece (a long download is live)."""
    await trio.to_thread.run_sync(lambda: directory.mkdir(mode=0o700, parents=True, exist_ok=True))
    path = directory / safe_name(name)
    part = path.with_name(f"{path.name}.{secrets.token_hex(4)}.part")  # its own: no race
    digest, size = hashlib.sha256(), 0
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        async with trio.wrap_file(os.fdopen(fd, "wb")) as f:
            async for piece in pieces:
                size += len(piece)
                if size > limits.max_file:
                    raise MediaError(f"{name} is over the {limits.max_file} byte limit")
                digest.update(piece)
                await f.write(piece)
                progress()
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    await trio.to_thread.run_sync(lambda: evict(directory, limits, keep=path))
    return Saved(path.name, mime_of(name, mime), size, str(path), digest.hexdigest())


def refuse_unless_ok(got: httpx.Response, name: str, limits: MediaLimits) -> None:
    """MediaError unless the answer is a 200 whose stated size (if any) is within the
    limit: checked before a byte of the body is read."""
    if got.status_code != 200:
        raise MediaError(f"{name} could not be fetched: HTTP {got.status_code}")
    stated = got.headers.get("content-length")
    if stated and stated.isdigit() and int(stated) > limits.max_file:
        raise MediaError(f"{name} is {stated} bytes, over the {limits.max_file} limit")


async def download(
    http: httpx.AsyncClient,
    url: str,
    directory: Path,
    name: str,
    mime: str | None = None,
    limits: MediaLimits = DEFAULT_LIMITS,
    headers: dict[str, str] | None = None,
    progress: Callable[[], None] = lambda: None,
) -> Saved:
    """GET `url` (never following a redirect: a platform that redirects a file sends a
    sign-in page) and save it with save_stream; a stated size past the limit is refused
    before a byte is read."""
    async with http.stream("GET", url, headers=headers or {}, follow_redirects=False) as got:
        refuse_unless_ok(got, name, limits)
        kind = mime or got.headers.get("content-type")
        return await save_stream(directory, name, got.aiter_bytes(PIECE), kind, limits, progress)


def evict(
    directory: Path, limits: MediaLimits, keep: Path | None = None, now: float | None = None
) -> list[Path]:
    """Remove files older than `max_age`, then the least recently written until the
    directory fits in `cache_cap`; ages counted to `now` (serve's clock's time; None: the
    real one). A message whose file went shows it as no longer cached."""
    now = Clock().now() if now is None else now
    found = []
    for p in directory.iterdir():
        try:
            if not p.is_file():
                continue
            st = p.stat()
            if p.name.endswith(".part"):  # a download under way, or one a kill left
                if now - st.st_mtime > STALE_PART:
                    p.unlink(missing_ok=True)
                continue
            found.append((p, st))
        except OSError:
            continue  # removed meanwhile
    found.sort(key=lambda item: item[1].st_mtime)
    total = sum(st.st_size for _, st in found)
    removed = []
    for path, st in found:
        old = now - st.st_mtime > limits.max_age
        if (total <= limits.cache_cap and not old) or path == keep:
            continue
        total -= st.st_size
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
