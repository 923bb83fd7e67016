"""Supervisor behaviour on the Trio mock clock: order, intensity, backoff, drain."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from hermes.actors.actor import Actor
from hermes.actors.address import Address
from hermes.actors.backoff import Backoff
from hermes.actors.errors import ActorStopped, ChildStartError, SupervisorGaveUp
from hermes.actors.ref import Ref
from hermes.actors.snapshot import RunState, Snapshot
from hermes.actors.supervisor import ChildSpec, Restart, Strategy, Supervisor
from tests.actors.probe import Probe


def probes(journal: list[str], *names: str, **kw) -> list[ChildSpec]:
    return [ChildSpec(n, lambda n=n: Probe(n, journal), **kw) for n in names]


def count_tasks() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

    return walk(trio.lowlevel.current_root_task())


async def test_children_start_in_order_each_ready_first_and_stop_in_reverse(autojump_clock):
    journal: list[str] = []

    class SlowStart(Probe):
        async def on_start(self):
            await trio.sleep(1)
            journal.append(f"ready {self.name} at {trio.current_time():g}")

    specs = [ChildSpec(n, lambda n=n: SlowStart(n, journal)) for n in ("a", "b", "c")]
    sup = Supervisor("root", specs)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        assert journal == ["ready a at 1", "ready b at 2", "ready c at 3"]
        journal.clear()
        sup.drain(trio.current_time() + 10)
    # Phase 1 (intake) reaches every child before any of them is stopped.
    assert journal == ["intake c", "intake b", "intake a", "flush c", "flush b", "flush a"]


async def test_restart_intensity_exceeded_fails_to_parent(autojump_clock):
    class CrashesSoon(Actor):
        async def on_start(self):
            self.nursery.start_soon(self._die)

        async def _die(self):
            await trio.sleep(1)
            raise RuntimeError("again")

    journal: list[str] = []
    inner = Supervisor(
        "inner",
        [*probes(journal, "steady"), ChildSpec("flaky", CrashesSoon)],
        max_restarts=2,
        period=30,
        backoff=Backoff(0.1, 0.1),
    )
    outer = Supervisor("outer", [ChildSpec("inner", lambda: inner)], max_restarts=0)
    start = trio.current_time()
    with pytest.raises(SupervisorGaveUp) as info:
        await outer.run()
    # outer gave up on its first restart; its cause is inner giving up.
    assert info.value.name == "outer"
    assert isinstance(info.value.__cause__, SupervisorGaveUp)
    assert info.value.__cause__.name == "inner"
    assert info.value.__cause__.child == "flaky"
    # inner restarted twice (crash at 1, 2.1), the third crash (3.2) exceeded 2 in 30s.
    assert trio.current_time() - start == pytest.approx(3.2)
    assert inner.snapshot().state is RunState.STOPPED
    assert all(c.state is RunState.STOPPED for c in inner.snapshot().children)
    assert "flush steady" in journal


async def test_backoff_delays_stay_within_bounds_and_grow(autojump_clock):
    starts: list[float] = []

    class CrashesAtOnce(Actor):
        async def on_start(self):
            starts.append(trio.current_time())
            self.nursery.start_soon(self._die)

        async def _die(self):
            raise RuntimeError("at once")

    backoff = Backoff(0.5, 4.0)
    sup = Supervisor(
        "s",
        [ChildSpec("x", CrashesAtOnce)],
        max_restarts=8,
        period=1000,
        backoff=backoff,
        rng=random.Random(7),
    )
    with pytest.raises(SupervisorGaveUp):
        await sup.run()
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(gaps) == 8
    for attempt, gap in enumerate(gaps, start=1):
        ceiling = min(4.0, 0.5 * 2 ** (attempt - 1))
        assert max(0.5, ceiling / 2) <= gap <= ceiling
    assert all(0.5 <= g <= 4.0 for g in gaps)
    assert gaps[-1] > gaps[0]


def test_backoff_refuses_inverted_bounds():
    with pytest.raises(ValueError, match="below its minimum"):
        Backoff(2.0, 1.0)


async def test_child_ignoring_drain_is_cancelled_at_its_deadline(autojump_clock):
    ended: list[float] = []

    class Stubborn:
        name = "stubborn"

        async def run(self, *, task_status=trio.TASK_STATUS_IGNORED):
            task_status.started(self)
            try:
                await trio.sleep_forever()
            finally:
                ended.append(trio.current_time())

        def stop_intake(self):
            pass

        def request_drain(self, deadline):
            pass  # ignores it

        def snapshot(self):
            return Snapshot(self.name, "Stubborn", RunState.RUNNING)

    journal: list[str] = []
    sup = Supervisor(
        "s",
        [*probes(journal, "first"), ChildSpec("stubborn", Stubborn, shutdown=3.0)],
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        begin = trio.current_time()
        sup.drain(begin + 100)
    # Its own shutdown deadline (3 s) cut it; then the first child stopped normally.
    assert ended == [pytest.approx(begin + 3.0)]
    assert journal[-1] == "flush first"


async def test_actor_drain_finishes_in_flight_then_cuts_at_deadline(autojump_clock):
    journal: list[str] = []
    probe = Probe("p", journal)
    sup = Supervisor("s", [ChildSpec("p", lambda: probe, shutdown=100)])
    replies: list[object] = []

    async def ask(msg):
        try:
            replies.append(await probe.address.call(msg, timeout=1000))
        except ActorStopped:
            replies.append("stopped")

    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        for msg in (("sleep", 2), ("sleep", 3), ("sleep", 50)):
            # 2 s in the handler; 3 s queued, finishes by t+5; 50 s queued, cut at t+10.
            nursery.start_soon(ask, msg)
            await trio.testing.wait_all_tasks_blocked()
        begin = trio.current_time()
        sup.drain(begin + 10)
        with pytest.raises(ActorStopped):
            await probe.address.cast("after intake closed")
    assert replies == ["slept 2", "slept 3", "stopped"]
    assert trio.current_time() == pytest.approx(begin + 10)
    assert journal[-1] == "flush p"


async def test_flush_runs_shielded_even_when_cancelled(autojump_clock):
    flushed: list[float] = []

    class Flusher(Actor):
        async def flush(self):
            await trio.sleep(1)  # would be cancelled without the shield
            flushed.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        await nursery.start(Flusher("f").run)
        nursery.cancel_scope.cancel()
    assert len(flushed) == 1


async def test_dynamic_children_start_and_stop_at_run_time(autojump_clock):
    journal: list[str] = []
    sup = Supervisor("s", probes(journal, "fixed"))
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        address = await sup.start_child(
            ChildSpec("session-1", lambda: Probe("session-1", journal), restart=Restart.TEMPORARY)
        )
        assert await address.call("hi") == "hi"
        assert sup.child_names() == ["fixed", "session-1"]
        with pytest.raises(ValueError, match="already has a child"):
            await sup.start_child(ChildSpec("session-1", Probe))
        await sup.stop_child("session-1")
        assert sup.child_names() == ["fixed"]
        assert "flush session-1" in journal
        with pytest.raises(ActorStopped):
            await address.call("gone")
        # A temporary child that ends by itself is removed, not restarted.
        address = await sup.start_child(
            ChildSpec("session-2", lambda: Probe("session-2", journal), restart=Restart.TEMPORARY)
        )
        await address.cast("exit")
        await trio.testing.wait_all_tasks_blocked()
        assert sup.child_names() == ["fixed"]
        sup.drain(trio.current_time() + 5)
    with pytest.raises(ActorStopped):
        await sup.start_child(ChildSpec("late", Probe))


async def test_failed_initial_start_stops_started_children(autojump_clock):
    journal: list[str] = []

    class CannotStart(Actor):
        async def on_start(self):
            raise OSError("port in use")

    sup = Supervisor("s", [*probes(journal, "a"), ChildSpec("b", CannotStart)])
    with pytest.raises(ChildStartError) as info:
        await sup.run()
    assert info.value.child == "b"
    assert isinstance(info.value.__cause__, OSError)
    assert journal == ["start a", "intake a", "flush a"]


async def test_no_task_outlives_its_nursery(autojump_clock):
    before = count_tasks()
    journal: list[str] = []

    class Busy(Probe):
        async def on_start(self):
            for _ in range(3):
                self.nursery.start_soon(trio.sleep_forever)

    def inner():
        return Supervisor("inner", [ChildSpec("busy", lambda: Busy("busy", journal))])

    a = Ref("a", Address)
    root = Supervisor(
        "root",
        [ChildSpec("a", lambda: Probe("a", journal), ref=a), ChildSpec("inner", inner)],
        strategy=Strategy.ONE_FOR_ALL,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        assert count_tasks() > before + 5
        await a.get().cast("crash")  # one_for_all: everything restarts
        await trio.sleep(1)
        assert [c.restarts for c in root.snapshot().children] == [1, 1]
        root.drain(trio.current_time() + 5)
    assert count_tasks() == before


async def test_snapshot_reports_states_restarts_and_mailbox_depth(autojump_clock):
    class Gated(Actor):
        gate = trio.Event()

        async def handle(self, msg):
            await self.gate.wait()

    gated_ref = Ref("gated", Address)
    root = Supervisor(
        "root",
        [ChildSpec("gated", lambda: Gated(), ref=gated_ref),
         ChildSpec("sub", lambda: Supervisor("sub"))],
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        address = gated_ref.get()
        for i in range(4):
            await address.cast(i)
        snap = root.snapshot()
        assert snap.state is RunState.RUNNING
        gated, sub = snap.children
        assert (gated.name, gated.kind, gated.state) == ("gated", "Gated", RunState.RUNNING)
        assert gated.mailbox_depth == 3  # one is being handled
        assert sub.kind == "Supervisor:one_for_one"
        assert Snapshot.from_dict(snap.to_dict()) == snap
        assert "gated" in snap.render() and "mailbox=3" in snap.render()
        Gated.gate.set()
        root.drain(trio.current_time() + 1)
    assert root.snapshot().state is RunState.STOPPED
