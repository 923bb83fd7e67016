"""What an operator action runs with: state.db, the clock, the zone, and the live tree.

`Live` is the small interface through which an action reaches running actors
(the scheduler, the outbox, the tree's snapshot). Serve implements it over its
services; `Offline` is what a CLI gets when no serve runs, so the same action
runs on the database alone and says plainly what needs a running serve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

import attrs

from hermes.actors.clock import Clock
from hermes.actors.errors import Unavailable
from hermes.actors.snapshot import Snapshot
from hermes.agent.settings import Settings
from hermes.state.db import Db

if TYPE_CHECKING:  # a type only: importing the agent here would load it for every action
    from hermes.agent.context_files import Loaded


def count(low: int, high: int | None = None) -> Any:
    """An attrs validator: a whole number from `low` to `high` (None: no limit; an unset
    optional field passes)."""

    def check(_inst: Any, attr: attrs.Attribute, value: int | None) -> None:
        if value is None or (low <= value and (high is None or value <= high)):
            return
        within = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{attr.name}: must be {within}, got {value}")

    return check


class NotServing(Unavailable):
    """The action needs a running serve and none runs for this home."""


@attrs.frozen
class NoArgs:
    """The arguments of an action that takes none."""


class Live(Protocol):
    async def jobs_changed(self) -> None:
        """Jobs were added or changed: the scheduler re-plans now."""

    async def outbox_changed(self) -> None:
        """Rows were queued or retried: the outbox looks now."""

    async def pairing_changed(self) -> None:
        """Someone was approved: the gateway tells them they are in, now."""

    async def approval_decided(self, request_id: str) -> None:
        """An approval request was decided: the turn waiting on it goes on, now."""

    def waiting_on(self, request_id: str) -> bool:
        """Whether a turn in serve waits on the approval request now (only then is
        deciding it meaningful)."""

    async def run_job(self, ref: str, context: str | None) -> tuple[str, int]:
        """Fire the job now in serve; its id and the run's fence."""

    async def cancel_fires(self, ref: str, fence: int | None) -> list[str]:
        """Cancel the matching fires running in serve; `job#fence` of each."""

    def snapshot(self) -> Snapshot:
        """The serve tree as it is now."""

    def context_findings(self) -> list[Loaded]:
        """The project files (AGENTS.md) serve's prompts loaded whose scan found
        something: those lines were left out."""


class Offline:
    """No serve runs: changes need no one told, and what only serve does is refused."""

    async def jobs_changed(self) -> None:
        pass

    async def outbox_changed(self) -> None:
        pass

    async def pairing_changed(self) -> None:
        pass

    async def approval_decided(self, request_id: str) -> None:
        pass  # no turn waits without a serve

    def waiting_on(self, request_id: str) -> bool:
        return False

    async def run_job(self, ref: str, context: str | None) -> tuple[str, int]:
        raise NotServing("no serve is running for this home to fire the job in")

    async def cancel_fires(self, ref: str, fence: int | None) -> list[str]:
        return []  # a fire elsewhere (a `hermes cron run`) sees its lease revoked

    def snapshot(self) -> Snapshot:
        raise NotServing("no serve is running for this home (`hermes serve` starts it)")

    def context_findings(self) -> list[Loaded]:
        raise NotServing("no serve is running for this home (`hermes doctor` scans them)")


@attrs.frozen
class Ops:
    """Everything an action needs; `by` names who acted (cli, dashboard, local)."""

    db: Db
    clock: Clock
    config: Settings
    live: Live
    by: str

    @property
    def tz(self) -> ZoneInfo:
        return self.config.zone()


@attrs.frozen
class Operation:
    """One operator action: its name, its arguments' type, its result's type (to read it
    back from JSON), its function, and whether it changes state (a change made from the
    CLI is sent to a running serve, so the actor that owns the state acts at once; a
    read runs on state.db wherever it is asked). Each action's module lists its own."""

    name: str
    args: type
    result: Any
    run: Callable[[Ops, Any], Awaitable[Any]]
    changes: bool = False
