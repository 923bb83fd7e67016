"""Who may talk to the agent: one pure decision per inbound event.

Default deny. The router asks `decide` for every event before anything else
happens (whether a group message is addressed to the bot, and what becomes of another
bot's, is the intake's: hermes/gateway/intake.py), logs each refusal once with its
reason, and never answers a refusal in a group or channel. Kept pure (no I/O, no
clock) so the whole policy can be tested as a table: the caller passes the users
approved by pairing
(state.db) and `gateway.allowed_users` as configured (`platform:id` entries: a
Telegram id can equal a WhatsApp number).
"""

from __future__ import annotations

import attrs

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.settings import PlatformConfig


@attrs.frozen
class Decision:
    """The router's answer. `reason` is a short phrase for the log; `silent` means the
    refusal is not answered at all; `offer_pairing` means answer with a pairing code."""

    allowed: bool
    reason: str
    offer_pairing: bool = False
    silent: bool = False


def _allow(reason: str) -> Decision:
    return Decision(allowed=True, reason=reason)


def _refuse(reason: str, *, offer_pairing: bool = False) -> Decision:
    return Decision(
        allowed=False, reason=reason, offer_pairing=offer_pairing, silent=not offer_pairing
    )


def _sender(
    event: InboundEvent,
    policy: PlatformConfig,
    approved: frozenset[str],
    global_allowed: frozenset[str],
) -> str | None:
    """Why the sender is authorized, or None when they are not."""
    user_id = event.user_id
    if user_id in policy.allowed_users:
        return "in allowed_users"
    if user_id in approved:
        return "approved by pairing"
    if f"{event.platform}:{user_id}" in global_allowed:
        return "in gateway.allowed_users"
    if policy.allow_all_users:
        return "allow_all_users"
    return None


def decide(
    event: InboundEvent,
    policy: PlatformConfig,
    approved: frozenset[str],
    global_allowed: frozenset[str],
) -> Decision:
    """Whether `event` reaches the agent, and how a refusal is handled. `approved`: user
    ids on the event's platform; `global_allowed`: `platform:id` entries."""
    why = _sender(event, policy, approved, global_allowed)
    if event.chat_type == ChatType.DM:
        if why is not None:
            return _allow(why)
        if policy.allowed_users or policy.allow_all_users:  # the owner said who may talk
            return _refuse("unknown user (allowlist configured)")
        return _refuse("unknown user; pairing offered", offer_pairing=True)
    kind = event.chat_type.value
    if policy.group_policy == "disabled":
        return _refuse(f"{kind} chats disabled")
    if policy.group_policy == "allowlist" and event.chat_id not in policy.allowed_chats:
        return _refuse(f"{kind} not in allowed_chats")
    if why is None:
        return _refuse(f"unknown user in {kind}")
    return _allow(f"{why}, {kind} {policy.group_policy}")
