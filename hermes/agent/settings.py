"""The agent's sections of config.yaml: the model and its fallbacks (`model`,
`fallback_providers`), the agent's turns (`agent`) and media both ways (`media`).

The docstring under each field of these classes is its line in docs/configuration.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

import attrs

from hermes.adapters.settings import GatewayConfig, PlatformConfig
from hermes.agent.browser.settings import BrowserConfig
from hermes.agent.skills.settings import SkillsConfig
from hermes.agent.web.settings import WebConfig
from hermes.config import BadValue, at_least, not_blank, optional_at_least, positive, share
from hermes.cron.settings import CronConfig


@attrs.frozen
class ModelConfig:
    """One model provider: the model, or one of its fallbacks. (The docstring under
    each field of these classes is its line in docs/configuration.md.)"""

    provider: str = "offline"
    """`offline` (the built-in model: no network, deterministic), or a name you choose
    for an OpenAI-compatible chat-completions endpoint."""
    model: str = "hermes-offline"
    """The model's name, as the provider knows it."""
    base_url: str | None = None
    """The endpoint's base URL (`https://api.openai.com/v1`); every provider but `offline`
    needs one."""
    api_key_env: str | None = None
    """The environment variable holding the API key (never the key itself); unset: no key
    is sent."""
    context_tokens: int | None = attrs.field(default=None, validator=optional_at_least(1000))
    """The model's context window in tokens (at least 1000); unset: 128000, or 8000 for
    `offline`."""
    multimodal: bool = False
    """The model reads images: a user's images go to it as image parts (otherwise as a
    line saying an image came that it cannot see)."""
    image_max_px: int = attrs.field(default=1568, validator=at_least(64))
    """An image's longest side as sent to the model, in pixels: larger ones are
    downscaled first (and the result kept in the cache)."""


OWNER_TOOLS = ("*",)
USER_TOOLS = (
    "memory",
    "session_search",
    "send_message",
    "send_file",
    "skills_list",
    "skill_view",
    "skill_manage",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "todo",
    "clarify",
)


@attrs.frozen
class ToolsConfig:
    """Which tools each role may call, in one place. A tool a role may not call is never
    offered to its sessions."""

    owner: tuple[str, ...] = OWNER_TOOLS
    """The tools an owner may call; `*` is every tool."""
    user: tuple[str, ...] = USER_TOOLS
    """The tools every other user let in may call (`terminal` or `process` here gives every
    user a shell on this machine)."""
    pass_env: tuple[str, ...] = ()
    """Variables an owner's commands get besides PATH, HOME, LANG, LC_ALL, TERM, TZ, USER and
    LOGNAME (a command's environment is built from that list; a user's commands get only
    those)."""


@attrs.frozen
class DelegateConfig:
    """Subagents: the turns `delegate_task` runs for one turn, each with its own
    conversation and a subset of the parent's tools."""

    max_depth: int = attrs.field(default=1, validator=at_least(1))
    """How deep delegation goes: 1, a turn's subagents may not delegate again."""
    max_parallel: int = attrs.field(default=3, validator=at_least(1))
    """Subagents of one turn running at once; the others wait for a place."""
    max_total: int = attrs.field(default=10, validator=at_least(1))
    """Subagents one turn may start in all; more are refused with the reason."""
    timeout: float = attrs.field(default=600.0, validator=positive)
    """Seconds a subagent may run before it is stopped and reported timed out."""
    answer_chars: int = attrs.field(default=4000, validator=at_least(100))
    """Characters of each subagent's answer the parent gets (the rest is cut, and said)."""


@attrs.frozen
class AgentConfig:
    """The agent's turns: how many model calls, which tools, and when a long conversation
    is compacted."""

    max_turns: int = attrs.field(default=20, validator=at_least(1))
    """The model calls one turn may make at most."""
    compact_at: float = attrs.field(default=0.75, validator=share)
    """The share of the model's context window a prompt may fill before the conversation is
    compacted (0.1 to 0.95)."""
    keep_turns: int = attrs.field(default=4, validator=at_least(1))
    """The most recent turns compaction never touches."""
    tools: ToolsConfig = ToolsConfig()
    """Which tools each role may call, and what a command's environment keeps."""
    workdir: str | None = attrs.field(default=None, validator=not_blank)
    """Where every conversation's commands start; unset: a directory per session,
    HERMES_HOME/workspace/<session>. Never HERMES_HOME itself."""
    approval_timeout: float = attrs.field(default=300.0, validator=positive)
    """Seconds a guarded command (sudo, a download piped into a shell...) waits for an
    owner's approval in the chat before the request expires and the model is told."""
    delegate: DelegateConfig = DelegateConfig()
    """Subagents (`delegate_task`): how many, how deep, how long."""
    clarify_timeout: float = attrs.field(default=600.0, validator=positive)
    """Seconds a question the agent asks (`clarify`) waits for the user's answer."""

    def workdir_path(self) -> Path | None:
        return Path(self.workdir).expanduser() if self.workdir else None


@attrs.frozen
class TranscribeConfig:
    """Speech to text: an OpenAI-compatible `/audio/transcriptions` endpoint."""

    base_url: str | None = attrs.field(default=None, validator=not_blank)
    """The endpoint's base URL (`https://api.openai.com/v1`); unset: voice notes are not
    transcribed, and the model is told one arrived that it cannot hear."""
    model: str = "whisper-1"
    """The speech model, as the provider knows it."""
    key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the provider's API key; unset: no key is sent."""
    max_mb: float = attrs.field(default=24.0, validator=positive)
    """The most one request may carry (OpenAI's limit is 25 MB); longer audio is cut into
    `chunk_seconds` pieces with ffmpeg where it is installed, else not transcribed."""
    chunk_seconds: int = attrs.field(default=600, validator=at_least(30))
    """The length of each piece of long audio."""


@attrs.frozen
class SpeakConfig:
    """Voice replies: an answer read aloud by an OpenAI-compatible `/audio/speech`
    endpoint and sent as a voice note."""

    base_url: str | None = attrs.field(default=None, validator=not_blank)
    """The endpoint's base URL; unset: no voice replies."""
    model: str = "tts-1"
    """The speech model."""
    voice: str = "alloy"
    """The voice, as the provider names it."""
    key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the provider's API key; unset: no key is sent."""
    platforms: tuple[str, ...] = ()
    """The platforms whose chats get voice replies (opt in per platform)."""
    mode: Literal["beside", "instead"] = "beside"
    """`beside`: the voice note follows the text; `instead`: the voice note alone, the text
    held back `hold` seconds and sent only if no voice note could be made (these
    platforms show no progress: a streamed answer would show the text)."""
    hold: float = attrs.field(default=150.0, validator=positive)
    """Seconds the text waits, in `instead` mode, for its voice note."""
    max_chars: int = attrs.field(default=4000, validator=at_least(1))
    """Answers longer than this are not read aloud (the text goes as usual)."""

    def __attrs_post_init__(self) -> None:
        if self.platforms and self.base_url is None:
            raise BadValue("base_url: voice replies need the speech endpoint's base URL")

    def holds(self) -> dict[str, float]:
        """The seconds a turn's text waits, by platform, for the voice note sent instead of
        it (`mode: instead`)."""
        return {name: self.hold for name in self.platforms} if self.mode == "instead" else {}


@attrs.frozen
class MediaConfig:
    """Media both ways: what a chat sends is fetched (after authorization) into
    HERMES_HOME/cache/<platform>/, voice is transcribed, images go to a multimodal model,
    and files and voice notes go back."""

    max_file_mb: float = attrs.field(default=20.0, validator=positive)
    """The largest file fetched from a chat, in MB (Telegram's bots cannot fetch more
    than 20)."""
    per_chat_hour_mb: float = attrs.field(default=200.0, validator=positive)
    """The most media one chat may have fetched in an hour, in MB; past it attachments
    are left unfetched (the message is still answered)."""
    cache_mb: float = attrs.field(default=500.0, validator=positive)
    """The most a platform's cache holds, in MB: the oldest files are evicted first."""
    cache_days: float = attrs.field(default=30.0, validator=positive)
    """Cached files older than this are evicted."""
    transcribe: TranscribeConfig = TranscribeConfig()
    """Speech to text for voice notes and audio."""
    speak: SpeakConfig = SpeakConfig()
    """Voice replies."""

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 2**20)

    def __attrs_post_init__(self) -> None:
        if self.cache_mb < self.max_file_mb:
            raise BadValue(
                f"cache_mb: {self.cache_mb:g} cannot hold one file of max_file_mb "
                f"({self.max_file_mb:g})"
            )


class Settings(Protocol):
    """What the layers below the gateway read of config.yaml (the agent, cron's fires,
    the actions): hermes.gateway.settings.Config, assembled above them, is one."""

    @property
    def model(self) -> ModelConfig: ...

    @property
    def fallback_providers(self) -> Sequence[ModelConfig]: ...

    @property
    def agent(self) -> AgentConfig: ...

    @property
    def web(self) -> WebConfig: ...

    @property
    def browser(self) -> BrowserConfig: ...

    @property
    def media(self) -> MediaConfig: ...

    @property
    def skills(self) -> SkillsConfig: ...

    @property
    def platforms(self) -> Mapping[str, PlatformConfig]: ...

    @property
    def gateway(self) -> GatewayConfig: ...

    @property
    def cron(self) -> CronConfig: ...

    def enabled_platforms(self) -> dict[str, PlatformConfig]: ...

    def zone(self) -> ZoneInfo: ...
