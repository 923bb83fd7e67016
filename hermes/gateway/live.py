"""The operator actions' way to serve's live actors (operations' Live), over Services."""

from __future__ import annotations

import contextlib

from hermes.actors.errors import ActorStopped, Unavailable
from hermes.actors.snapshot import RunState, Snapshot
from hermes.agent.context_files import ContextFiles, Loaded
from hermes.cron.scheduler import CancelFire, JobsChanged, RunNow
from hermes.delivery.outbox import nudge
from hermes.gateway.intake import DRAIN_NOTICE
from hermes.gateway.router_messages import PairingChanged
from hermes.gateway.services import Services


class ServeLive:
    def __init__(self, services: Services, context_files: ContextFiles | None = None) -> None:
        """`context_files`: the agent's, whose scan findings the dashboard shows."""
        self.services = services
        self.context_files = context_files

    def _stopped(self, exc: ActorStopped) -> Unavailable:
        root = self.services.root.current()
        draining = root is not None and root.state is RunState.DRAINING
        return Unavailable(DRAIN_NOTICE if draining else f"{exc} (restarting? try again)")

    async def jobs_changed(self) -> None:
        with contextlib.suppress(ActorStopped):  # it plans from state.db when it starts
            await self.services.scheduler.get().cast(JobsChanged())

    async def outbox_changed(self) -> None:
        nudge(self.services.outbox.current())  # it looks at state.db when it starts

    async def pairing_changed(self) -> None:
        with contextlib.suppress(ActorStopped):  # it looks for approvals when it starts
            await self.services.gateway.get().address.cast(PairingChanged())

    async def approval_decided(self, request_id: str) -> None:
        self.services.approval_waits.wake(request_id)

    def waiting_on(self, request_id: str) -> bool:
        return self.services.approval_waits.waiting_on(request_id)

    async def run_job(self, ref: str, context: str | None) -> tuple[str, int]:
        try:
            return await self.services.scheduler.get().call(RunNow(ref, context))
        except ActorStopped as exc:
            raise self._stopped(exc) from None

    async def cancel_fires(self, ref: str, fence: int | None) -> list[str]:
        try:
            return await self.services.scheduler.get().call(CancelFire(ref, fence))
        except ActorStopped:
            return []  # not running here: the lease is revoked in state.db instead

    def snapshot(self) -> Snapshot:
        return self.services.root.get().snapshot()

    def context_findings(self) -> list[Loaded]:
        return self.context_files.findings() if self.context_files is not None else []
