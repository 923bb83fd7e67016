"""A Ref follows its child across restarts and is empty while the child is down."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped, ChildStartError
from hermes.actors.ref import Ref
from hermes.actors.supervisor import ChildSpec, Restart, Supervisor
from hermes.state.registry import Registry
from tests.actors.probe import Probe


class Told(Probe):
    """A probe that says when its incarnation started and when it flushed (ending)."""

    def __init__(self, starts: list[trio.Event], ends: list[trio.Event]) -> None:
        super().__init__("a")
        self.number = sum(e.is_set() for e in starts)  # 0 for the first incarnation
        self.starts, self.ends = starts, ends

    async def on_start(self) -> None:
        self.starts[self.number].set()

    async def flush(self) -> None:
        self.ends[self.number].set()


async def test_a_ref_is_repointed_on_restart_and_cleared_when_the_child_ends(autojump_clock):
    ref = Ref("a", Address)
    assert ref.current() is None
    with pytest.raises(ActorStopped):
        ref.get()
    starts, ends = [trio.Event(), trio.Event()], [trio.Event(), trio.Event()]
    first_start, second_start, *_ = starts
    _, second_end = ends
    spec = ChildSpec("a", lambda: Told(starts, ends), restart=Restart.TRANSIENT, ref=ref)
    root = Supervisor("root", [spec])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        assert first_start.is_set()
        first = ref.get()
        assert await first.call("hello") == "hello"
        await first.cast("crash")  # a crash in a cast: the supervisor restarts it
        await second_start.wait()  # after its backoff
        await trio.testing.wait_all_tasks_blocked()
        assert ref.get() is not first
        assert await ref.get().call("again") == "again"
        with pytest.raises(ActorStopped):
            await first.cast("the old incarnation is gone")
        await ref.get().call("exit")  # ends normally: a transient child is not restarted
        await second_end.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert ref.current() is None
        root.drain(trio.current_time() + 5)


async def test_a_ref_refuses_a_handle_of_the_wrong_kind(autojump_clock):
    ref = Ref("a", Registry)
    root = Supervisor("root", [ChildSpec("a", lambda: Probe("a"), ref=ref)])
    with pytest.raises(BaseExceptionGroup) as caught:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
    [failed] = caught.value.exceptions
    assert isinstance(failed, ChildStartError)
    assert "handed out Address, not Registry" in str(failed.__cause__)
    assert ref.current() is None
