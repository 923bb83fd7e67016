"""How a message's files reach the model: as structured data carried with the message,
never as lines of its text parsed back out.

A user's message is stored with its files as JSON (`messages.attachments`: each file's
name, type, size, sha256 and where it is cached, a voice note's words, and what could not
be fetched). Only when a model call is made are they rendered into what this model can
take: a line per file after the user's text, the image itself for a multimodal model
(downscaled to its limit, the result cached), a line saying an image came for one that
sees none, and "no longer cached" once the cache evicted the file. Nothing a user types,
no file name, caption or error text can name a file for the model to open: only the
message's own record does, and only files in the media cache are ever opened. No image is
ever held in the transcript or the session's memory.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from PIL import Image, ImageOps, UnidentifiedImageError

from hermes.adapters.media import Saved

IMAGES_PER_MESSAGE = 8  # images of one message sent to the model; the rest as lines
MAX_PIXELS = 25_000_000  # an image larger is refused unread (a decompression bomb)
FILES = "attachments"  # the key a user message's Attachments travel under until rendered


@attrs.frozen
class Attached:
    """One file of a message: what was saved, and for a voice note the line the model
    reads instead of the sound."""

    saved: Saved
    heard: str | None = None


@attrs.frozen
class Attachments:
    """A message's files, and a note for what could not be fetched."""

    files: tuple[Attached, ...] = ()
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.files or self.notes)

    def dumps(self) -> str:
        """As `messages.attachments` keeps them."""
        return json.dumps(
            {
                "files": [{**attrs.asdict(a.saved), "heard": a.heard} for a in self.files],
                "notes": list(self.notes),
            }
        )

    @classmethod
    def loads(cls, text: str | None) -> Attachments:
        if not text:
            return cls()
        data = json.loads(text)
        files = []
        for entry in data.get("files", ()):
            heard = entry.pop("heard", None)
            files.append(Attached(Saved(**entry), heard))
        return cls(tuple(files), tuple(data.get("notes", ())))

    def untrusted(self) -> str | None:
        """Why these files are text from outside the sender's hands: any file but a voice
        note (a document, an image: anyone may have written what it says)."""
        names = [a.saved.name for a in self.files if a.saved.kind != "audio"]
        return f"a file sent in the chat ({names[0]})" if names else None

    def paths(self) -> list[Path]:
        return [Path(a.saved.path) for a in self.files]


def attachment_line(saved: Saved) -> str:
    """How the transcript and the model name a file of a message (its name has no
    brackets, parentheses or control characters: hermes.adapters.media)."""
    return (
        f"[attached {saved.kind}: {saved.name} ({saved.mime}, {saved.size} bytes, "
        f"sha256 {saved.sha256[:12]}) at {saved.path}]"
    )


def described(attachments: Attachments) -> str:
    """The files as lines, for a person reading the transcript."""
    lines = []
    for attached in attachments.files:
        lines.append(attachment_line(attached.saved))
        if attached.heard:
            lines.append(attached.heard)
    return "\n".join([*lines, *attachments.notes])


async def for_model(
    messages: list[dict[str, Any]], image_px: int | None, cache: Path | None
) -> list[dict[str, Any]]:
    """`messages` as this model reads them: each user message's files rendered after its
    text, the last one's images as image parts (`image_px` set), evicted files marked.
    Only a file in the media `cache` is ever opened (None: none is)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    out = []
    for i, message in enumerate(messages):
        attachments = message.get(FILES)
        if attachments is None:
            out.append(message)
            continue
        plain = {k: v for k, v in message.items() if k != FILES}
        if not attachments:
            out.append(plain)
            continue
        out.append(
            await _rendered(plain, attachments, image_px if i == last else None, i == last, cache)
        )
    return out


async def _rendered(
    message: dict[str, Any],
    attachments: Attachments,
    image_px: int | None,
    latest: bool,
    cache: Path | None,
) -> dict[str, Any]:
    lines, images = await trio.to_thread.run_sync(_lines, attachments, image_px, latest, cache)
    text = "\n\n".join(p for p in (message.get("content") or "", "\n".join(lines)) if p)
    if not images:
        return {**message, "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for path in images:
        url = await trio.to_thread.run_sync(_data_url, path, image_px)
        if url is None:
            parts[0]["text"] += f"\n[the image {path.name} could not be read]"
        else:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return {**message, "content": parts}


def _lines(
    attachments: Attachments, image_px: int | None, latest: bool, cache: Path | None
) -> tuple[list[str], list[Path]]:
    """The files as this model reads them, and the images to show (blocking: it looks at
    the files)."""
    images: list[Path] = []
    root = cache.resolve() if cache is not None else None
    lines = []
    for attached in attachments.files:
        saved = attached.saved
        kind, path = saved.kind, Path(saved.path).resolve()
        if root is None or not path.is_relative_to(root):
            lines.append(f"[attached {kind}: {saved.name} (not in the media cache)]")
        elif not path.is_file():
            lines.append(f"[attached {kind}: {saved.name} (no longer cached)]")
        elif kind == "image" and latest and image_px is not None:
            if len(images) < IMAGES_PER_MESSAGE:
                images.append(path)
                lines.append(f"{attachment_line(saved)} (shown below)")
            else:
                lines.append(
                    f"{attachment_line(saved)} (not shown: {IMAGES_PER_MESSAGE} images"
                    " of one message at most)"
                )
        elif kind == "image" and latest:
            lines.append(f"{attachment_line(saved)} (an image: this model cannot see images)")
        else:
            lines.append(attachment_line(saved))
        if attached.heard:
            lines.append(attached.heard)
    return [*lines, *attachments.notes], images


def files_of(messages: Sequence[dict[str, Any]]) -> list[Path]:
    """Every file the messages carry, newest last."""
    return [p for m in messages if (a := m.get(FILES)) for p in a.paths()]


def _data_url(path: Path, px: int | None) -> str | None:
    """The image as a JPEG (or PNG, where it has transparency) data URL, its longest side
    at most `px`; the downscaled copy is cached beside the original."""
    px = px or 1568
    scaled = path.with_name(f"{path.stem}.{px}px.model")
    try:
        if not scaled.is_file():
            with Image.open(path) as img:
                if img.width * img.height > MAX_PIXELS:
                    return None
                img.draft("RGB", (px, px))  # JPEG: decode at a fraction of the size
                img.thumbnail((px, px))  # in place, before anything copies it full size
                img = ImageOps.exif_transpose(img)
                alpha = img.mode in ("RGBA", "LA", "P")
                img = img.convert("RGBA" if alpha else "RGB")
                part = scaled.with_name(f"{scaled.name}.{secrets.token_hex(4)}.part")
                with part.open("wb") as f:
                    img.save(f, "PNG" if alpha else "JPEG", quality=85)
                part.replace(scaled)
        data = scaled.read_bytes()
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError, ValueError):
        return None
    mime = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
