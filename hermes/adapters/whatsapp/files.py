"""Files to WhatsApp: which message a file goes as, and the type its upload declares.

The Cloud API sends a file in two steps: `POST /{phone-number-id}/media` (multipart:
`file`, `type`, `messaging_product`) answers a media id, and a message of type image,
audio or document refers to it. Meta's size limits are by type (JPEG and PNG images
5 MB, audio and video 16 MB, WebP 500 KB as stickers, documents 100 MB), and the upload
already refuses a file over the limit of the type it declares ("File Too Large").
"""

from __future__ import annotations

from typing import Any

import attrs

from hermes.adapters.contract import OutFile

MB = 1024 * 1024
IMAGE_MAX = 5 * MB
AUDIO_MAX = 16 * MB  # video's too
STICKER_MAX = 500 * 1024  # WebP: animated stickers'
DOCUMENT_MAX = 100 * MB  # the most any upload takes (WHATSAPP.max_upload)
IMAGE_TYPES = frozenset({"image/jpeg", "image/png"})  # what an image message shows
UNTYPED = "application/octet-stream"


def kind_of(file: OutFile, caption: str) -> str:
    """image (JPEG or PNG within 5 MB), audio (a voice note: Ogg Opus within 16 MB, and no
    caption, which audio cannot carry) or document (the rest, named)."""
    mime = _base(file.mime)
    if file.voice and not caption and mime == "audio/ogg" and file.size <= AUDIO_MAX:
        return "audio"
    if file.image and mime in IMAGE_TYPES and file.size <= IMAGE_MAX:
        return "image"
    return "document"


def declared(file: OutFile, kind: str) -> OutFile:
    """The file as its upload declares it: a document over the limit of its own type (an
    image over 5 MB) is declared untyped, which Meta takes up to the document limit; its
    name keeps the extension the user's app goes by."""
    if kind == "document" and file.size > type_limit(file.mime):
        return attrs.evolve(file, mime=UNTYPED)
    return file


def type_limit(mime: str) -> int:
    """The largest file Meta takes at the upload for a declared `mime`."""
    base = _base(mime)
    if base == "image/webp":
        return STICKER_MAX
    if base.startswith("image/"):
        return IMAGE_MAX
    if base.startswith(("audio/", "video/")):
        return AUDIO_MAX
    return DOCUMENT_MAX


def media_message(file: OutFile, kind: str, media_id: str, caption: str) -> dict[str, Any]:
    """The message's `type` and its object referring to the uploaded `media_id`."""
    media: dict[str, Any] = {"id": media_id}
    if caption and kind != "audio":
        media["caption"] = caption
    if kind == "document":
        media["filename"] = file.name
    return {"type": kind, kind: media}


def _base(mime: str) -> str:
    return mime.split(";", 1)[0].strip().lower()
