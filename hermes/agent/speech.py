"""Speech both ways through OpenAI-compatible endpoints: a voice note's words
(`/audio/transcriptions`) and an answer read aloud (`/audio/speech`).

Audio longer than one request may carry is cut by duration with ffmpeg, where it is
installed (no Python library decodes Opus, the voice-note codec of most platforms);
without it such audio is not transcribed, and the model is told why."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import attrs
import httpx
import trio

from hermes.adapters.media import PIECE, MediaLimits, Saved, save_stream
from hermes.agent.settings import MediaConfig, SpeakConfig, TranscribeConfig
from hermes.config import ConfigError, Secrets

TIMEOUT = httpx.Timeout(120.0, connect=10.0)
MAX_TRANSCRIPT = 20_000  # characters of one transcript the model sees
MAX_SPEECH = 25 * 1024 * 1024  # bytes of one synthesised voice note


@attrs.frozen
class Speech:
    """The speech settings and their keys (kept out of every repr)."""

    media: MediaConfig = MediaConfig()
    transcribe_key: str | None = attrs.field(default=None, repr=False)
    speak_key: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def of(cls, media: MediaConfig, secrets: Secrets) -> Speech:
        """The settings with their keys; ConfigError for a key variable named and unset."""
        keys = []
        for what, name in (
            ("transcribe", media.transcribe.key_env),
            ("speak", media.speak.key_env),
        ):
            key = secrets.get(name)
            if name and key is None:
                raise ConfigError(f"{name} (the key of media.{what}) is not set")
            keys.append(key)
        return cls(media, *keys)

    def speaks_on(self, platform: str) -> bool:
        return platform in self.media.speak.platforms


class SpeechError(Exception):
    """The provider could not do it; the message says why, without the key."""


def _headers(key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"} if key else {}


async def transcribe(config: TranscribeConfig, key: str | None, audio: Saved) -> str:
    """The words of `audio`: in one request, or cut into `chunk_seconds` pieces first
    when it is larger than `max_mb` (ffmpeg)."""
    if config.base_url is None:
        raise SpeechError("no speech-to-text provider is configured")
    path = Path(audio.path)
    if audio.size <= config.max_mb * 1024 * 1024:
        return await _one(config, key, path, audio.mime)
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise SpeechError(
            f"the audio is {audio.size // 1024 // 1024} MB, over the "
            f"{config.max_mb:g} MB one request may carry, and ffmpeg is not "
            "installed to cut it"
        )
    with tempfile.TemporaryDirectory(prefix="hermes-audio-") as tmp:
        pattern = str(Path(tmp) / f"piece%04d{path.suffix or '.ogg'}")
        done = await trio.run_process(
            [
                ffmpeg,
                "-nostdin",
                "-loglevel",
                "error",
                "-protocol_whitelist",
                "file",
                "-i",
                str(path),
                "-f",
                "segment",
                "-segment_time",
                str(config.chunk_seconds),
                "-c",
                "copy",
                pattern,
            ],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        if done.returncode != 0:
            raise SpeechError(f"ffmpeg could not cut the audio: {done.stderr[-300:]!r}")
        pieces = sorted(await trio.Path(tmp).iterdir())
        words = [await _one(config, key, Path(piece), audio.mime) for piece in pieces]
    return " ".join(w for w in words if w)[:MAX_TRANSCRIPT]


async def _one(config: TranscribeConfig, key: str | None, path: Path, mime: str) -> str:
    url = f"{str(config.base_url).rstrip('/')}/audio/transcriptions"
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        with path.open("rb") as f:  # streamed by httpx from the file, never read whole
            try:
                got = await http.post(
                    url,
                    headers=_headers(key),
                    data={"model": config.model, "response_format": "json"},
                    files={"file": (path.name, f, mime)},
                )
            except httpx.HTTPError as exc:
                raise SpeechError(f"the speech-to-text request failed: {exc!r}") from None
    if got.status_code != 200:
        raise SpeechError(f"speech to text answered HTTP {got.status_code}: {got.text[:200]}")
    try:
        text = got.json().get("text")
    except ValueError:
        text = None
    if not isinstance(text, str):
        raise SpeechError("speech to text answered without a text")
    return text.strip()[:MAX_TRANSCRIPT]


async def speak(
    config: SpeakConfig, key: str | None, text: str, directory: Path, name: str
) -> Saved:
    """`text` read aloud as an Opus voice note, streamed to `directory/name`."""
    if config.base_url is None:
        raise SpeechError("no speech endpoint is configured")
    url = f"{config.base_url.rstrip('/')}/audio/speech"
    body = {"model": config.model, "input": text, "voice": config.voice, "response_format": "opus"}
    limits = MediaLimits(MAX_SPEECH, cache_cap=1 << 62, max_age=float("inf"))  # retention's
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        try:
            async with http.stream("POST", url, json=body, headers=_headers(key)) as got:
                if got.status_code != 200:
                    await got.aread()
                    raise SpeechError(f"speech answered HTTP {got.status_code}: {got.text[:200]}")
                return await save_stream(
                    directory, name, got.aiter_bytes(PIECE), "audio/ogg", limits
                )
        except httpx.HTTPError as exc:
            raise SpeechError(f"the speech request failed: {exc!r}") from None
