"""The operator surfaces over HTTP, against `hermes serve` as a process with its Telegram
adapter on the fake Bot API: health, readiness that follows the platform, metrics
that move, and who may call what."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from hermes.state.maintenance import open_plain
from hermes.state.pairing import request_code
from tests.adapters.serving import in_thread, until_line
from tests.adapters.telegram.serving import TOKEN, TelegramServe
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.ops.surfaces import bearer, ops_url, sample, scrape, until
from tests.processes import wait_ready
from tests.seed import writing

GUARDED_GETS = [
    "/ready", "/metrics", "/", "/login", "/static/dashboard.js", "/api/session", "/api/tree",
    "/api/sessions", "/api/sessions/x", "/api/cron", "/api/outbox", "/api/pairing",
    "/api/approvals", "/api/context",
]  # fmt: skip
GUARDED_POSTS = [
    "/logout",
    "/api/cron/x/run",
    "/api/outbox/1/retry",
    "/api/pairing/telegram/approve",
    "/api/pairing/telegram/1/deny",
    "/api/approvals/abc123/approve",
    "/api/approvals/abc123/deny",
]


class NotYet:
    """Where the fake Bot API will listen: nothing answers there yet. The port stays bound
    (not listening: a connection is refused) until `release`, so no other test's server
    takes it meanwhile."""

    def __init__(self) -> None:
        self.held = socket.socket()
        self.held.bind(("127.0.0.1", 0))
        self.port = self.held.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def release(self) -> int:
        self.held.close()
        return self.port


@pytest.mark.timeout(120)
async def test_ready_follows_the_platform_and_metrics_count_what_happened(home):
    platform = NotYet()
    with FakeOpenAI() as model:
        serve = TelegramServe(home, platform, model)
        serve.configure(ops=True)
        try:
            proc = serve.start()
            async with httpx.AsyncClient(base_url=ops_url(home), timeout=10) as http:
                assert (await http.get("/health")).status_code == 200  # no token needed

                refused = await http.get("/ready", headers=bearer(home))
                assert refused.status_code == 503
                telegram = refused.json()["adapters"]["telegram"]
                assert telegram["state"] in ("connecting", "backing off"), telegram
                assert {"progress_age", "restarts", "reason"} <= telegram.keys()
                assert refused.json()["state_db"] == "open"

                with FakeTelegram(token=TOKEN, port=platform.release()) as tg:
                    await in_thread(tg.wait_polls, 2, 90.0)  # one came back: progress
                    ready = await http.get("/ready", headers=bearer(home))
                    assert ready.status_code == 200, ready.text
                    telegram = ready.json()["adapters"]["telegram"]
                    assert telegram["state"] == "live" and telegram["progress_age"] is not None
                    assert ready.json()["outbox"] == {
                        "depth": 0, "oldest_pending_age": None, "dead": 0, "unknown": 0,
                    }  # fmt: skip

                    before = await scrape(http, home)
                    tg.fail("sendMessage", 429, retry_after=1)
                    tg.message("hello")
                    await in_thread(tg.wait_sent, 1, 30.0)
                    job = (await serve.rpc("cron.add", {"schedule": "every 2h",
                                                        "prompt": "report"}))["result"]  # fmt: skip
                    run = (await serve.rpc("cron.run", {"job": job["id"]}))["result"]["run"]
                    await in_thread(until_line, proc, f"cron {job['id']} run {run}: ok")

                    async def moved() -> dict:
                        now = await scrape(http, home)
                        out = sample(now, "hermes_messages_out_total",
                                     platform="telegram", outcome="sent")  # fmt: skip
                        return now if out > 0 else {}

                    after = await until(moved)
        finally:
            serve.close()

    def grew(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert grew("hermes_messages_in_total", platform="telegram", outcome="admitted") == 1
    assert grew("hermes_messages_out_total", platform="telegram", outcome="rate_limited") == 1
    assert grew("hermes_messages_out_total", platform="telegram", outcome="sent") == 1
    assert grew("hermes_turn_seconds_count", platform="telegram", outcome="ok") == 1
    assert grew("hermes_model_calls_total", provider="fake", outcome="ok") >= 2  # chat, cron
    assert grew("hermes_cron_fires_total", outcome="ok") == 1
    assert sample(after, "process_resident_memory_bytes") > 0
    assert sample(after, "hermes_actor_restarts", actor="serve/adapters/telegram") >= 0
    assert ("hermes_event_loop_lag_seconds", frozenset()) in after


@pytest.mark.timeout(60)
async def test_only_health_answers_without_the_token_and_changes_need_csrf(home, spawn):
    wait_ready(spawn())
    async with httpx.AsyncClient(base_url=ops_url(home), timeout=10) as http:
        assert (await http.get("/health")).json()["status"] == "ok"
        for path in GUARDED_GETS:
            assert (await http.get(path)).status_code == 401, path
            assert (
                await http.get(path, headers={"Authorization": "Bearer wrong"})
            ).status_code == 401
        for path in GUARDED_POSTS:
            assert (await http.post(path)).status_code == 401, path
        assert "Serve token" in (await http.get("/")).text  # the login form, with its 401

        # A bearer request may read, but a change needs the CSRF token too.
        assert (await http.get("/api/tree", headers=bearer(home))).status_code == 200
        assert (await http.post("/api/outbox/1/retry", headers=bearer(home))).status_code == 403

        odd = await http.get("/api/tree", headers={"Cookie": "hermes_session=a.%E9"})
        assert odd.status_code == 401
        huge = await http.post("/login", content=b"token=" + b"x" * 10_000)
        assert huge.status_code == 413
        wrong = await http.post("/login", data={"token": "nope"})
        assert wrong.status_code == 401 and "hermes_session" not in wrong.cookies
        login = await http.post("/login", data={"token": home.serve_token.read_text().strip()})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert home.serve_token.read_text().strip() not in login.headers["set-cookie"]

        # The cookie opens the dashboard; a POST without the CSRF header is refused.
        page = await http.get("/")
        assert page.status_code == 200
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert (await http.post("/api/outbox/1/retry")).status_code == 403
        assert (
            await http.post("/api/outbox/1/retry", headers={"X-CSRF-Token": "0" * 64})
        ).status_code == 403
        csrf = (await http.get("/api/session")).json()["csrf"]
        missing = await http.post("/api/outbox/1/retry", headers={"X-CSRF-Token": csrf})
        assert missing.status_code == 404 and "no dead or unknown outbox row 1" in missing.text


def ask_pairing(home, user: str) -> str:
    with writing(home.state_db) as conn:
        return request_code(conn, "telegram", user, "Zed", time.time(), chat_id=user).code


@pytest.mark.timeout(60)
async def test_the_dashboard_approves_pairing_by_code_only(home, spawn):
    """A stranger picks their own display name: the dashboard lists the code's hint and
    approves by the code the user was sent, with the CLI's lockout, never by a name."""
    wait_ready(spawn())
    code, other = ask_pairing(home, "4242"), ask_pairing(home, "777")
    async with httpx.AsyncClient(base_url=ops_url(home), headers=bearer(home)) as http:
        http.headers["X-CSRF-Token"] = (await http.get("/api/session")).json()["csrf"]
        listed = (await http.get("/api/pairing")).json()["pending"]
        assert [(p["user_id"], p["code_hint"]) for p in listed] == [
            ("4242", code[:2]), ("777", other[:2]),
        ]  # fmt: skip
        assert code not in str(listed) and other not in str(listed)

        by_user = await http.post("/api/pairing/telegram/4242/approve")
        assert by_user.status_code in (404, 405)  # no route approves by who asked
        assert (await http.post("/api/pairing/telegram/approve")).status_code == 400
        huge = await http.post("/api/pairing/telegram/approve", json={"code": "A" * 500})
        assert huge.status_code == 413
        wrong = await http.post("/api/pairing/telegram/approve", json={"code": "WRONGCDE"})
        assert wrong.status_code == 404 and "no pending request with that code" in wrong.text
        right = await http.post("/api/pairing/telegram/approve", json={"code": code.lower()})
        assert right.status_code == 200 and right.json()["user_id"] == "4242", right.text

        for _ in range(4):  # with the one above, five wrong codes lock approvals ...
            await http.post("/api/pairing/telegram/approve", json={"code": "WRONGCDE"})
        locked = await http.post("/api/pairing/telegram/approve", json={"code": other})
        assert locked.status_code == 429 and "locked until" in locked.text  # ... valid too
    conn = open_plain(home.state_db)
    try:
        rows = conn.execute("SELECT user_id, approved_by FROM pairing_approved").fetchall()
        assert rows == [("4242", "dashboard")]
    finally:
        conn.close()
