"""A fake web site on 127.0.0.1 for web_fetch: pages the test puts at paths (any body,
content type, status and headers), redirects, and a chain of redirects:

    GET /hop/N     N > 0: 302 to /hop/N-1; /hop/0: a text page ("arrived")
    a held path    no answer until the fake stops (a slow page)
    anything else  404, a small text page

Every request's path is recorded in `requests`, in order, so a test can tell what was
(and was not) asked for; the fields of a form sent (a query or a POST body) in `forms`.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from tests.fakes.kit import Fake, observed
from tests.fakes.local_http import Reply, TrackedHandler


class FakePages(Fake):
    name = "web site"

    def __init__(self, host: str = "127.0.0.1") -> None:
        """`host`: another loopback address (127.0.0.2), so a test can allow the site and
        still see 127.0.0.1 refused."""
        super().__init__(host=host)
        self._pages: dict[str, Reply] = {}
        self._requests: list[str] = []
        self._forms: list[tuple[str, dict[str, str]]] = []
        self._held: set[str] = set()

    requests = observed("_requests", "The path of every request, in order.")
    forms = observed("_forms", "(path, fields) of every request that sent form fields.")

    def hold(self, path: str) -> str:
        """Requests of `path` get no answer until the fake stops; its URL."""
        with self._cond:
            self._held.add(path)
        return self.url + path

    def page(
        self,
        path: str,
        body: bytes | str,
        content_type: str,
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> str:
        """Serve `body` at `path`; its URL."""
        data = body.encode() if isinstance(body, str) else body
        reply = Reply(status, data, list((headers or {}).items()), content_type)
        with self._cond:
            self._pages[path] = reply
        return self.url + path

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        """`path` redirects to `location`; its URL."""
        with self._cond:
            self._pages[path] = Reply(status, None, [("location", location)])
        return self.url + path

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        target = urlsplit(request.path)
        path = target.path
        fields = dict(parse_qsl(target.query or raw.decode(errors="replace")))
        with self._cond:
            self._requests.append(path)
            if fields:
                self._forms.append((path, fields))
            self._cond.notify_all()
            while path in self._held and not self._closing:
                self._cond.wait()
            reply = self._pages.get(path)
        if reply is not None:
            return reply
        if path.startswith("/hop/") and path[5:].isdigit():
            left = int(path[5:])
            if left == 0:
                return Reply(200, b"arrived", content_type="text/plain; charset=utf-8")
            return Reply(302, None, [("location", f"/hop/{left - 1}")])
        return Reply(404, b"no such page", content_type="text/plain")

    def _internal_error(self) -> Reply:
        return Reply(500, b"the fake failed", content_type="text/plain")
