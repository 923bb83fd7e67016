"""A fake search provider on 127.0.0.1: a real HTTP server speaking SearXNG's JSON API,
and Brave's and Tavily's search APIs too (the same results in each one's shape), for
the tests of web_search.

    GET  /search?q=...&format=json       SearXNG: {"query", "number_of_results",
                                         "results": [{"title", "url", "content",
                                         "engine"}]}; without format=json, an HTML page
    GET  /res/v1/web/search?q=...&count=N
                                         Brave: {"type": "search", "query": {...},
                                         "web": {"type": "search", "results": [{"title",
                                         "url", "description"}]}} (no `web` when nothing
                                         was found); header X-Subscription-Token must be
                                         `brave_key`, else 422 SUBSCRIPTION_TOKEN_INVALID
    POST /search {"query", "max_results"} Tavily: {"query", "answer": null, "results":
                                         [{"title", "url", "content", "score"}],
                                         "response_time"}; header `Authorization: Bearer
                                         <tavily_key>`, else 401

Every search is recorded in `queries` (provider, query, count asked, the key it carried
and all its headers), refused ones included. The test sets the results (`set_results`:
title, url, content each; Brave's description is the content), injects failures
(`fail(status, body, headers)`: the next search answers that, whatever its provider) and makes
a search hang (`hang()`: held with no answer until the fake stops; `held` counts them).
`wait_queries(n)` and `wait_held(n)` block on the fake's condition, no sleeping.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.kit import Fake, observed
from tests.fakes.local_http import (
    Reply,
    TrackedHandler,
    bearer,
    copy_json,
    decode_body,
    match,
    routes,
)

_HANG = "hang"  # a fault: hold the search without an answer


class FakeSearch(Fake):
    """SearXNG, Brave and Tavily's search APIs on one port (the route names the provider)."""

    name = "search provider"
    _ROUTES = routes(
        ("GET", "/search", "searxng"),
        ("GET", "/res/v1/web/search", "brave"),
        ("POST", "/search", "tavily"),
    )
    _CONTROLS = frozenset({"set_results", "fail"})
    _STATE = ("queries",)

    def __init__(self, brave_key: str = "brave-key", tavily_key: str = "tavily-key") -> None:
        super().__init__()
        self.brave_key = brave_key
        self.tavily_key = tavily_key
        self._results: list[dict[str, Any]] = []
        self._queries: list[dict[str, Any]] = []
        self._held = 0

    queries = observed("_queries", "Each search received: provider, query, count, key, headers.")
    held = observed("_held", "Searches held by `hang()` so far.")

    # -- controls -------------------------------------------------------------------------

    def set_results(self, results: list[dict[str, Any]]) -> None:
        """What every search finds: records of title, url and content."""
        self._change(_results=copy_json(results))

    def fail(
        self,
        status: int,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int | None = 1,
    ) -> None:
        """The next `times` searches (None: all) answer `status` with `body` (JSON, or
        bytes as they are; None: a JSON error object) and `headers`."""
        answer = body if body is not None else {"error": f"injected {status}"}
        reply = Reply(status, answer, list((headers or {}).items()))
        with self._cond:
            self._faults.add(reply, times=times)

    def hang(self, times: int | None = 1) -> None:
        """The next `times` searches get no answer until the fake stops."""
        with self._cond:
            self._faults.add(_HANG, times=times)

    def wait_queries(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_queries", count, timeout, f"{count} search(es)")

    def wait_held(self, count: int = 1, timeout: float = 10.0) -> None:
        self._wait(lambda: self._held >= count, timeout, f"{count} held search(es)")

    # -- the protocol -------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return Reply(500, {"error": "fake internal error"})

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        parts = urlsplit(request.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        headers = {k.lower(): v for k, v in request.headers.items()}
        found = match(self._ROUTES, request.command, parts.path.rstrip("/"))
        if isinstance(found, int):
            return Reply(404, {"error": f"no route {request.command} {parts.path}"})
        provider, query, count, key = found[0], params.get("q", ""), None, None
        if provider == "brave":
            key, count = headers.get("x-subscription-token"), _int(params.get("count"), 20)
        elif provider == "tavily":
            body = decode_body("application/json", raw)
            key = bearer(request.headers)
            query, count = body.get("query", ""), body.get("max_results", 5)
        with self._cond:
            record = {"provider": provider, "query": query, "count": count, "key": key,
                      "headers": headers, "params": params}  # fmt: skip
            self._queries.append(record)
            self._cond.notify_all()
            fault = self._faults.take()
            if fault == _HANG:
                self._held += 1
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._closing)
                return None
            results = copy_json(self._results)
        if fault is not None:
            return fault
        return getattr(self, f"_{provider}")(query, count, key, params, results)

    def _searxng(self, query: str, count: Any, key: Any, params: dict, results: list) -> Reply:
        if params.get("format") != "json":
            return Reply(200, b"<!DOCTYPE html><html><body>results</body></html>",
                         content_type="text/html; charset=utf-8")  # fmt: skip
        found = [_shaped(r, "content", engine="fake", score=1.0) for r in results]
        return Reply(200, {"query": query, "number_of_results": len(found), "results": found})

    def _brave(self, query: str, count: int, key: Any, params: dict, results: list) -> Reply:
        if key != self.brave_key:
            return Reply(422, {"type": "ErrorResponse", "error": {
                "code": "SUBSCRIPTION_TOKEN_INVALID", "status": 422,
                "detail": "The provided subscription token is invalid."}})  # fmt: skip
        body: dict[str, Any] = {"type": "search", "query": {"original": query}}
        found = [_shaped(r, "description", type="search_result") for r in results[:count]]
        if found:
            body["web"] = {"type": "search", "results": found}
        return Reply(200, body)

    def _tavily(self, query: str, count: Any, key: Any, params: dict, results: list) -> Reply:
        if key != self.tavily_key:
            return Reply(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
        found = [_shaped(r, "content", score=0.9, raw_content=None)
                 for r in results[: _int(count, 5)]]  # fmt: skip
        return Reply(200, {"query": query, "answer": None, "images": [], "results": found,
                           "response_time": 0.01})  # fmt: skip


def _shaped(result: Any, snippet: str, **extra: Any) -> Any:
    """A result set by the test in a provider's shape (its content under `snippet`);
    anything but a record is served as it is (an untrusted provider's junk)."""
    if not isinstance(result, dict):
        return result
    shaped = {k: v for k, v in result.items() if k != "content"}
    if "content" in result:
        shaped[snippet] = result["content"]
    return {**shaped, **extra}


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
