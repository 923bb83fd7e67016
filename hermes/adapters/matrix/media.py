"""Matrix media both ways, in the clear and end-to-end encrypted.

In: an `m.image`, `m.file`, `m.audio` or `m.video` event's file becomes a reference
(`MediaRef`, JSON text the journal keeps: the `mxc://` URI, name, type, size and, from an
encrypted room, the EncryptedFile's key, counter block and hash), fetched only once the
event is authorized, with the token: `GET /_matrix/client/v1/media/download/{server}/{id}`
(Matrix 1.11's authenticated media), or `/_matrix/media/v3/download/...` where the
homeserver is older than that (404 M_UNRECOGNIZED). An encrypted file is decrypted
(AES-256-CTR) piece by piece as it streams into the cache, its ciphertext hashed on the
way: a hash other than the event's `hashes.sha256` removes what was written (refused).

Out: hermes's copy of the file streams to `POST /_matrix/media/v3/upload` (Synapse wants
its Content-Length; CTR keeps the length), encrypted first for an encrypted room with a new
key and counter block, whose EncryptedFile the event carries in `file` instead of `url`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import httpx
import trio
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from hermes.adapters.contract import (
    Fetched,
    OutFile,
    RetryAfter,
    SendResult,
    Unconfirmed,
    file_gone,
)
from hermes.adapters.http import HttpAnswer, failed_send, read_capped
from hermes.adapters.matrix.api import CODES, as_dict, error_of, refusal_of
from hermes.adapters.media import (
    FILE_SECONDS,
    MAX_ATTACHMENTS,
    PIECE,
    MediaError,
    MediaLimits,
    Saved,
    refuse_unless_ok,
    save_stream,
)
from hermes.adapters.refusals import result_of

MEDIA_TYPES = frozenset({"m.image", "m.file", "m.audio", "m.video"})
# A server name (a host, maybe an IPv6 literal, maybe a port), then a media id.
MXC = re.compile(r"mxc://([A-Za-z0-9.:\[\]-]+)/([A-Za-z0-9_-]+)")
VOICE = "org.matrix.msc3245.voice"  # Element's mark of a voice message (MSC3245)
AUDIO = "org.matrix.msc1767.audio"


@attrs.frozen
class MediaRef:
    """An event's file as its InboundEvent keeps it. `sealed`: the EncryptedFile's `key`,
    `iv`, `hashes` and `v` (None: in the clear)."""

    url: str
    name: str
    mime: str | None = None
    size: int | None = None
    sealed: dict[str, Any] | None = None

    def to_text(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> MediaRef:
        values = json.loads(text)
        size, sealed = values.get("size"), values.get("sealed")
        return cls(
            str(values["url"]),
            str(values.get("name") or "attachment"),
            values.get("mime"),
            size if isinstance(size, int) else None,
            sealed if isinstance(sealed, dict) else None,
        )


def media_of(content: dict[str, Any]) -> MediaRef | None:
    """The file of a media message's content; None when it names none hermes can fetch."""
    file = content.get("file")
    sealed = None
    if isinstance(file, dict):
        url = file.get("url")
        sealed = {k: file.get(k) for k in ("key", "iv", "hashes", "v")}
    else:
        url = content.get("url")
    if not isinstance(url, str) or MXC.fullmatch(url) is None:
        return None
    info = as_dict(content.get("info"))
    name = next(
        (
            n
            for n in (content.get("filename"), content.get("body"))
            if isinstance(n, str) and n.strip()
        ),
        "attachment",
    )
    mime, size = info.get("mimetype"), info.get("size")
    return MediaRef(
        url,
        name,
        mime if isinstance(mime, str) else None,
        size if isinstance(size, int) and not isinstance(size, bool) else None,
        sealed,
    )


def caption_of(content: dict[str, Any], body: str) -> str:
    """A media message's caption (Matrix 1.10): its body where a `filename` other than it
    names the file; otherwise the body is the file's name, and there is none."""
    filename = content.get("filename")
    return body if isinstance(filename, str) and filename and body != filename else ""


# -- in -------------------------------------------------------------------------------------


async def fetch_media(
    http: httpx.AsyncClient | None,
    base: str,
    refs: tuple[str, ...],
    directory: Path | None,
    limits: MediaLimits,
) -> Fetched:
    """Each referenced file streamed into `directory` on the adapter's client (its token
    goes only to the homeserver), decrypted when it was sent encrypted."""
    if directory is None or http is None:
        return Fetched((), tuple("[media cannot be saved here]" for _ in refs))
    files: list[Saved] = []
    problems: list[str] = []
    for text in refs[:MAX_ATTACHMENTS]:
        try:
            ref = MediaRef.from_text(text)
            if ref.size is not None and ref.size > limits.max_file:
                raise MediaError(
                    f"{ref.name} is {ref.size} bytes, over the {limits.max_file} limit"
                )
            with trio.fail_after(FILE_SECONDS):
                files.append(await _download(http, base, ref, directory, limits))
        except (
            MediaError,
            httpx.HTTPError,
            OSError,
            KeyError,
            ValueError,
            TypeError,
            trio.TooSlowError,
        ) as exc:
            problems.append(f"[an attachment could not be fetched: {exc}]")
    return Fetched(tuple(files), tuple(problems))


def download_urls(base: str, mxc: str) -> tuple[str, str]:
    """The authenticated download URL of `mxc`, and the older unauthenticated one."""
    found = MXC.fullmatch(mxc)
    if found is None or found[1].startswith(".") or ".." in found[1]:
        raise MediaError(f"{mxc!r} is not a Matrix media URI")
    where = "/".join(quote(p, safe="") for p in found.groups())
    root = base.rstrip("/")
    return (
        f"{root}/_matrix/client/v1/media/download/{where}",
        f"{root}/_matrix/media/v3/download/{where}",
    )


async def _download(
    http: httpx.AsyncClient, base: str, ref: MediaRef, directory: Path, limits: MediaLimits
) -> Saved:
    key = _Key.of(ref.sealed) if ref.sealed is not None else None  # refused before a byte
    tag = hashlib.sha256(ref.url.encode()).hexdigest()[:12]
    authenticated, legacy = download_urls(base, ref.url)
    for url in (authenticated, legacy):
        async with http.stream("GET", url, follow_redirects=False) as got:
            if url == authenticated and got.status_code == 404 and await _unrecognized(got):
                continue  # a homeserver older than authenticated media
            refuse_unless_ok(got, ref.name, limits)
            pieces = got.aiter_bytes(PIECE)
            if key is None:
                mime = ref.mime or got.headers.get("content-type")
                return await save_stream(directory, f"{tag}-{ref.name}", pieces, mime, limits)
            async with contextlib.aclosing(key.opened(pieces, ref.name)) as opened:
                return await save_stream(directory, f"{tag}-{ref.name}", opened, ref.mime, limits)
    raise MediaError(f"{ref.name} could not be fetched: the homeserver serves no media")


async def _unrecognized(response: httpx.Response) -> bool:
    """Whether a 404 is Matrix's "no such endpoint" (not "no such media")."""
    body = await read_capped(response, 4096)
    try:
        said = json.loads(body or b"")
    except ValueError:
        return False
    return isinstance(said, dict) and said.get("errcode") == "M_UNRECOGNIZED"


@attrs.frozen
class _Key:
    """An EncryptedFile's AES-256-CTR key, initial counter block and ciphertext hash."""

    key: bytes
    iv: bytes
    sha256: bytes

    @classmethod
    def of(cls, sealed: dict[str, Any]) -> _Key:
        jwk = as_dict(sealed.get("key"))
        if sealed.get("v") != "v2" or jwk.get("alg") != "A256CTR" or jwk.get("kty") != "oct":
            raise MediaError("an encrypted attachment that is not v2 A256CTR")
        key, iv = _unb64(jwk.get("k")), _unb64(sealed.get("iv"))
        digest = _unb64(as_dict(sealed.get("hashes")).get("sha256"))
        if (len(key), len(iv), len(digest)) != (32, 16, 32):
            raise MediaError("an encrypted attachment whose key, iv or hash is malformed")
        return cls(key, iv, digest)

    async def opened(self, pieces: AsyncIterator[bytes], name: str) -> AsyncIterator[bytes]:
        """The plaintext of `pieces`, as they come; MediaError at the end when their hash
        is not the one the event gave (the caller drops what was written)."""
        decryptor = Cipher(algorithms.AES(self.key), modes.CTR(self.iv)).decryptor()
        hashed = hashlib.sha256()
        async for piece in pieces:
            hashed.update(piece)
            yield decryptor.update(piece)
        tail = decryptor.finalize()
        if not hmac.compare_digest(hashed.digest(), self.sha256):
            raise MediaError(f"{name}: its hash is not the one its message gave: refused")
        if tail:
            yield tail


def _unb64(text: Any) -> bytes:
    """Unpadded base64, standard or URL-safe (a JWK's `k` is the latter)."""
    if not isinstance(text, str):
        raise MediaError("an encrypted attachment without its key, iv or hash")
    try:
        return base64.urlsafe_b64decode(
            text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4)
        )
    except (binascii.Error, ValueError) as exc:
        raise MediaError("an encrypted attachment whose key, iv or hash is not base64") from exc


def _b64(raw: bytes, *, url: bool = False) -> str:
    encoded = base64.urlsafe_b64encode(raw) if url else base64.b64encode(raw)
    return encoded.decode().rstrip("=")


# -- out ------------------------------------------------------------------------------------


@attrs.frozen
class Uploaded:
    """Where an upload went, and (`sealed`) the EncryptedFile of an encrypted one."""

    mxc: str
    sealed: dict[str, Any] | None = None


async def upload(
    http: httpx.AsyncClient, base: str, file: OutFile, encrypt: bool
) -> Uploaded | SendResult:
    """Stream hermes's copy of `file` to the media repository (`encrypt`: AES-256-CTR under
    a new key). Nothing shows in the room yet, so a failure goes again from the start."""
    key, iv = secrets.token_bytes(32), secrets.token_bytes(8) + bytes(8)  # the counter at 0
    hashed = hashlib.sha256()
    try:
        size = await trio.to_thread.run_sync(os.path.getsize, file.path)
        handle = await trio.open_file(file.path, "rb")
    except OSError as exc:  # its copy is gone: it can never be sent
        return file_gone(exc)

    async def body() -> AsyncIterator[bytes]:
        encryptor = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor() if encrypt else None
        while piece := await handle.read(PIECE):
            out = encryptor.update(piece) if encryptor is not None else piece
            hashed.update(out)
            yield out

    headers = {
        "Content-Type": "application/octet-stream" if encrypt else file.mime,
        "Content-Length": str(size),
    }
    url = base.rstrip("/") + "/_matrix/media/v3/upload"
    try:
        async with handle:
            response = await http.post(
                url, params={"filename": file.name}, headers=headers, content=body()
            )
    except httpx.HTTPError as exc:
        result = failed_send(exc)
        return RetryAfter(None, result.reason) if isinstance(result, Unconfirmed) else result
    answer = HttpAnswer.of(response)
    mxc = as_dict(answer.body).get("content_uri")
    if answer.status != 200 or not isinstance(mxc, str) or MXC.fullmatch(mxc) is None:
        # M_TOO_LARGE: permanent. A refused token is the sync's to find (it goes fatal).
        return result_of(refusal_of(error_of("upload", answer)), CODES)
    if not encrypt:
        return Uploaded(mxc)
    jwk = {
        "kty": "oct",
        "key_ops": ["encrypt", "decrypt"],
        "alg": "A256CTR",
        "k": _b64(key, url=True),
        "ext": True,
    }
    return Uploaded(
        mxc,
        {
            "url": mxc,
            "key": jwk,
            "iv": _b64(iv),
            "hashes": {"sha256": _b64(hashed.digest())},
            "v": "v2",
        },
    )


def file_content(file: OutFile, caption: str, uploaded: Uploaded) -> dict[str, Any]:
    """The `m.room.message` content of a sent file: `m.image`, `m.audio` (a voice note
    marked as Element marks one), `m.video` or `m.file`; the caption as its `body` beside
    the `filename` (Matrix 1.10's media captions), else the name alone."""
    top = file.mime.split("/", 1)[0]
    if file.voice or top == "audio":
        msgtype = "m.audio"
    elif file.image:
        msgtype = "m.image"
    else:
        msgtype = "m.video" if top == "video" else "m.file"
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": caption or file.name,
        "filename": file.name,
        "info": {"mimetype": file.mime, "size": file.size},
    }
    if uploaded.sealed is not None:
        content["file"] = uploaded.sealed
    else:
        content["url"] = uploaded.mxc
    if file.voice:
        content[VOICE] = {}
        content[AUDIO] = {}
    return content
