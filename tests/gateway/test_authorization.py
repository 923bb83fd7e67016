"""The one decision on who may talk to the agent, row by row of the policy matrix (whether
a group message is addressed to the bot, and another bot's: tests/gateway/test_intake.py)."""

from __future__ import annotations

import pytest

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.settings import PlatformConfig
from hermes.gateway.authorization import decide

ALICE = "111"  # in the platform's allowed_users
PAIRED = "222"  # approved by pairing
GLOBAL = "333"  # in gateway.allowed_users, as telegram:333
STRANGER = "999"
GROUP = "-100"  # an allowed chat
OTHER_GROUP = "-200"

ALLOWLIST = PlatformConfig(allowed_users=(ALICE,), allowed_chats=(GROUP,))
NO_ALLOWLIST = PlatformConfig(allowed_chats=(GROUP,))
ALL_USERS = PlatformConfig(allow_all_users=True, allowed_chats=(GROUP,))
OPEN = PlatformConfig(allowed_users=(ALICE,), group_policy="open")
OPEN_ALL = PlatformConfig(allow_all_users=True, group_policy="open")
DISABLED = PlatformConfig(allowed_users=(ALICE,), group_policy="disabled")


def dm(user: str, **kw) -> InboundEvent:
    return InboundEvent("telegram", "e1", ChatType.DM, user, user, "hi", **kw)


def group(user: str, chat: str = GROUP, mentioned: bool = True, **kw) -> InboundEvent:
    kind = kw.pop("chat_type", ChatType.GROUP)
    return InboundEvent("telegram", "e1", kind, chat, user, "hi", mentioned=mentioned, **kw)


# (allowed, offer_pairing, silent)
ALLOWED = (True, False, False)
SILENT = (False, False, True)
PAIRING = (False, True, False)

CASES = [
    # id, event, policy, expected, a phrase the logged reason contains
    ("dm-allowlisted", dm(ALICE), ALLOWLIST, ALLOWED, "allowed_users"),
    ("dm-unknown-with-allowlist-silent", dm(STRANGER), ALLOWLIST, SILENT, "allowlist"),
    ("dm-unknown-without-allowlist-pairing", dm(STRANGER), NO_ALLOWLIST, PAIRING, "pairing"),
    ("dm-approved-by-pairing", dm(PAIRED), NO_ALLOWLIST, ALLOWED, "pairing"),
    ("dm-approved-with-allowlist", dm(PAIRED), ALLOWLIST, ALLOWED, "pairing"),
    ("dm-global-allowed", dm(GLOBAL), ALLOWLIST, ALLOWED, "gateway.allowed_users"),
    ("dm-allow-all-users", dm(STRANGER), ALL_USERS, ALLOWED, "allow_all_users"),
    ("group-allowed-chat", group(ALICE), ALLOWLIST, ALLOWED, "allowed_users"),
    ("group-approved-user", group(PAIRED), ALLOWLIST, ALLOWED, "pairing"),
    ("group-global-user", group(GLOBAL), ALLOWLIST, ALLOWED, "gateway"),
    ("group-chat-not-allowed", group(ALICE, OTHER_GROUP), ALLOWLIST, SILENT, "allowed_chats"),
    ("group-unknown-sender", group(STRANGER), ALLOWLIST, SILENT, "unknown user"),
    ("group-unknown-no-pairing", group(STRANGER), NO_ALLOWLIST, SILENT, "unknown user"),
    ("group-allow-all-users", group(STRANGER), ALL_USERS, ALLOWED, "allow_all_users"),
    ("group-open-any-chat", group(ALICE, OTHER_GROUP), OPEN, ALLOWED, "open"),
    ("group-open-unknown-sender", group(STRANGER, OTHER_GROUP), OPEN, SILENT, "unknown user"),
    ("group-open-allow-all", group(STRANGER, OTHER_GROUP), OPEN_ALL, ALLOWED, "allow_all"),
    ("group-disabled", group(ALICE), DISABLED, SILENT, "disabled"),
    (
        "channel-allowed",
        group(ALICE, chat_type=ChatType.CHANNEL),
        ALLOWLIST,
        ALLOWED,
        "channel",
    ),
    (
        "channel-not-allowed",
        group(ALICE, OTHER_GROUP, chat_type=ChatType.CHANNEL),
        ALLOWLIST,
        SILENT,
        "channel not in allowed_chats",
    ),
]


@pytest.mark.parametrize(
    ("event", "policy", "expected", "reason"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_decision(event, policy, expected, reason):
    decision = decide(event, policy, approved=(PAIRED,), global_allowed=(f"telegram:{GLOBAL}",))
    assert (decision.allowed, decision.offer_pairing, decision.silent) == expected, decision
    assert reason in decision.reason


def test_default_deny_with_nothing_configured():
    """No settings, no approvals: a group message is refused and the DM gets only a code."""
    policy = PlatformConfig()
    assert not decide(group(ALICE), policy, frozenset(), frozenset()).allowed
    first = decide(dm(ALICE), policy, frozenset(), frozenset())
    assert (first.allowed, first.offer_pairing) == (False, True)


def test_refusals_never_answered_in_groups():
    """Whatever the reason, a refused group or channel message is silent and offers no code."""
    for event, policy, *_ in (case[1:] for case in CASES):
        decision = decide(event, policy, (PAIRED,), (GLOBAL,))
        if event.chat_type != ChatType.DM and not decision.allowed:
            assert decision.silent and not decision.offer_pairing, decision
