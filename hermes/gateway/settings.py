"""The whole of config.yaml (`Config`), assembled from the sections each feature declares
beside its code, and the sections of serve itself (`retention`, `ops`).

Config sits in the gateway, the lowest layer that can import every section: the agent's,
the terminal's, the scheduler's and the platforms' are all below it. `hermes.config`
reads a file into it (load_config(path, Config, SECTIONS)).
"""

from __future__ import annotations

import os
import zoneinfo
from collections.abc import Collection, Mapping
from typing import ClassVar

import attrs

from hermes.adapters.settings import GatewayConfig, PlatformConfig
from hermes.agent.browser.settings import BrowserConfig
from hermes.agent.mcp.settings import McpConfig
from hermes.agent.settings import AgentConfig, MediaConfig, ModelConfig
from hermes.agent.skills.settings import SkillsConfig
from hermes.agent.web.settings import WebConfig
from hermes.config import at_least, known_timezone, port_number, positive
from hermes.cron.settings import CronConfig
from hermes.terminal.settings import TerminalConfig

RENAMED = {
    "busy_mode": "gateway.busy",
    "require_mention": "groups.activation: mention or always",
    "group_sessions_per_user": "platforms.<name>.groups.sessions: per_user or shared",
}
"""Keys an earlier release read, and what took their place: named in the error."""


@attrs.frozen
class RetentionConfig:
    """How long what piles up in state.db is kept; serve prunes it every `prune_every`
    seconds while it runs, never what is still needed."""

    journal_days: float = attrs.field(default=7.0, validator=positive)
    """Days inbound events are kept (a duplicate is recognised within them), and ended
    approval requests."""
    outbox_sent_days: float = attrs.field(default=30.0, validator=positive)
    """Days sent outbox rows are kept (unsent, dead and unknown ones stay)."""
    cron_runs_per_job: int = attrs.field(default=200, validator=at_least(1))
    """The newest runs kept per job (a running one stays)."""
    cron_deliveries_days: float = attrs.field(default=30.0, validator=positive)
    """Days the records of where cron briefs went are kept."""
    pairing_failures_hours: float = attrs.field(default=24.0, validator=at_least(2))
    """Hours failed pairing approvals are kept (at least the 2 the lockout looks back)."""
    prune_every: float = attrs.field(default=3600.0, validator=at_least(60))
    """Seconds between pruning passes (at least 60); one also runs at start."""


@attrs.frozen
class OpsConfig:
    """The operator surfaces (/health, /ready, /metrics, the dashboard) and the watchdog of
    the event loop."""

    enabled: bool = True
    """`false`: serve runs neither the operator surfaces nor the watchdog."""
    host: str | None = None
    """The address they listen on; unset: 127.0.0.1 only (beyond it, put TLS in front)."""
    port: int = attrs.field(default=9120, validator=port_number)
    """Their port; 0 picks a free one (written to HERMES_HOME/ops.port)."""
    freeze_seconds: float = attrs.field(default=60.0, validator=at_least(1))
    """An event loop blocked this long logs every stack and exits 75, for the service
    manager to restart it."""

    def bind_host(self) -> str:
        return self.host or "127.0.0.1"


@attrs.frozen
class Config:
    """The whole of config.yaml. `Config()` is the embedded default."""

    renamed: ClassVar[Mapping[str, str]] = RENAMED  # for the loader's errors

    model: ModelConfig = ModelConfig()
    """The model that answers: with no configuration, the built-in offline one."""
    fallback_providers: tuple[ModelConfig, ...] = ()
    """Providers tried in order when the model cannot answer; each entry has the keys of
    `model`."""
    agent: AgentConfig = AgentConfig()
    """The agent's turns: model calls, tools, and compaction of long conversations."""
    terminal: TerminalConfig = TerminalConfig()
    """Where commands run: the host, the sandbox, another machine over ssh."""
    gateway: GatewayConfig = GatewayConfig()
    """How messages become turns: conversations, who may talk, rate limits, restarts."""
    cron: CronConfig = CronConfig()
    """Scheduled jobs."""
    ops: OpsConfig = OpsConfig()
    """The operator surfaces over HTTP and the event loop's watchdog."""
    retention: RetentionConfig = RetentionConfig()
    """How long state.db keeps what piles up."""
    timezone: str | None = attrs.field(default=None, validator=known_timezone)
    """The IANA zone (`Europe/Berlin`) schedules are read in; unset: the machine's ($TZ,
    then /etc/localtime), else UTC."""
    platforms: dict[str, PlatformConfig] = attrs.field(factory=dict)
    """The chat platforms, one section each (below)."""
    mcp: McpConfig = McpConfig()
    """Tools from MCP servers."""
    web: WebConfig = WebConfig()
    """The web tools."""
    browser: BrowserConfig = BrowserConfig()
    """The agent's browser (the browser_* tools)."""
    media: MediaConfig = MediaConfig()
    """Attachments, voice and images, both ways."""
    skills: SkillsConfig = SkillsConfig()
    """Skills the agent may open, and who may use them."""

    def zone(self) -> zoneinfo.ZoneInfo:
        """The configured timezone, else the machine's ($TZ, then /etc/localtime), else UTC."""
        return resolve_zone(self.timezone)

    def secret_names(self) -> list[str]:
        """The environment variables this config takes secrets from."""
        names = [m.api_key_env for m in (self.model, *self.fallback_providers)]
        for platform in self.platforms.values():
            names.extend(platform.token_names())
        for server in self.mcp.servers.values():
            names.extend(server.secret_names())
        names.append(self.web.search.key_env)
        names += [self.media.transcribe.key_env, self.media.speak.key_env]
        return sorted({n for n in names if n})

    def enabled_platforms(self) -> dict[str, PlatformConfig]:
        return {name: p for name, p in self.platforms.items() if p.enabled}

    def unknown_platforms(self, names: Collection[str]) -> str | None:
        """What names a platform that has no section under `platforms` (`names`)."""
        unknown = [p for p in self.media.speak.platforms if p not in names]
        if not unknown:
            return None
        return f"media.speak.platforms: {', '.join(unknown)} not under platforms"


def resolve_zone(name: str | None) -> zoneinfo.ZoneInfo:
    candidates = [name] if name else [os.environ.get("TZ", "").lstrip(":")]
    if not name:
        try:
            target = os.readlink("/etc/localtime")
            candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
        except OSError:
            pass
    for candidate in candidates:
        if candidate:
            try:
                return zoneinfo.ZoneInfo(candidate)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                continue
    return zoneinfo.ZoneInfo("UTC")
