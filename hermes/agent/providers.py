"""The provider chain from config.yaml: the model, then each fallback, in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hermes.adapters.registry import PLATFORMS
from hermes.agent.browser.browsers import Browsers
from hermes.agent.chain import ProviderChain
from hermes.agent.context import Budgets
from hermes.agent.context_files import ContextFiles
from hermes.agent.loop import Agent
from hermes.agent.mcp.servers import McpServers
from hermes.agent.offline import OFFLINE_CONTEXT, OfflineProvider
from hermes.agent.openai_compat import DEFAULT_CONTEXT, OpenAICompatible
from hermes.agent.permissions import COMMAND_TOOLS, FILE_TOOLS, Permissions
from hermes.agent.provider import Provider
from hermes.agent.settings import ModelConfig, Settings
from hermes.agent.skills.library import SkillLibrary
from hermes.agent.tools.browser import browser_tools
from hermes.agent.tools.catalog import default_tools, web_tools
from hermes.config import ConfigError, Secrets
from hermes.home import HermesHome
from hermes.terminal.addresses import AllowList

# A user's Chromium runs only inside the sandbox.
USERS_BROWSE = "a user's browser runs in the sandbox, and there is none here"


def build_provider(entry: ModelConfig, secrets: Secrets) -> Provider:
    if entry.provider == "offline":
        return OfflineProvider(entry.model, entry.context_tokens or OFFLINE_CONTEXT)
    if not entry.base_url:
        raise ConfigError(f"model provider {entry.provider!r} needs a base_url")
    key = secrets.get(entry.api_key_env)
    if entry.api_key_env and key is None:
        raise ConfigError(f"{entry.api_key_env} (the API key of {entry.provider}) is not set")
    return OpenAICompatible(
        entry.provider,
        entry.model,
        entry.base_url,
        key,
        context_tokens=entry.context_tokens or DEFAULT_CONTEXT,
        image_px=entry.image_max_px if entry.multimodal else None,
    )


def build_chain(entries: Sequence[ModelConfig], secrets: Secrets) -> ProviderChain:
    """The model, then each fallback (`entries`, in that order)."""
    return ProviderChain([build_provider(e, secrets) for e in entries])


def build_agent(
    config: Settings,
    secrets: Secrets,
    home: HermesHome,
    redact: Callable[[str], str] = str,
    mcp: McpServers | None = None,
    no_sandbox: str | None = None,
    browsers: Browsers | None = None,
) -> Agent:
    """The agent config.yaml describes: its providers, tools (and which role may call
        which), turn bound and context budget. `redact` cleans every tool result; `mcp`: the
        MCP servers serve runs, whose tools are offered too; `no_sandbox`: why commands have
        no sandbox here, so users are offered no tool that runs one; `home`: where its skills
        and SOUL.md are; `browsers`: serve's, which its tree runs (None: the browser tools say
    they run only inside serve)."""
    agent = config.agent
    budgets = Budgets(agent.compact_at, agent.keep_turns)
    if browsers is None:
        allow = AllowList.parse(config.web.allow_private)
        browsers = Browsers(config.browser, allow, config.media.max_file_bytes)
    browsing = browser_tools(browsers, config.model.multimodal)
    tools = default_tools() | web_tools(config.web, secrets) | browsing
    for name, section in config.enabled_platforms().items():
        if name in PLATFORMS:  # an unknown one is refused where serve starts
            tools |= PLATFORMS[name].tools_of(section, secrets)
    withheld: dict[str, dict[str, str]] = {"user": {}}
    if no_sandbox is not None:
        withheld["user"] |= {t: f"no sandbox ({no_sandbox})" for t in COMMAND_TOOLS + FILE_TOOLS}
        withheld["user"] |= {t: f"{USERS_BROWSE} ({no_sandbox})" for t in browsing}
    permissions = Permissions.build(agent.tools, tools, withheld)
    skills = SkillLibrary(home.skills, config.skills)
    return Agent(
        build_chain([config.model, *config.fallback_providers], secrets),
        tools,
        agent.max_turns,
        budgets,
        permissions,
        redact,
        mcp,
        skills,
        ContextFiles(home.soul),
        agent.delegate,
    )
