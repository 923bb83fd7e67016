"""The fake chat platform and its adapter, without a gateway: the adapter runs under a
Supervisor with a TRANSIENT spec and an `admit` the test controls.

Real sockets, so the real clock; every wait is on an event (the fake's wait_* in a
thread, or a status the adapter reached), never a sleep.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import pytest
import trio

from hermes.actors.address import Address
from hermes.actors.backoff import Backoff
from hermes.actors.reply import Reply
from hermes.actors.supervisor import ChildSpec, Restart, Supervisor
from hermes.adapters.base import BACKING_OFF, CONNECTING, FATAL, LIVE, AdapterSetup, AdapterStatus
from hermes.adapters.contract import (
    ChatType,
    InboundEvent,
    Permanent,
    RetryAfter,
    Send,
    SendRequest,
    Sent,
    Target,
)
from hermes.config import PlatformConfig, Secrets
from tests.adapters.testplatform import REFUSED, FakePlatformAdapter
from tests.fakes.chat_platform import FakeChatPlatform
from tests.fakes.openai import closed_port_url

TOKEN = "t0k"


class WatchedStatus(AdapterStatus):
    """An AdapterStatus that remembers every state it went through and wakes waiters."""

    def __init__(self) -> None:
        object.__setattr__(self, "history", [])
        object.__setattr__(self, "_changed", trio.Event())
        super().__init__()

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "state":
            self.history.append(value)
            self._changed.set()
            object.__setattr__(self, "_changed", trio.Event())

    async def reach(self, state: str, *, since: int = 0, timeout: float = 5.0) -> int:
        """Until `state` appears in the history at or after index `since`; returns the
        index just past it."""
        with trio.fail_after(timeout):
            while True:
                for i in range(since, len(self.history)):
                    if self.history[i] == state:
                        return i + 1
                await self._changed.wait()


class QuickAdapter(FakePlatformAdapter):
    """Short deadlines for tests; `ended` is set when an incarnation's run returns."""

    progress_deadline = 1.0
    poll_timeout = 0.2

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.ended = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await super().run(task_status=task_status)
        finally:
            self.ended.set()


@attrs.define
class Running:
    supervisor: Supervisor
    status: WatchedStatus
    incarnations: list[QuickAdapter]

    @property
    def restarts(self) -> int:
        return self.supervisor.snapshot().children[0].restarts

    @property
    def address(self) -> Address:
        return self.supervisor.handle_of("testplatform", Address)

    async def send(self, request: SendRequest) -> Any:
        reply = Reply()
        with trio.fail_after(5):
            await self.address.cast(Send(request, reply))
            return await reply.wait()


def make_config(url: str) -> tuple[PlatformConfig, Secrets]:
    config = PlatformConfig(token_env="TESTPLATFORM_TOKEN", base_url=url)
    return config, Secrets({"TESTPLATFORM_TOKEN": TOKEN}, frozenset())


@asynccontextmanager
async def running(url: str, admit: Callable[[InboundEvent], Any]) -> AsyncIterator[Running]:
    """The adapter under a supervisor, as the gateway tree runs it."""
    config, secrets = make_config(url)
    status = WatchedStatus()
    incarnations: list[QuickAdapter] = []

    def make() -> QuickAdapter:
        incarnations.append(
            QuickAdapter(AdapterSetup("testplatform", config, secrets, status, admit))
        )
        return incarnations[-1]

    spec = ChildSpec("testplatform", make, restart=Restart.TRANSIENT, shutdown=2.0)
    supervisor = Supervisor(
        "platforms", [spec], max_restarts=20, period=10.0, backoff=Backoff(0.05, 0.2)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield Running(supervisor, status, incarnations)
        supervisor.drain(trio.current_time() + 3)


class Admissions:
    """An admit that records events; `gate` (when gated) holds each admission until set;
    `fail_first` makes the first admission raise (the journal could not take it)."""

    def __init__(self, gated: bool = False, fail_first: bool = False) -> None:
        self.events: list[InboundEvent] = []
        self.fail_first = fail_first
        self.gate = trio.Event()
        if not gated:
            self.gate.set()
        self._arrived = trio.Event()

    async def __call__(self, event: InboundEvent) -> bool:
        self.events.append(event)
        self._arrived.set()
        self._arrived = trio.Event()
        if self.fail_first:
            self.fail_first = False
            raise RuntimeError("journal unavailable")
        await self.gate.wait()
        return True

    async def wait_for(self, event_id: int, timeout: float = 5.0) -> InboundEvent:
        with trio.fail_after(timeout):
            while True:
                for event in self.events:
                    if event.event_id == f"e{event_id}":
                        return event
                await self._arrived.wait()


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return await trio.to_thread.run_sync(fn, *args)


def request(key: str = "k1", text: str = "hi") -> SendRequest:
    return SendRequest(Target("testplatform", "c1", "t1"), text, key, reply_to="in1")


# -- the fake alone -------------------------------------------------------------


async def test_fake_long_poll_answers_on_inject_and_acknowledges_by_offset():
    with FakeChatPlatform(token=TOKEN) as platform:
        async with httpx.AsyncClient(base_url=f"{platform.url}/bot{TOKEN}") as client:
            assert (await client.get("/me")).json() == {
                "ok": True,
                "id": "bot-1",
                "name": "testbot",
            }
            bad = await client.get(f"{platform.url}/botnope/me")
            assert (bad.status_code, bad.json()) == (401, {"ok": False, "error": "unauthorized"})

            answers: list[httpx.Response] = []

            async def poll(offset: int, timeout: float = 0) -> None:
                params = {"offset": offset, "timeout": timeout}
                answers.append(await client.get("/updates", params=params))

            started = time.monotonic()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll, 0, 4)
                await in_thread(platform.wait_polls, 1)
                first = platform.inject("hello", chat_type="group", mentioned=True)
            assert time.monotonic() - started < 3  # answered on inject, not at the timeout
            [update] = answers[0].json()["updates"]
            assert update == {
                "update_id": first, "chat_type": "group", "chat_id": "c1", "user_id": "u1",
                "user_name": "Ann", "text": "hello", "thread_id": None, "is_bot": False,
                "mentioned": True, "message_id": f"in{first}", "event_id": f"e{first}",
            }  # fmt: skip
            assert platform.acked == 0

            second = platform.inject("again")
            await poll(first)  # acknowledges nothing below `first`: both are still there
            assert [u["update_id"] for u in answers[1].json()["updates"]] == [first, second]
            await poll(second + 1)
            assert platform.acked == second and platform.pending == []
            assert answers[2].json() == {"ok": True, "updates": []}


async def test_fake_new_poller_makes_the_waiting_one_answer_409():
    with FakeChatPlatform(token=TOKEN) as platform:
        async with httpx.AsyncClient(base_url=f"{platform.url}/bot{TOKEN}") as client:
            answers: dict[str, httpx.Response] = {}

            async def poll(who: str, timeout: float) -> None:
                params = {"offset": 0, "timeout": timeout}
                answers[who] = await client.get("/updates", params=params)

            started = time.monotonic()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll, "first", 30)
                await in_thread(platform.wait_polls, 1)
                nursery.start_soon(poll, "second", 0.1)
            assert time.monotonic() - started < 5
            assert answers["first"].status_code == 409
            assert answers["first"].json() == {"ok": False, "error": "conflict: another poller"}
            assert answers["second"].json() == {"ok": True, "updates": []}
            assert platform.polls == 2


async def test_fake_send_faults_and_revocation():
    with FakeChatPlatform(token=TOKEN) as platform:
        async with httpx.AsyncClient(base_url=f"{platform.url}/bot{TOKEN}") as client:
            body = {"chat_id": "c1", "thread_id": None, "text": "a", "reply_to": None,
                    "idempotency_key": "k"}  # fmt: skip
            platform.fail_sends(429, retry_after=3, times=2)
            for _ in range(2):
                answer = await client.post("/send", json=body)
                assert answer.status_code == 429
                assert answer.json() == {
                    "ok": False,
                    "error": "injected fault 429",
                    "retry_after": 3,
                }
            assert platform.sent == []
            answer = await client.post("/send", json=body)
            assert answer.json() == {"ok": True, "message_id": "m1"}
            assert await in_thread(platform.wait_sent, 1) == [body]
            with pytest.raises(TimeoutError):
                await in_thread(platform.wait_sent, 2, 0.05)

            platform.revoke_token()
            for call in (client.get("/me"), client.post("/send", json=body)):
                assert (await call).status_code == 401


async def test_fake_closes_without_waiting_for_stalled_or_waiting_polls():
    platform = FakeChatPlatform(token=TOKEN).__enter__()
    try:
        platform.stall()
        async with httpx.AsyncClient(base_url=f"{platform.url}/bot{TOKEN}") as client:
            answers: list[Any] = []

            async def poll() -> None:
                try:
                    answers.append(
                        (await client.get("/updates", params={"timeout": 30})).status_code
                    )
                except httpx.TransportError as exc:
                    answers.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                await in_thread(platform.wait_polls, 1)
                started = time.monotonic()
                with trio.fail_after(5):
                    await trio.to_thread.run_sync(platform.close, abandon_on_cancel=True)
            assert time.monotonic() - started < 2
            assert answers and (answers[0] == 503 or isinstance(answers[0], Exception))
    finally:
        platform.close()


def test_fake_runs_in_its_own_process():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.chat_platform", "--token", "abc"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        answer = httpx.get(f"{url}/botabc/me", timeout=5)
        assert answer.json()["name"] == "testbot"
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stdout.close()


# -- the adapter ----------------------------------------------------------------


async def test_update_is_admitted_before_it_is_acknowledged():
    admissions = Admissions(gated=True)
    with FakeChatPlatform(token=TOKEN) as platform:
        async with running(platform.url, admissions) as run:
            await run.status.reach(LIVE)
            update_id = platform.inject("hello", chat_type="group", thread_id="th", mentioned=True)
            event = await admissions.wait_for(update_id)
            assert event == InboundEvent(
                platform="testplatform", event_id=f"e{update_id}", chat_type=ChatType.GROUP,
                chat_id="c1", user_id="u1", text="hello", thread_id="th", user_name="Ann",
                message_id=f"in{update_id}", mentioned=True,
            )  # fmt: skip
            # admit is still running: the adapter has not polled again, nothing is acked
            assert platform.acked < update_id
            assert platform.pending == [update_id]
            admissions.gate.set()
            await in_thread(platform.wait_acked, update_id, 5.0)
            assert platform.pending == []
            assert len(admissions.events) == 1 and run.restarts == 0


async def test_an_update_whose_admission_failed_is_not_acknowledged_and_comes_again():
    admissions = Admissions(fail_first=True)
    with FakeChatPlatform(token=TOKEN) as platform:
        async with running(platform.url, admissions) as run:
            await run.status.reach(LIVE)
            update_id = platform.inject("hello")
            mark = await run.status.reach(BACKING_OFF)  # admit raised: the connection crashed
            assert run.status.reason == "journal unavailable"
            assert platform.acked < update_id and platform.pending == [update_id]
            await run.status.reach(CONNECTING, since=mark)
            await in_thread(platform.wait_acked, update_id, 5.0)  # the next connection's
            assert [e.event_id for e in admissions.events] == [f"e{update_id}"] * 2
            assert run.restarts == 1


async def test_a_revoked_token_is_fatal_and_not_restarted():
    with FakeChatPlatform(token=TOKEN) as platform:
        async with running(platform.url, Admissions()) as run:
            await run.status.reach(LIVE)
            await in_thread(platform.wait_polls, 1)
            platform.revoke_token()
            await run.status.reach(FATAL)
            assert "401" in run.status.reason and run.status.reason == REFUSED
            with trio.fail_after(5):
                await run.incarnations[-1].ended.wait()
            polls = platform.polls
            with pytest.raises(TimeoutError):  # nobody polls any more
                await in_thread(platform.wait_polls, polls + 1, 0.5)
            assert run.restarts == 0 and len(run.incarnations) == 1
            assert run.status.state == FATAL
            assert run.supervisor.snapshot().children[0].detail["adapter"] == FATAL


async def test_a_refused_token_at_connect_is_fatal():
    with FakeChatPlatform(token="other") as platform:
        async with running(platform.url, Admissions()) as run:
            await run.status.reach(FATAL)
            assert run.status.reason == REFUSED
            assert platform.polls == 0


async def test_a_stalled_platform_misses_the_deadline_and_the_adapter_is_restarted():
    admissions = Admissions()
    with FakeChatPlatform(token=TOKEN) as platform:
        async with running(platform.url, admissions) as run:
            await run.status.reach(LIVE)
            platform.stall()
            mark = await run.status.reach(BACKING_OFF)
            assert run.status.reason == "no progress for 1 s"
            await run.status.reach(CONNECTING, since=mark)  # the next incarnation
            assert run.restarts >= 1 and len(run.incarnations) >= 2
            platform.unstall()
            update_id = platform.inject("are you there?")
            await admissions.wait_for(update_id)
            assert run.status.state == LIVE
            await in_thread(platform.wait_acked, update_id, 5.0)


async def test_send_maps_the_platform_answers():
    with FakeChatPlatform(token=TOKEN) as platform:
        async with running(platform.url, Admissions()) as run:
            assert await run.send(request("k1")) == Sent("m1")
            assert platform.sent == [{"chat_id": "c1", "thread_id": "t1", "text": "hi",
                                      "reply_to": "in1", "idempotency_key": "k1"}]  # fmt: skip

            platform.fail_sends(429, retry_after=7)
            result = await run.send(request("k2"))
            assert isinstance(result, RetryAfter) and result.seconds == 7
            assert "429" in result.reason and not result.scope_wide

            platform.fail_sends(429)
            result = await run.send(request("k2"))
            assert isinstance(result, RetryAfter) and result.seconds == 1

            platform.fail_sends(503, times=2)
            for _ in range(2):
                result = await run.send(request("k2"))
                assert isinstance(result, RetryAfter) and result.seconds is None
            assert await run.send(request("k2")) == Sent("m2")

            platform.fail_sends(400)
            result = await run.send(request("k3"))
            assert isinstance(result, Permanent) and "400" in result.reason
            platform.fail_sends(403)
            assert isinstance(await run.send(request("k3")), Permanent)
            assert [s["idempotency_key"] for s in platform.sent] == ["k1", "k2"]


async def test_send_after_a_transport_error_is_retried_later():
    config, secrets = make_config(closed_port_url().removesuffix("/v1"))
    adapter = FakePlatformAdapter(
        AdapterSetup("testplatform", config, secrets, AdapterStatus(), Admissions())
    )
    async with httpx.AsyncClient(timeout=5) as http:
        adapter.http = http
        result = await adapter.send(request())
    assert isinstance(result, RetryAfter) and result.seconds is None
    assert "ConnectError" in result.reason
