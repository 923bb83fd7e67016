"""Address.cast / Address.call against a live actor."""

from __future__ import annotations

import gc
import weakref

import pytest
import trio
import trio.testing

from hermes.actors.actor import Actor
from hermes.actors.errors import ActorStopped, CallTimeout
from hermes.actors.snapshot import RunState
from tests.actors.probe import Probe


async def test_call_returns_the_reply() -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(Probe("p").run)
        assert await address.call("hello") == "hello"
        assert await address.call(42) == 42
        nursery.cancel_scope.cancel()


async def test_handler_error_reaches_caller_with_its_type_and_actor_lives() -> None:
    async with trio.open_nursery() as nursery:
        probe = Probe("p")
        address = await nursery.start(probe.run)
        with pytest.raises(ValueError, match="p refused"):
            await address.call("fail")
        assert probe.state is RunState.RUNNING
        assert await address.call("still here") == "still here"
        nursery.cancel_scope.cancel()


async def test_call_timeout_raises_typed_error_and_late_reply_is_dropped(autojump_clock) -> None:
    async with trio.open_nursery() as nursery:
        probe = Probe("p")
        address = await nursery.start(probe.run)
        start = trio.current_time()
        with pytest.raises(CallTimeout) as info:
            await address.call(("sleep", 10), timeout=2)
        assert trio.current_time() - start == pytest.approx(2)
        assert info.value.name == "p"
        # The actor finishes the slow request later; its reply goes nowhere and
        # the next call gets its own answer, not the stale one.
        assert await address.call("next", timeout=60) == "next"
        assert trio.current_time() - start == pytest.approx(10)
        nursery.cancel_scope.cancel()


async def test_late_reply_is_not_kept_alive() -> None:
    class Holder(Actor):
        gate = trio.Event()

        async def handle(self, msg):
            if msg != "flush the pipe":
                await self.gate.wait()
            return msg

    async with trio.open_nursery() as nursery:
        holder = Holder("h")
        address = await nursery.start(holder.run)
        payload = type("Payload", (), {})()
        ref = weakref.ref(payload)
        with pytest.raises(CallTimeout):
            await address.call(payload, timeout=0.01)
        del payload
        holder.gate.set()
        await address.call("flush the pipe")
        gc.collect()
        assert ref() is None
        nursery.cancel_scope.cancel()


async def test_call_to_stopped_actor_fails_at_once(autojump_clock) -> None:
    probe = Probe("p")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(probe.run)
        await address.cast("exit")
    assert probe.state is RunState.STOPPED
    start = trio.current_time()
    with pytest.raises(ActorStopped):
        await address.call("anyone?", timeout=30)
    with pytest.raises(ActorStopped):
        await address.cast("anyone?")
    assert trio.current_time() == start


async def test_queued_calls_fail_when_the_actor_crashes() -> None:
    class Blocked(Actor):
        mailbox_size = 4
        release = trio.Event()

        async def handle(self, msg):
            await self.release.wait()
            raise RuntimeError("down")  # a crash: the first message was a cast

    results: list[BaseException] = []

    async def caller(address):
        try:
            await address.call("queued", timeout=30)
        except ActorStopped as exc:
            results.append(exc)

    blocked = Blocked("b")
    with pytest.RaisesGroup(RuntimeError):
        async with trio.open_nursery() as nursery:
            address = await nursery.start(blocked.run)
            await address.cast("first")
            for _ in range(3):
                nursery.start_soon(caller, address)
            await trio.testing.wait_all_tasks_blocked()
            assert address.mailbox_depth == 3
            blocked.release.set()
    # Every waiting caller was told the actor stopped; none hangs until its timeout.
    assert len(results) == 3
    assert blocked.state is RunState.STOPPED


async def test_mailbox_is_bounded_and_cast_waits_for_room() -> None:
    class Gated(Actor):
        mailbox_size = 2

        def __init__(self):
            super().__init__("gated")
            self.gate = trio.Event()
            self.seen: list[int] = []

        async def handle(self, msg):
            await self.gate.wait()
            self.seen.append(msg)

    gated = Gated()
    sent: list[int] = []
    async with trio.open_nursery() as nursery:
        address = await nursery.start(gated.run)

        async def producer():
            for i in range(10):
                await address.cast(i)
                sent.append(i)

        nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()
        # One message in the handler, two in the mailbox, the producer waits on the fourth.
        assert sent == [0, 1, 2]
        assert address.mailbox_depth == 2
        gated.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert sent == list(range(10))
        assert gated.seen == list(range(10))
        nursery.cancel_scope.cancel()


async def test_cast_and_a_ready_reply_are_checkpoints_even_when_nothing_waits() -> None:
    """Every async function of the kernel is a Trio checkpoint: a cancelled scope cancels
    a cast even though the mailbox has room, and a wait for a reply that is already there."""
    seen = []

    class Recorder(Probe):
        async def handle(self, msg):
            seen.append(msg)
            return await super().handle(msg)

    async with trio.open_nursery() as nursery:
        address = await nursery.start(Recorder("p").run)
        with trio.CancelScope() as scope:
            scope.cancel()
            await address.cast("never delivered")
        assert scope.cancelled_caught
        assert await address.call("after") == "after"
        assert seen == ["after"]
        with trio.testing.assert_checkpoints():  # a schedule point too, not only a cancel check
            await address.cast("with room in the mailbox")
        reply = await address.submit("answered")
        await trio.testing.wait_all_tasks_blocked()  # the actor has answered by now
        with trio.CancelScope() as scope:
            scope.cancel()
            await reply.wait()
        assert scope.cancelled_caught
        nursery.cancel_scope.cancel()
