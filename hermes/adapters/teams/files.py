"""Files to a Teams user, as a bot may send them: only in a personal chat, and only with
the user's consent. The send posts a file consent card (its name, size, and a context
naming the file kept for it); the user's Allow comes back as an `invoke` activity
(`fileConsent/invoke`, action `accept`) with an upload URL in the user's OneDrive; the
bytes are PUT there in one request, then a file info card shows the file in the chat.
Decline, and the card says so; nothing is uploaded. In channels and group chats a bot
cannot send a file: such a send is refused, saying so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import trio

from hermes.adapters.contract import OutFile

CONSENT = "application/vnd.microsoft.teams.card.file.consent"
INFO = "application/vnd.microsoft.teams.card.file.info"
# One PUT to an upload session takes at most 60 MiB (Microsoft Graph's limit a request).
MAX_UPLOAD = 60 * 1024 * 1024
PIECE = 64 * 1024


def consent_card(file: OutFile, key: str, caption: str) -> dict[str, Any]:
    """The consent card asking to send `file`; `key` names it when the answer comes."""
    description = caption or f"hermes would like to send you {file.name}"
    content = {
        "description": description[:1000],
        "sizeInBytes": file.size,
        "acceptContext": {"hermes_file": key},
        "declineContext": {"hermes_file": key},
    }
    return {"contentType": CONSENT, "name": file.name, "content": content}


def info_card(upload: dict[str, Any], name: str) -> dict[str, Any]:
    """The card showing the uploaded file in the chat (from the invoke's `uploadInfo`)."""
    content = {"uniqueId": upload.get("uniqueId"), "fileType": upload.get("fileType")}
    return {
        "contentType": INFO,
        "contentUrl": upload.get("contentUrl"),
        "name": name,
        "content": content,
    }


async def pieces(path: str) -> AsyncIterator[bytes]:
    """The file's bytes, a piece at a time (never held whole)."""
    async with await trio.open_file(path, "rb") as f:
        while piece := await f.read(PIECE):
            yield piece
