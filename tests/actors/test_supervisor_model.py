"""Random crash sequences against a small model of OTP supervision semantics.

Each example builds a supervisor of Probe children with random restart types
and strategy, then drives a random sequence of crashes and normal exits, spaced
in (virtual) time. After each event the real supervisor must agree with the
model on which children exist, which run, and how often each was restarted;
when the model says the restart intensity is exceeded, the supervisor must
fail with SupervisorGaveUp and leave every child stopped.
"""

from __future__ import annotations

import random

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes.actors.address import Address
from hermes.actors.backoff import Backoff
from hermes.actors.errors import SupervisorGaveUp
from hermes.actors.ref import Ref
from hermes.actors.snapshot import RunState
from hermes.actors.supervisor import ChildSpec, Restart, Strategy, Supervisor
from tests.actors.probe import Probe

PERIOD = 10.0
MAX_RESTARTS = 3
BACKOFF = Backoff(0.5, 2.0)


@attrs.define
class ModelChild:
    name: str
    restart: Restart
    running: bool = True
    restarts: int = 0


@attrs.define
class Model:
    strategy: Strategy
    children: list[ModelChild]
    restart_times: list[float] = attrs.Factory(list)
    gave_up: bool = False

    def step(self, child: ModelChild, crashed: bool, now: float) -> None:
        if child.restart is Restart.TEMPORARY or (
            child.restart is Restart.TRANSIENT and not crashed
        ):
            child.running = False
            if child.restart is Restart.TEMPORARY:
                self.children.remove(child)
            return
        self.restart_times = [t for t in self.restart_times if t > now - PERIOD]
        self.restart_times.append(now)
        if len(self.restart_times) > MAX_RESTARTS:
            self.gave_up = True
            for c in self.children:
                c.running = False
            return
        index = self.children.index(child)
        if self.strategy is Strategy.ONE_FOR_ONE:
            group = [child]
        elif self.strategy is Strategy.ONE_FOR_ALL:
            group = list(self.children)
        else:
            group = self.children[index:]
        for member in group:
            if member is not child and member.restart is Restart.TEMPORARY:
                self.children.remove(member)
            else:
                member.running = True
                member.restarts += 1


events = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=10),  # which running child (mod count)
        st.booleans(),  # crash (True) or normal exit (False)
        st.sampled_from([0.0, 1.0, 3.0, 12.0]),  # gap before the event, beyond backoff
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    strategy=st.sampled_from(list(Strategy)),
    restarts=st.lists(st.sampled_from(list(Restart)), min_size=1, max_size=5),
    events=events,
    seed=st.integers(0, 2**32 - 1),
)
def test_supervisor_matches_model(strategy, restarts, events, seed) -> None:
    refs = {f"c{i}": Ref(f"c{i}", Address) for i in range(len(restarts))}
    specs = [
        ChildSpec(f"c{i}", Probe, restart=restart, shutdown=1.0, ref=refs[f"c{i}"])
        for i, restart in enumerate(restarts)
    ]
    model = Model(strategy, [ModelChild(s.name, s.restart) for s in specs])

    async def scenario() -> None:
        sup = Supervisor(
            "sup",
            specs,
            strategy=strategy,
            max_restarts=MAX_RESTARTS,
            period=PERIOD,
            backoff=BACKOFF,
            rng=random.Random(seed),
        )
        outcome: list[BaseException] = []

        async def host(task_status=trio.TASK_STATUS_IGNORED):
            try:
                await sup.run(task_status=task_status)
            except SupervisorGaveUp as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            await nursery.start(host)
            for pick, crashed, gap in events:
                running = [c for c in model.children if c.running]
                if not running or model.gave_up:
                    break
                # Settle: any restart (backoff <= 2s) is over before the next event.
                await trio.sleep(BACKOFF.maximum + gap)
                target = running[pick % len(running)]
                address = refs[target.name].get()
                now = trio.current_time()
                await address.cast("crash" if crashed else "exit")
                model.step(target, crashed, now)
                await trio.sleep(BACKOFF.maximum + 0.5)
                check(sup, model, outcome)
            check(sup, model, outcome)
            if not model.gave_up:
                sup.drain(trio.current_time() + 5)

        snap = sup.snapshot()
        assert snap.state is RunState.STOPPED
        assert all(c.state is RunState.STOPPED for c in snap.children)

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def check(sup: Supervisor, model: Model, outcome: list[BaseException]) -> None:
    if model.gave_up:
        assert len(outcome) == 1 and isinstance(outcome[0], SupervisorGaveUp)
        assert all(c.state is RunState.STOPPED for c in sup.snapshot().children)
        return
    assert not outcome
    snap = sup.snapshot()
    assert [c.name for c in snap.children] == [c.name for c in model.children]
    for real, expected in zip(snap.children, model.children, strict=True):
        assert (real.state is RunState.RUNNING) == expected.running, real.name
        assert real.restarts == expected.restarts, real.name
