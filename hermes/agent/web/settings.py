"""The web tools' section of config.yaml (`web`).

The docstring under each field of these classes is its line in docs/configuration.md.
"""

from __future__ import annotations

from typing import Literal

import attrs

from hermes.config import BadValue, at_least, not_blank


@attrs.frozen
class SearchConfig:
    """Where web_search asks; with no provider the tool is not offered."""

    provider: Literal["searxng", "brave", "tavily"] | None = None
    """`searxng` (your instance, its `url`), `brave` or `tavily` (a key in `key_env`)."""
    url: str | None = attrs.field(default=None, validator=not_blank)
    """SearXNG's base URL (required for it); for brave and tavily, their API unless set."""
    key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the provider's API key (brave, tavily)."""
    results: int = attrs.field(default=5, validator=at_least(1))
    """Results returned per search (at most 20)."""

    def __attrs_post_init__(self) -> None:
        if self.provider == "searxng" and self.url is None:
            raise BadValue("url: searxng needs the base URL of your instance")
        if self.provider in ("brave", "tavily") and self.key_env is None:
            raise BadValue(f"key_env: {self.provider} needs the variable holding its key")
        if self.results > 20:
            raise BadValue(f"results: at most 20, got {self.results}")


@attrs.frozen
class WebConfig:
    """The web tools: web_fetch reads a page, web_search asks a search provider."""

    allow_private: tuple[str, ...] = ()
    """Hosts, addresses or ranges (`10.0.0.0/8`) web_fetch may reach although they are
    loopback, private, link-local or cloud metadata; everything else of that kind is
    refused."""
    search: SearchConfig = SearchConfig()
    """The search provider."""
