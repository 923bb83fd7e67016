"""Attachments a platform hands over as URLs (Discord's CDN links, Slack's
url_private_download): the event carries a reference, and the file is downloaded only
once the event is authorized, from a host the platform serves files from, with only the
headers that host needs (Discord's CDN gets no token; Slack's gets the bot's)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import attrs
import httpx
import trio

from hermes.adapters.contract import Fetched
from hermes.adapters.media import (
    FILE_SECONDS,
    MAX_ATTACHMENTS,
    MediaError,
    MediaLimits,
    Saved,
    download,
)


@attrs.frozen
class UrlRef:
    """An attachment as the event keeps it (in the journal, as JSON)."""

    url: str
    name: str
    size: int | None
    mime: str | None

    def to_text(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> UrlRef:
        values = json.loads(text)
        size = values.get("size")
        return cls(
            str(values["url"]),
            str(values.get("name") or "attachment"),
            size if isinstance(size, int) else None,
            values.get("mime"),
        )


def trusted(url: str, hosts: tuple[str, ...]) -> bool:
    """An https URL on one of `hosts` (a suffix match: `.discordapp.com`), or an exact
    host given with its scheme (a test's own server)."""
    parsed = httpx.URL(url)
    for host in hosts:
        if "://" in host:
            if url.startswith(host.rstrip("/") + "/"):
                return True
        elif parsed.scheme == "https" and (parsed.host == host or parsed.host.endswith("." + host)):
            return True
    return False


async def fetch_urls(
    refs: tuple[str, ...],
    directory: Path | None,
    limits: MediaLimits,
    hosts: tuple[str, ...],
    headers: dict[str, str] | None = None,
) -> Fetched:
    """Each referenced file streamed into `directory`, on a client of its own (the
    adapter's carries its token, which a CDN must never see)."""
    if directory is None:
        return Fetched((), tuple("[media cannot be saved here]" for _ in refs))
    files: list[Saved] = []
    problems: list[str] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=10.0)) as http:
        for text in refs[:MAX_ATTACHMENTS]:
            try:
                ref = UrlRef.from_text(text)
                if not trusted(ref.url, hosts):
                    raise MediaError(f"{ref.name} is not on the platform's file host")
                if ref.size is not None and ref.size > limits.max_file:
                    raise MediaError(
                        f"{ref.name} is {ref.size} bytes, over the {limits.max_file} limit"
                    )
                tag = hashlib.sha256(ref.url.split("?")[0].encode()).hexdigest()[:12]
                with trio.fail_after(FILE_SECONDS):
                    files.append(
                        await download(
                            http, ref.url, directory, f"{tag}-{ref.name}", ref.mime, limits, headers
                        )
                    )
            except (
                MediaError,
                httpx.HTTPError,
                OSError,
                KeyError,
                ValueError,
                trio.TooSlowError,
            ) as exc:
                problems.append(f"[an attachment could not be fetched: {exc}]")
    return Fetched(tuple(files), tuple(problems))
