"""How a message's files reach the model. The transcript keeps one line per file (its
name, type, size, sha256 and where it is cached); only when a model call is made is
that line turned into what this model can take: the image itself for a multimodal
model (downscaled to its limit, the result cached), a line saying an image came for
one that sees none, and "no longer cached" once the cache evicted the file. No image
is ever held in the transcript or the session's memory."""

from __future__ import annotations

import base64
import re
import secrets
from pathlib import Path
from typing import Any

import trio
from PIL import Image, ImageOps, UnidentifiedImageError

from hermes.adapters.media import Saved

IMAGES_PER_MESSAGE = 8  # images of one message sent to the model; the rest as lines
MAX_PIXELS = 25_000_000  # an image larger is refused unread (a decompression bomb)
_LINE = re.compile(
    r"^\[attached (?P<kind>image|audio|file): (?P<name>[^\n]*?) \((?P<mime>[^,\n]+), "
    r"(?P<size>\d+) bytes, sha256 (?P<sha>[0-9a-f]{12})\) at (?P<path>/[^\n]*)\]$",
    re.MULTILINE,
)
_TYPED = re.compile(r"^\[attached ", re.MULTILINE)


def typed(text: str) -> str:
    """A user's own words, where a line of theirs that looks like an attachment's is marked
    as typed: only the lines the turn adds (attachment_line) name files."""
    return _TYPED.sub("(typed) [attached ", text)


def attachment_line(saved: Saved) -> str:
    """The transcript's line for a file of the user's message."""
    return (f"[attached {saved.kind}: {saved.name} ({saved.mime}, {saved.size} bytes, "
            f"sha256 {saved.sha256[:12]}) at {saved.path}]")  # fmt: skip


async def for_model(
    messages: list[dict[str, Any]], image_px: int | None, cache: Path | None
) -> list[dict[str, Any]]:
    """`messages` as this model reads them: the last user message's images as image
    parts (`image_px` set), evicted files marked in every message. Only a file in the
    media `cache` is ever opened (None: none is)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    out = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if (
            message.get("role") != "user"
            or not isinstance(content, str)
            or "[attached " not in content
        ):
            out.append(message)
            continue
        out.append(await _rendered(message, content, image_px if i == last else None, i == last,
                                   cache))  # fmt: skip
    return out


async def _rendered(message: dict[str, Any], content: str, image_px: int | None,
                    latest: bool, cache: Path | None) -> dict[str, Any]:  # fmt: skip
    text, images = await trio.to_thread.run_sync(_lines, content, image_px, latest, cache)
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


def _lines(content: str, image_px: int | None, latest: bool,
           cache: Path | None) -> tuple[str, list[Path]]:  # fmt: skip
    """The message's attachment lines as this model reads them, and the images to show
    (blocking: it looks at the files)."""
    images: list[Path] = []
    root = cache.resolve() if cache is not None else None

    def line(found: re.Match[str]) -> str:
        kind, name, path = found["kind"], found["name"], Path(found["path"]).resolve()
        if root is None or not path.is_relative_to(root):
            return f"[attached {kind}: {name} (not in the media cache)]"
        if not path.is_file():
            return f"[attached {kind}: {name} (no longer cached)]"
        if kind == "image" and latest:
            if image_px is not None and len(images) < IMAGES_PER_MESSAGE:
                images.append(path)
                return f"{found[0]} (shown below)"
            if image_px is None:
                return f"{found[0]} (an image: this model cannot see images)"
        return found[0]

    return _LINE.sub(line, content), images


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
