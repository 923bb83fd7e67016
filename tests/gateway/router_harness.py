"""A Router on a real state.db and the fake model server, fed the way adapters feed it.

    async with running_router(registry, home, fake, config) as h:
        event = await h.send("alice", "hello")       # admitted through Admission
        step = await h.final(event)                  # its final TurnStep
        answer = await h.answer_to(event)            # what the user was sent

`RecordingReplies` stands in for the delivery side: it keeps every progress
step and every answer, and lets a test wait for one (on a trio.Event that is
replaced at each record, never by sleeping). `settle()` waits until the
router has handled every event cast to it and every turn has closed its
journal row, so the journal can be read.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.adapters.contract import ChatType, Cursor, InboundEvent, Target, TurnStep
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.tools.catalog import default_tools
from hermes.delivery.replies import Then
from hermes.gateway.admission import Admission, Admitted, Intake
from hermes.gateway.approvals import ApprovalWaits
from hermes.gateway.journal import new_owner
from hermes.gateway.live import ServeLive
from hermes.gateway.router import Router
from hermes.gateway.services import Services
from hermes.gateway.session_host import SessionServices
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.state.registry import Registry
from hermes.terminal.placement import backends_for
from tests.fakes.openai import FakeOpenAI
from tests.seed import writing

T = TypeVar("T")

_IDS = itertools.count(1)  # event ids unique across routers of one test (a restart)

# Never admitted: claiming it changes nothing, so a call with it is a barrier that
# returns once the router has handled everything cast to it before.
_BARRIER = InboundEvent("no-such-platform", "barrier", ChatType.DM, "-", "-", "")


@attrs.frozen
class Answer:
    source: InboundEvent | None
    target: Target
    text: str
    key: str


class RecordingReplies:
    """The router's Replies: records steps and answers, in order."""

    def __init__(self, timeout: float, state_db: Path) -> None:
        self.state_db = state_db  # where the router's `then` writes go (its journal rows)
        self.steps: list[TurnStep] = []
        self.answers: list[Answer] = []
        self.timeout = timeout
        # An answer this says True for never completes (an adapter whose send hangs);
        # it is recorded in `hanging`.
        self.hang: Callable[[Answer], bool] = lambda answer: False
        self.hanging: list[Answer] = []
        self._changed = trio.Event()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def progress(self, event: TurnStep) -> None:
        self.steps.append(event)
        self._touch()

    def planned(self, source: InboundEvent, key: str, prefix: str = "") -> None:
        return None  # every answer comes through `answer`, where it is recorded

    async def answer(
        self,
        source: InboundEvent | None,
        target: Target,
        text: str,
        key: str,
        then: Then | None = None,
    ) -> None:
        answer = Answer(source, target, text, key)
        if self.hang(answer):
            self.hanging.append(answer)
            self._touch()
            await trio.sleep_forever()
        if then is not None:
            with writing(self.state_db) as conn:
                then(conn, time.time())
        if text:
            self.answers.append(answer)
        self._touch()

    async def wait_for(self, found: Callable[[], T | None]) -> T:
        """The first truthy value of `found()`, re-checked after every record."""
        with trio.fail_after(self.timeout):
            while not (value := found()):
                await self._changed.wait()
        return value

    def steps_of(self, event: InboundEvent) -> list[TurnStep]:
        return [s for s in self.steps if s.event_id == event.event_id]

    def answers_to(self, event: InboundEvent) -> list[Answer]:
        key = f"{event.platform}:{event.event_id}"
        return [a for a in self.answers if a.key == key]


@attrs.define
class RouterHarness:
    router: Router
    address: Address
    admission: Admission
    replies: RecordingReplies
    fake: FakeOpenAI
    home: HermesHome
    stopped: trio.Event  # set when the router's run has returned
    scope: trio.CancelScope  # around the router's run only

    def crash(self) -> None:
        """End the router abruptly, the way a killed process leaves state.db."""
        self.scope.cancel()

    # -- events -----------------------------------------------------------------

    def event(
        self,
        user: str = "alice",
        text: str = "hello",
        *,
        platform: str = "telegram",
        group: str | None = None,
        **fields: Any,
    ) -> InboundEvent:
        """A DM from `user` (its chat is `dm-<user>`), or a message in group `group`."""
        n = next(_IDS)
        chat_type, chat_id = (ChatType.GROUP, group) if group else (ChatType.DM, f"dm-{user}")
        fields.setdefault("message_id", f"m{n}")
        fields.setdefault("user_name", user.title())
        return InboundEvent(platform, f"ev{n}", chat_type, chat_id, user, text, **fields)

    async def admit(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        return await self.admission(event, cursor)

    async def send(self, user: str = "alice", text: str = "hello", **kw: Any) -> InboundEvent:
        event = self.event(user, text, **kw)
        assert await self.admit(event)
        return event

    # -- what came of them --------------------------------------------------------

    async def final(self, event: InboundEvent) -> TurnStep:
        return await self.replies.wait_for(
            lambda: next((s for s in self.replies.steps_of(event) if s.final), None)
        )

    async def first_step(self, event: InboundEvent, kind: str = "text") -> TurnStep:
        return await self.replies.wait_for(
            lambda: next((s for s in self.replies.steps_of(event) if s.kind == kind), None)
        )

    async def answer_to(self, event: InboundEvent) -> Answer:
        return (await self.replies.wait_for(lambda: self.replies.answers_to(event)))[0]

    async def answer_with_key(self, key: str) -> Answer:
        """The first answer whose key starts with `key`."""
        return await self.replies.wait_for(
            lambda: next((a for a in self.replies.answers if a.key.startswith(key)), None)
        )

    async def ask(self, user: str = "alice", text: str = "hello", **kw: Any) -> Answer:
        """Send a message and wait for its answer."""
        return await self.answer_to(await self.send(user, text, **kw))

    async def routed(self) -> None:
        """Every event cast so far routed (a part of a burst may still wait for more)."""
        await self.address.call(Admitted(_BARRIER))
        with trio.fail_after(self.replies.timeout):
            await self.router.arrivals.settled()

    async def settle(self) -> None:
        """Every event cast so far handled, and every turn's journal row closed (a burst
        waiting for more goes now, as in a drain).

        Not while a turn waits in a session's queue: Router.finish_in_flight then waits
        on an idle Event the session actor replaces (see a test in test_router.py)."""
        await self.routed()
        with trio.fail_after(self.replies.timeout):
            await self.router.finish_in_flight()

    # -- state.db -----------------------------------------------------------------

    async def rows(self, sql: str, *args: Any) -> list[tuple]:
        return await self.router.db.read(lambda conn: conn.execute(sql, args).fetchall())

    async def journal(self, event: InboundEvent) -> str:
        await self.settle()
        (row,) = await self.rows(
            "SELECT state FROM inbound_journal WHERE platform = ? AND event_id = ?",
            event.platform,
            event.event_id,
        )
        return row[0]

    def cli_write(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(conn, *args)` the way `hermes pairing ...` runs it: its own connection,
        one immediate transaction."""
        with writing(self.home.state_db) as conn:
            return fn(conn, *args)


def make_agent(fake: FakeOpenAI) -> Agent:
    return Agent(ProviderChain([OpenAICompatible("f", "m", fake.url, "k")]), default_tools())


@contextlib.asynccontextmanager
async def running_router(
    registry: Registry,
    home: HermesHome,
    fake: FakeOpenAI,
    config: Config | None = None,
    *,
    owner: str | None = None,
    timeout: float = 10.0,
    agent: Agent | None = None,
    approval_waits: ApprovalWaits | None = None,
    merge_window: float = 0.0,
) -> AsyncIterator[RouterHarness]:
    """A router in a nursery and an admission into it; drained on the way out.

    `agent`: another than `make_agent(fake)` (a second provider); `approval_waits`: one
    kept across routers, as serve keeps it across a router's restart. `timeout` bounds every
    wait of the harness (virtual seconds under a mock clock,
    where a large one only fires when everything is stuck). Commands run where serve's
    would (config's `terminal`: the sandbox for a user's, where bubblewrap works here).
    `merge_window`: `gateway.merge_window` (off unless a test is about bursts: most send
    one user's messages one after another on purpose)."""
    config = config or Config()
    config = attrs.evolve(config, gateway=attrs.evolve(config.gateway, merge_window=merge_window))
    services = SessionServices(backends=backends_for(config.terminal, home.root))
    replies = RecordingReplies(timeout, home.state_db)
    clock = Clock(time.time() - trio.current_time())  # wall time, on the test's trio clock
    waits = approval_waits or ApprovalWaits()  # what /approve wakes, through serve's Live
    live = ServeLive(Services(clock, approval_waits=waits))
    router = Router(
        registry, home.state_db, home.root, home.memories, agent or make_agent(fake),
        config, replies, owner or new_owner(), clock, services,
        approval_waits=waits, live=live,
    )  # fmt: skip
    stopped = trio.Event()
    scope = trio.CancelScope()

    async def host(task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with scope:
                await router.run(task_status=task_status)
        finally:
            stopped.set()

    async with trio.open_nursery() as nursery:
        intake: Intake = await nursery.start(host)
        address = intake.address
        async with Admission(registry, home.state_db, lambda: intake, clock) as admission:
            yield RouterHarness(router, address, admission, replies, fake, home, stopped, scope)
        router.request_drain(trio.current_time() + 5.0)
