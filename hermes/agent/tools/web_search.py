"""web_search: ask the configured search provider (SearXNG, Brave or Tavily) and give
the model title, URL and snippet per result.

The provider is outside the machine, so its answer is untrusted: its size is bounded,
each field capped, results without an http(s) URL dropped, and the whole capped like
a command's output. The provider's key goes only into its header; errors name the
provider and the problem, never the key. Redirects are not followed: the answer comes
from the configured endpoint or not at all.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import attrs
import httpx
import trio

from hermes.adapters.http import read_capped
from hermes.agent.tools.base import ToolContext, ToolError, capped, need, obj
from hermes.agent.web.settings import SearchConfig
from hermes.config import ConfigError, Secrets

TIMEOUT = 20.0  # seconds for the whole request, answer included
MAX_BODY = 2_000_000  # bytes of an answer
MAX_QUERY = 400  # characters (Brave's own limit)
TITLE_CAP = 300
SNIPPET_CAP = 1000
ERROR_EXCERPT = 200  # bytes of an error answer quoted to the model
URL_CAP = 2048  # a longer one is dropped, not cut: a cut URL leads nowhere

# A provider's request: (query, count, key) -> httpx.AsyncClient.request's keywords
# beside the method and URL.
Ask = Callable[[str, int, str | None], dict[str, Any]]


@attrs.frozen
class Provider:
    """How one search API is asked and where its answer keeps the results."""

    base: str | None  # the API's base URL; None: the configured `url` (required)
    method: str
    path: str
    ask: Ask
    results_at: tuple[str, ...]  # the keys leading to the list of results
    snippet: str  # the field of a result that holds its snippet
    keyed: bool = False  # sends the key from `key_env`
    marked_up: bool = False  # snippets carry HTML highlighting (<strong>) and entities


PROVIDERS: dict[str, Provider] = {
    "searxng": Provider(
        None,
        "GET",
        "/search",
        lambda q, n, key: {"params": {"q": q, "format": "json"}},
        ("results",),
        "content",
    ),
    "brave": Provider(
        "https://api.search.brave.com",
        "GET",
        "/res/v1/web/search",
        lambda q, n, key: {
            "params": {"q": q, "count": n},
            "headers": {"X-Subscription-Token": key or ""},
        },
        ("web", "results"),
        "description",
        keyed=True,
        marked_up=True,
    ),
    "tavily": Provider(
        "https://api.tavily.com",
        "POST",
        "/search",
        lambda q, n, key: {
            "json": {"query": q, "max_results": n},
            "headers": {"Authorization": f"Bearer {key}"},
        },
        ("results",),
        "content",
        keyed=True,
    ),
}


@attrs.frozen
class WebSearchTool:
    name = "web_search"
    description = "Search the web; answers a JSON list of results: title, url, snippet."
    provider: str
    endpoint: str  # the URL asked
    results: int  # the configured count: the default and the most a call may ask for
    key: str | None = attrs.field(default=None, repr=False)

    @property
    def parameters(self) -> dict[str, Any]:
        return obj(
            ["query"],
            query={"type": "string", "description": "what to search for"},
            count={
                "type": "integer",
                "minimum": 1,
                "maximum": self.results,
                "description": f"how many results (default and most: {self.results})",
            },
        )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        query = need(args, "query")
        if not isinstance(query, str):
            raise ToolError("query must be a string")
        query = query.strip()
        if len(query) > MAX_QUERY:
            raise ToolError(f"query is {len(query)} characters long; at most {MAX_QUERY}")
        count = _count(args.get("count"), self.results)
        body = await self._fetch(query, count)
        found = [_result(item, PROVIDERS[self.provider]) for item in self._items(body)]
        kept = [r for r in found if r is not None][:count]
        ctx.took_in("web_search results")  # titles and snippets: anyone's words
        return capped(json.dumps(kept, ensure_ascii=False), ctx)

    async def _fetch(self, query: str, count: int) -> Any:
        spec = PROVIDERS[self.provider]
        request = spec.ask(query, count, self.key)
        try:
            with trio.fail_after(TIMEOUT):
                async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
                    async with client.stream(spec.method, self.endpoint, **request) as response:
                        raw = await _read(response, self.provider)
                        self._check(response, raw)
        except (trio.TooSlowError, httpx.TimeoutException):
            raise self._error(f"no answer within {TIMEOUT:g} s") from None
        except httpx.HTTPError as exc:
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise self._error(f"cannot be reached: {why}") from None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            raise self._error("answered something that is not JSON") from None

    def _check(self, response: httpx.Response, raw: bytes) -> None:
        status = response.status_code
        if 300 <= status < 400:
            where = response.headers.get("location", "elsewhere")[:200]
            raise self._error(f"answered HTTP {status}, a redirect to {where} (not followed)")
        if status != 200:
            said = " ".join(raw[:ERROR_EXCERPT].decode("utf-8", "replace").split())
            raise self._error(
                f"answered HTTP {status} {response.reason_phrase}".rstrip()
                + (f": {said}" if said else "")
            )

    def _items(self, body: Any) -> list[Any]:
        """The list of results in the answer; a missing key is no results (Brave leaves
        out `web` when it found nothing); anything else of the wrong shape is an error."""
        spec = PROVIDERS[self.provider]
        value = body
        where = ".".join(spec.results_at)
        for key in spec.results_at:
            if not isinstance(value, dict):
                raise self._error(f"answered JSON without {where}")
            value = value.get(key, [] if key == spec.results_at[-1] else {})
        if not isinstance(value, list):
            raise self._error(f"answered {where} that is not a list")
        return value

    def _error(self, problem: str) -> ToolError:
        text = f"web search ({self.provider}) {problem}"
        return ToolError(text.replace(self.key, "[key]") if self.key else text)


def web_search_tool(config: SearchConfig, secrets: Secrets) -> WebSearchTool | None:
    """The tool config asks for; None when no provider is configured (not offered).
    A provider whose key variable is not set is a ConfigError naming it."""
    if config.provider is None:
        return None
    spec = PROVIDERS[config.provider]
    key = secrets.get(config.key_env) if spec.keyed else None
    if spec.keyed and not key:
        raise ConfigError(
            f"{config.key_env} (the API key of web.search's {config.provider}) is not set"
        )
    base = config.url or spec.base or ""  # config refuses searxng without a url
    endpoint = base.rstrip("/") + spec.path
    try:
        scheme = httpx.URL(endpoint).scheme
    except httpx.InvalidURL:
        scheme = ""
    if scheme not in ("http", "https"):
        raise ConfigError(f"web.search.url: {base!r} is not an http(s) URL")
    return WebSearchTool(config.provider, endpoint, config.results, key)


def _count(value: Any, most: int) -> int:
    if value is None:
        return most
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"count must be a whole number from 1 to {most}, got {value!r}")
    return min(value, most)


async def _read(response: httpx.Response, provider: str) -> bytes:
    body = await read_capped(response, MAX_BODY)
    if body is None:
        raise ToolError(f"web search ({provider}) answered more than {MAX_BODY:,} bytes")
    return body


def _result(item: Any, spec: Provider) -> dict[str, str] | None:
    """One result as the model sees it; None when it has no usable URL."""
    if not isinstance(item, dict):
        return None
    url = item.get("url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return None
    if len(url) > URL_CAP:
        return None
    title = _text(item.get("title"), spec.marked_up, TITLE_CAP)
    snippet = _text(item.get(spec.snippet), spec.marked_up, SNIPPET_CAP)
    return {"title": title, "url": url, "snippet": snippet}


_TAG = re.compile(r"<[^<>]{0,40}>")


def _text(value: Any, marked_up: bool, cap: int) -> str:
    if not isinstance(value, str):
        return ""
    if marked_up:
        value = html.unescape(_TAG.sub("", value))
    value = " ".join(value.split())
    return value if len(value) <= cap else value[: cap - 1] + "…"
