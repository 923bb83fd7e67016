"""The facts intake's `screen` needs for one event, gathered: what authorization says
(with pairing's approvals read only when config alone refuses), a pairing code where one
is offered, the chat's group settings, and how many bot-started turns ran there in a row.
Each refusal is logged once per user and reason."""

from __future__ import annotations

import logging

import attrs

from hermes.actors.clock import Clock
from hermes.adapters.contract import InboundEvent
from hermes.adapters.settings import Busy, GroupsConfig, PlatformConfig
from hermes.gateway.authorization import Decision, decide
from hermes.gateway.intake import Screening
from hermes.gateway.settings import Config
from hermes.state.db import Db
from hermes.state.pairing import approved_users, request_code

log = logging.getLogger(__name__)

LOCAL_POLICY = PlatformConfig(
    allow_all_users=True, group_policy="open", groups=GroupsConfig(activation="always")
)
NO_PLATFORM = Decision(allowed=False, reason="no such platform is configured", silent=True)
KEPT = 10_000  # users' refusals logged, and chats counted, before the record starts again


def policies(config: Config) -> dict[str, PlatformConfig]:
    """Each platform's access settings; the local endpoint is gated by its token alone."""
    local = attrs.evolve(LOCAL_POLICY, merge_window=config.gateway.local.merge_window)
    return {"local": local, **config.enabled_platforms()}


class Gate:
    """Screening's facts, and what it keeps between events (bot turns, refusals logged)."""

    def __init__(self, db: Db, clock: Clock, config: Config) -> None:
        self.db = db
        self.clock = clock
        self.gateway = config.gateway
        self.policies = policies(config)
        self.global_allowed = frozenset(config.gateway.allowed_users)
        self.bot_turns: dict[tuple[str, str], int] = {}  # (platform, chat): in a row
        self._logged: set[tuple[str, str, str]] = set()

    def merge_window(self, event: InboundEvent) -> float:
        """The event's platform's `merge_window`, else the gateway's."""
        policy = self.policies.get(event.platform)
        window = policy.merge_window if policy is not None else None
        return self.gateway.merge_window if window is None else window

    def busy(self, event: InboundEvent) -> Busy:
        """The event's platform's `busy`, else the gateway's."""
        policy = self.policies.get(event.platform)
        return (policy.busy if policy is not None else None) or self.gateway.busy

    async def screening(self, event: InboundEvent, draining: bool) -> Screening:
        policy = self.policies.get(event.platform)
        if policy is None:
            return Screening(NO_PLATFORM, GroupsConfig(), draining=draining)
        decision = decide(event, policy, frozenset(), self.global_allowed)
        if not decision.allowed:  # only then can pairing's approvals change the answer
            approved = await self.db.read(approved_users, event.platform)
            decision = decide(event, policy, approved, self.global_allowed)
        offer = ""
        if decision.offer_pairing and not event.is_bot:  # one code an hour per user
            now = self.clock.now()
            made = await self.db.write(
                request_code, event.platform, event.user_id, event.user_name, now, event.chat_id
            )
            offer = made.message(now)
        chat = (event.platform, event.chat_id)
        return Screening(decision, policy.groups, offer, draining, self.bot_turns.get(chat, 0))

    def turn_started(self, event: InboundEvent) -> None:
        """A turn starts for `event`: a bot's adds to its chat's count, a person's clears it."""
        chat = (event.platform, event.chat_id)
        if not event.is_bot:
            self.bot_turns.pop(chat, None)
            return
        if len(self.bot_turns) > KEPT:
            self.bot_turns.clear()
        self.bot_turns[chat] = self.bot_turns.get(chat, 0) + 1

    def log_refusal(self, event: InboundEvent, reason: str) -> None:
        key = (event.platform, event.user_id, reason)
        if key in self._logged:
            return
        if len(self._logged) > KEPT:
            self._logged.clear()
        self._logged.add(key)
        log.info(
            "refused %s user %s in %s %s: %s",
            event.platform,
            event.user_id,
            event.chat_type,
            event.chat_id,
            reason,
        )
