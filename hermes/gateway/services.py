"""Services: how serve's actors reach each other, typed and stable across restarts.

One record of Refs, one per sibling a child may need, made before the tree and
given to each child's factory; the supervisor re-points a Ref whenever its
child restarts. Nothing looks an actor up by name.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.ref import Ref
from hermes.actors.supervisor import Supervisor
from hermes.gateway.admission import Intake
from hermes.gateway.approvals import ApprovalWaits
from hermes.state.registry import Registry


@attrs.frozen
class Services:
    clock: Clock
    state: Ref[Registry] = attrs.field(factory=lambda: Ref("state", Registry))
    terminal: Ref[Address] = attrs.field(factory=lambda: Ref("terminal", Address))
    adapters: Mapping[str, Ref[Address]] = attrs.field(factory=dict)  # by platform
    outbox: Ref[Address] = attrs.field(factory=lambda: Ref("outbox", Address))
    scheduler: Ref[Address] = attrs.field(factory=lambda: Ref("scheduler", Address))
    gateway: Ref[Intake] = attrs.field(factory=lambda: Ref("gateway", Intake))  # the router
    # The root itself, for its snapshot and whether it drains: pointed once it exists.
    root: Ref[Supervisor] = attrs.field(factory=lambda: Ref("serve", Supervisor))
    # The approval requests this serve's turns wait on: a decision wakes its turn.
    approval_waits: ApprovalWaits = attrs.field(factory=ApprovalWaits)

    @classmethod
    def for_platforms(cls, clock: Clock, platforms: list[str]) -> Services:
        return cls(clock, adapters={p: Ref(p, Address) for p in platforms})

    def adapter_of(self, platform: str) -> Address | None:
        """The running adapter of `platform`; None while it is down or not enabled."""
        ref = self.adapters.get(platform)
        return ref.current() if ref is not None else None
