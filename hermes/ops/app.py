"""The operator's HTTP app (Starlette, served by hypercorn under Trio).

/health answers anyone; everything else needs the serve token (a bearer header
or the login cookie), and a POST that changes state needs its CSRF token too.
The dashboard's JSON routes call the same functions as the CLI commands that do
the same thing (`hermes sessions`, `cron`, `outbox`, `pairing`).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

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

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.actors.supervisor import Supervisor
from hermes.cron.scheduler import JobsChanged, RunNow
from hermes.cron.store import JobError, list_jobs, resolve_job, run_history, set_paused
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import OutboxRow, listing, retry_row
from hermes.gateway.pairing import (
    PairingLocked,
    PairingRefused,
    approved,
    attempt_approval,
    deny_request,
    pending,
)
from hermes.ops.auth import BEARER, COOKIE, COOKIE_SECONDS, Gate
from hermes.ops.metrics import CONTENT_TYPE, exposition
from hermes.ops.readiness import readiness
from hermes.ops.watchdog import LoopWatch
from hermes.state.db import Db
from hermes.state.errors import SearchQueryError, StateError
from hermes.state.messages import messages_of
from hermes.state.search import search_messages
from hermes.state.sessions import get_session, list_sessions

STATIC = Path(__file__).with_name("static")
OPEN_PATHS = {"/health", "/login"}  # the login form takes the token itself
MAX_LIMIT = 200
MAX_LOGIN_BODY = 4096
MAX_CODE_BODY = 256  # {"code": "..."}: a pairing code, not more
TRANSCRIPT_LIMIT = 1000  # messages shown of one session (a CLI export has them all)
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


class Refused(Exception):
    """A request that cannot be done as asked: answered with `status` and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@attrs.frozen
class OpsView:
    """What the routes read: the tree, state.db, the loop's lag, the token's gate."""

    root: Callable[[], Supervisor]
    db: Db
    loop: LoopWatch
    gate: Gate
    tz: ZoneInfo

    def address(self, name: str) -> Address | None:
        return self.root().find(name, Address)


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


def _outbox_row(row: OutboxRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "to": str(row.target),
        "kind": row.kind,
        "state": row.state,
        "attempts": row.attempts,
        "created_at": row.created_at,
        "not_before": row.not_before,
        "error": row.last_error,
        "text": row.text if len(row.text) <= 300 else row.text[:297] + "...",
    }


async def _code_of(request: Request) -> str:
    """The pairing code the owner typed, from a small JSON body (never the URL: a path
    or a query string can end up in a log)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_CODE_BODY:
            raise Refused(413, "a pairing approval is a code, not more")
    try:
        code = json.loads(body or b"{}").get("code")
    except (ValueError, AttributeError):
        code = None
    if not isinstance(code, str) or not code.strip():
        raise Refused(400, 'approving needs the code the user was sent: {"code": "..."}')
    return code


def build_app(s: OpsView) -> Starlette:
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "loop_lag": round(s.loop.lag, 3)})

    async def ready(request: Request) -> Response:
        result = await readiness(s.root().snapshot(), s.db)
        return JSONResponse(result.body, 200 if result.ready else 503)

    async def metrics(request: Request) -> Response:
        text = await exposition(s.root().snapshot(), s.db, s.loop.take_peak())
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
        response.set_cookie(COOKIE, s.gate.new_cookie(), max_age=COOKIE_SECONDS, httponly=True,
                            samesite="strict")  # fmt: skip
        return response

    async def logout(request: Request) -> Response:
        response = JSONResponse({"ok": True})
        response.delete_cookie(COOKIE, httponly=True, samesite="strict")
        return response

    async def session(request: Request) -> Response:
        nonce = request.state.nonce
        return JSONResponse({"csrf": s.gate.csrf(nonce), "cookie": nonce != BEARER})

    async def tree(request: Request) -> Response:
        return JSONResponse({"tree": s.root().snapshot().to_dict(), "loop_lag": s.loop.lag})

    async def sessions(request: Request) -> Response:
        query, limit = request.query_params.get("q", "").strip(), _limit(request)
        if query:
            hits = await s.db.read(search_messages, query, limit)
            return JSONResponse([attrs.asdict(h) for h in hits])
        rows = await s.db.read(list_sessions, limit, request.query_params.get("source"))
        return JSONResponse([r.to_dict() for r in rows])

    async def transcript(request: Request) -> Response:
        session_id = request.path_params["id"]
        found = await s.db.read(get_session, session_id)
        if found is None:
            raise Refused(404, f"no session {session_id!r}")
        messages = await s.db.read(messages_of, session_id, TRANSCRIPT_LIMIT)
        return JSONResponse(
            {"session": found.to_dict(), "messages": [m.to_dict() for m in messages]}
        )

    async def cron(request: Request) -> Response:
        jobs = await s.db.read(list_jobs, True)
        return JSONResponse([j.to_dict() for j in jobs])

    async def cron_runs(request: Request) -> Response:
        job = await s.db.read(resolve_job, request.path_params["id"])
        runs = await s.db.read(run_history, job.id, _limit(request, 20))
        return JSONResponse([attrs.asdict(r) for r in runs])

    async def cron_action(request: Request) -> Response:
        ref, action = request.path_params["id"], request.path_params["action"]
        scheduler = s.address("scheduler")
        if scheduler is None:
            raise Refused(503, "the scheduler is not running (restarting, or stopping)")
        if action == "run":
            job_id, fence = await scheduler.call(RunNow(ref))
            return JSONResponse({"job": job_id, "run": fence})
        if action not in ("pause", "resume"):
            raise Refused(404, f"no cron action {action!r} (run, pause, resume)")
        job = await s.db.read(resolve_job, ref)
        job = await s.db.write(set_paused, job.id, action == "pause", time.time(), s.tz)
        await scheduler.cast(JobsChanged())
        return JSONResponse(job.to_dict())

    async def outbox(request: Request) -> Response:
        dead = request.query_params.get("dead") == "1"
        rows = await s.db.read(listing, dead, _limit(request, MAX_LIMIT))
        return JSONResponse([_outbox_row(r) for r in rows])

    async def outbox_retry(request: Request) -> Response:
        row_id = request.path_params["id"]
        if not await s.db.write(retry_row, row_id, time.time()):
            raise Refused(404, f"no dead or unknown outbox row {row_id}")
        nudge(s.address("outbox"))
        return JSONResponse({"id": row_id, "state": "pending"})

    async def pairing(request: Request) -> Response:
        waiting = await s.db.read(pending, time.time())
        allowed = await s.db.read(approved)
        return JSONResponse(
            {
                "pending": [attrs.asdict(r) for r in waiting],
                "approved": [attrs.asdict(a) for a in allowed],
            }
        )

    async def pairing_approve(request: Request) -> Response:
        """By the code the user was sent, as `hermes pairing approve` does, with its
        lockout: a stranger picks their own display name, so a name proves nothing."""
        platform, code = request.path_params["platform"], await _code_of(request)
        result = await s.db.write(attempt_approval, platform, code, time.time(), "dashboard")
        if isinstance(result, PairingLocked):
            raise Refused(429, str(result))
        if isinstance(result, PairingRefused):
            raise Refused(404, str(result))
        return JSONResponse(attrs.asdict(result))

    async def pairing_deny(request: Request) -> Response:
        platform, user = request.path_params["platform"], request.path_params["user"]
        if not await s.db.write(deny_request, platform, user):
            raise Refused(404, f"no pending request from {platform} user {user}")
        return JSONResponse({"denied": user})

    routes = [
        Route("/health", health),
        Route("/ready", ready),
        Route("/metrics", metrics),
        Route("/", index),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/session", session),
        Route("/api/tree", tree),
        Route("/api/sessions", sessions),
        Route("/api/sessions/{id}", transcript),
        Route("/api/cron", cron),
        Route("/api/cron/{id}/runs", cron_runs),
        Route("/api/cron/{id}/{action}", cron_action, methods=["POST"]),
        Route("/api/outbox", outbox),
        Route("/api/outbox/{id:int}/retry", outbox_retry, methods=["POST"]),
        Route("/api/pairing", pairing),
        Route("/api/pairing/{platform}/approve", pairing_approve, methods=["POST"]),
        Route("/api/pairing/{platform}/{user}/deny", pairing_deny, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    app = Starlette(routes=routes, exception_handlers=_ERRORS)
    app.add_middleware(Guard, gate=s.gate)
    return app


def _answer(status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handler(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, getattr(exc, "status", status))

    return handler


_ERRORS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    Refused: _answer(400),
    JobError: _answer(404),
    SearchQueryError: _answer(400),
    StateError: _answer(503),
    ActorStopped: _answer(503),
}
