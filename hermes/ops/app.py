"""The operator's HTTP app (Starlette, served by hypercorn under Trio).

/health answers anyone; everything else needs the serve token (a bearer header
or the login cookie), and a POST that changes state needs its CSRF token too.
The dashboard's JSON routes only parse the request and answer the result of the
operator action (hermes.operations) the CLI and JSON-RPC run for the same thing;
an action's error is answered by its family (`http_status`).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from hermes.actors.errors import HermesError, Invalid, NotFound, Throttled, Unavailable
from hermes.actors.snapshot import Snapshot
from hermes.gateway.services import Services
from hermes.gateway.settings import Config
from hermes.operations.context import Live, Ops
from hermes.operations.wire import error_to_json, operation, parse_args, result_to_json
from hermes.ops.auth import BEARER, COOKIE, COOKIE_SECONDS, Gate
from hermes.ops.metrics import CONTENT_TYPE, exposition
from hermes.ops.readiness import readiness
from hermes.ops.watchdog import LoopWatch
from hermes.state.db import Db

STATIC = Path(__file__).with_name("static")
CRON_ACTIONS = ("run", "pause", "resume")
OPEN_PATHS = {"/health", "/login"}  # the login form takes the token itself
MAX_LIMIT = 200
MAX_LOGIN_BODY = 4096
MAX_CODE_BODY = 256  # {"code": "...", "owner": true}: a pairing code, not more
# The page loads only its own files; nothing frames it; no browser guesses a type.
HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:;"
        b" frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),  # transcripts stay out of the browser's disk cache
]


class Refused(Invalid):
    """A request the HTTP surface itself cannot take (too big, malformed): answered with
    `status` and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@attrs.frozen
class OpsView:
    """What the routes use: the operator actions' context, the tree, the loop's lag, the
    token's gate."""

    services: Services
    live: Live
    db: Db
    loop: LoopWatch
    gate: Gate
    config: Config

    def ops(self) -> Ops:
        return Ops(self.db, self.services.clock, self.config, self.live, "dashboard")

    def tree(self) -> Snapshot:
        return self.services.root.get().snapshot()

    async def act(self, name: str, params: dict[str, Any]) -> Response:
        """Run an operator action and answer its result as JSON (errors: `_ERRORS`)."""
        op = operation(name)
        result = await op.run(self.ops(), parse_args(op, params))
        return JSONResponse(result_to_json(result))


def login_page(status: int, note: str = "") -> HTMLResponse:
    html = (STATIC / "login.html").read_text(encoding="utf-8")
    return HTMLResponse(html.replace("<!--note-->", note), status_code=status)


class Guard:
    """ASGI middleware: the token (or cookie) for every route but OPEN_PATHS, and the
    CSRF header for every POST of a logged-in session."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no WebSocket here
            await send({"type": "websocket.close", "code": 1008})
            return

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self._guarded(scope, receive, with_headers)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        nonce = self.gate.nonce_of(request.headers, request.cookies)
        if nonce is None:
            if scope["path"] == "/" and request.method == "GET":
                response: Response = login_page(401)
            else:
                response = JSONResponse({"error": "the serve token is required"}, 401)
            await response(scope, receive, send)
            return
        if request.method == "POST" and not self.gate.csrf_ok(request.headers, nonce):
            response = JSONResponse({"error": "missing or wrong CSRF token"}, 403)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["nonce"] = nonce
        await self.app(scope, receive, send)


def _limit(request: Request, default: int = 50) -> int:
    raw = request.query_params.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise Refused(400, f"limit: a number from 1 to {MAX_LIMIT}, got {raw!r}")
    return int(raw)


async def _approval_of(request: Request) -> dict[str, Any]:
    """The pairing code the owner typed, and whether as an owner, from a small JSON body
    (never the URL: a path or a query string can end up in a log)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_CODE_BODY:
            raise Refused(413, "a pairing approval is a code, not more")
    try:
        data = json.loads(body or b"{}")
        code, owner = data.get("code"), data.get("owner", False)
    except (ValueError, AttributeError):
        code, owner = None, False
    if not isinstance(code, str) or not code.strip():
        raise Refused(400, 'approving needs the code the user was sent: {"code": "..."}')
    return {"code": code, "owner": owner}  # owner: checked strictly by the action


def build_app(s: OpsView) -> Starlette:
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "loop_lag": round(s.loop.lag, 3)})

    async def ready(request: Request) -> Response:
        result = await readiness(s.tree(), s.db, s.services.clock.now())
        return JSONResponse(result.body, 200 if result.ready else 503)

    async def metrics(request: Request) -> Response:
        text = await exposition(s.tree(), s.db, s.loop.take_peak(), s.services.clock.now())
        return Response(text, media_type=CONTENT_TYPE)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    async def login(request: Request) -> Response:
        if request.method == "GET":
            nonce = s.gate.nonce_of(request.headers, request.cookies)
            return RedirectResponse("/", 303) if nonce else login_page(401)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_LOGIN_BODY:
                raise Refused(413, "a login form is a token, not more")
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        if not s.gate.token_ok(form.get("token", [""])[0].strip()):
            return login_page(401, '<p class="error">That is not the serve token.</p>')
        response = RedirectResponse("/", 303)
        response.set_cookie(
            COOKIE, s.gate.new_cookie(), max_age=COOKIE_SECONDS, httponly=True, samesite="strict"
        )
        return response

    async def logout(request: Request) -> Response:
        response = JSONResponse({"ok": True})
        response.delete_cookie(COOKIE, httponly=True, samesite="strict")
        return response

    async def session(request: Request) -> Response:
        nonce = request.state.nonce
        return JSONResponse({"csrf": s.gate.csrf(nonce), "cookie": nonce != BEARER})

    async def tree(request: Request) -> Response:
        return JSONResponse({"tree": s.tree().to_dict(), "loop_lag": s.loop.lag})

    async def context(request: Request) -> Response:
        return await s.act("context.findings", {})

    async def sessions(request: Request) -> Response:
        query, limit = request.query_params.get("q", "").strip(), _limit(request)
        if query:
            return await s.act("sessions.search", {"query": query, "limit": limit})
        source = request.query_params.get("source")
        return await s.act("sessions.list", {"limit": limit, "source": source})

    async def transcript(request: Request) -> Response:
        return await s.act("sessions.show", {"id": request.path_params["id"]})

    async def cron(request: Request) -> Response:
        return await s.act("cron.list", {"all": True})

    async def cron_runs(request: Request) -> Response:
        job, limit = request.path_params["id"], _limit(request, 20)
        return await s.act("cron.history", {"job": job, "limit": limit})

    async def cron_action(request: Request) -> Response:
        ref, action = request.path_params["id"], request.path_params["action"]
        if action not in CRON_ACTIONS:
            raise Refused(404, f"no cron action {action!r} ({', '.join(CRON_ACTIONS)})")
        return await s.act(f"cron.{action}", {"job": ref})

    async def outbox(request: Request) -> Response:
        dead = request.query_params.get("dead") == "1"
        return await s.act("outbox.list", {"dead": dead, "limit": _limit(request, MAX_LIMIT)})

    async def outbox_retry(request: Request) -> Response:
        return await s.act("outbox.retry", {"id": request.path_params["id"]})

    async def pairing(request: Request) -> Response:
        return await s.act("pairing.list", {})

    async def pairing_approve(request: Request) -> Response:
        """By the code the user was sent, as `hermes pairing approve` does, with its
        lockout: a stranger picks their own display name, so a name proves nothing."""
        platform = request.path_params["platform"]
        return await s.act("pairing.approve", {"platform": platform, **await _approval_of(request)})

    async def pairing_deny(request: Request) -> Response:
        platform, user = request.path_params["platform"], request.path_params["user"]
        return await s.act("pairing.deny", {"platform": platform, "user": user})

    async def approvals(request: Request) -> Response:
        return await s.act("approvals.list", {"all": request.query_params.get("all") == "1"})

    async def approval_decide(request: Request) -> Response:
        """The same action as a button in the chat, `/approve`, or `hermes approvals`."""
        request_id, action = request.path_params["id"], request.path_params["action"]
        if action == "deny":
            return await s.act("approvals.deny", {"id": request_id})
        if action not in ("approve", "always"):
            raise Refused(404, f"no approval action {action!r} (approve, always, deny)")
        return await s.act("approvals.approve", {"id": request_id, "always": action == "always"})

    routes = [
        Route("/health", health),
        Route("/ready", ready),
        Route("/metrics", metrics),
        Route("/", index),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/session", session),
        Route("/api/tree", tree),
        Route("/api/context", context),
        Route("/api/sessions", sessions),
        Route("/api/sessions/{id}", transcript),
        Route("/api/cron", cron),
        Route("/api/cron/{id}/runs", cron_runs),
        Route("/api/cron/{id}/{action}", cron_action, methods=["POST"]),
        Route("/api/outbox", outbox),
        Route("/api/outbox/{id:int}/retry", outbox_retry, methods=["POST"]),
        Route("/api/approvals", approvals),
        Route("/api/approvals/{id}/{action}", approval_decide, methods=["POST"]),
        Route("/api/pairing", pairing),
        Route("/api/pairing/{platform}/approve", pairing_approve, methods=["POST"]),
        Route("/api/pairing/{platform}/{user}/deny", pairing_deny, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    app = Starlette(routes=routes, exception_handlers=_ERRORS)
    app.add_middleware(Guard, gate=s.gate)
    return app


def http_status(exc: HermesError) -> int:
    """An operator action's error as HTTP answers it, by its family."""
    if isinstance(exc, Refused):
        return exc.status
    for family, status in ((NotFound, 404), (Invalid, 400), (Throttled, 429), (Unavailable, 503)):
        if isinstance(exc, family):
            return status
    return 500


async def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HermesError)
    return JSONResponse({"error": str(exc), **error_to_json(exc)}, http_status(exc))


_ERRORS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {HermesError: _error}
