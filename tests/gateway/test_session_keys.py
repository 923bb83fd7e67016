"""Session keys as spec/gateway.md describes them: DMs, groups per user, threads, scope."""

from __future__ import annotations

import pytest

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.config import GatewayConfig
from hermes.gateway.session_keys import session_key


def event(chat_type=ChatType.DM, chat="c1", user="u1", thread=None, scope=None, platform="tg"):
    return InboundEvent(platform, "e1", chat_type, chat, user, "hi", scope_id=scope,
                        thread_id=thread)  # fmt: skip


PER_USER = GatewayConfig()  # group_sessions_per_user true, thread_sessions_per_user false
SHARED = GatewayConfig(group_sessions_per_user=False)
THREAD_PER_USER = GatewayConfig(thread_sessions_per_user=True)


@pytest.mark.parametrize(
    ("message", "config", "key"),
    [
        (event(), PER_USER, "agent:main:tg:dm:c1"),
        (event(chat=""), PER_USER, "agent:main:tg:dm:u1"),  # no chat id: the sender
        (event(thread="t9"), PER_USER, "agent:main:tg:dm:c1:t9"),
        (event(ChatType.GROUP), PER_USER, "agent:main:tg:group:c1:u1"),
        (event(ChatType.GROUP, user="u2"), PER_USER, "agent:main:tg:group:c1:u2"),
        (event(ChatType.GROUP), SHARED, "agent:main:tg:group:c1"),
        (event(ChatType.GROUP, thread="t9"), PER_USER, "agent:main:tg:group:c1:t9"),
        (event(ChatType.GROUP, thread="t9", user="u2"), PER_USER, "agent:main:tg:group:c1:t9"),
        (event(ChatType.GROUP, thread="t9"), THREAD_PER_USER, "agent:main:tg:group:c1:t9:u1"),
        (event(ChatType.CHANNEL, scope="T1", platform="slack"), PER_USER,
         "agent:main:slack:channel:T1:c1:u1"),
        (event(ChatType.DM, scope="T1", platform="slack"), PER_USER, "agent:main:slack:dm:T1:c1"),
    ],
    ids=["dm", "dm-no-chat", "dm-thread", "group-per-user", "group-other-user", "group-shared",
         "thread-shared", "thread-shared-other-user", "thread-per-user", "slack-scope",
         "slack-dm-scope"],
)  # fmt: skip
def test_session_keys(message, config, key):
    assert session_key(message, config) == key
