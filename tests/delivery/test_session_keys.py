"""Session keys as spec/gateway.md describes them: DMs, groups per user, threads, scope."""

from __future__ import annotations

import pytest

from hermes.adapters.contract import ChatType, InboundEvent, Target
from hermes.delivery.session_keys import Keying, session_key


def event(chat_type=ChatType.DM, chat="c1", user="u1", thread=None, scope=None, platform="tg"):
    return InboundEvent(platform, "e1", chat_type, chat, user, "hi", scope_id=scope,
                        thread_id=thread)  # fmt: skip


PER_USER = Keying()  # groups' and threads' sessions per user
SHARED = Keying(frozenset({"tg"}))  # tg's groups: groups.sessions: shared
SHARED_THREADS = Keying(thread_per_user=False)


@pytest.mark.parametrize(
    ("message", "config", "key"),
    [
        (event(), PER_USER, "agent:main:tg:dm:c1"),
        (event(chat=""), PER_USER, "agent:main:tg:dm:user:u1"),  # no chat id: the sender
        (event(thread="t9"), PER_USER, "agent:main:tg:dm:c1:thread:t9"),
        (event(ChatType.GROUP), PER_USER, "agent:main:tg:group:c1:user:u1"),
        (event(ChatType.GROUP, user="u2"), PER_USER, "agent:main:tg:group:c1:user:u2"),
        (event(ChatType.GROUP), SHARED, "agent:main:tg:group:c1"),
        (event(ChatType.GROUP, thread="t9"), SHARED_THREADS, "agent:main:tg:group:c1:thread:t9"),
        (event(ChatType.GROUP, thread="t9", user="u2"), SHARED_THREADS,
         "agent:main:tg:group:c1:thread:t9"),
        (event(ChatType.GROUP, thread="t9"), PER_USER,
         "agent:main:tg:group:c1:thread:t9:user:u1"),
        (event(ChatType.CHANNEL, scope="T1", platform="slack"), PER_USER,
         "agent:main:slack:channel:T1:c1:user:u1"),
        (event(ChatType.DM, scope="T1", platform="slack"), PER_USER, "agent:main:slack:dm:T1:c1"),
    ],
    ids=["dm", "dm-no-chat", "dm-thread", "group-per-user", "group-other-user", "group-shared",
         "thread-shared", "thread-shared-other-user", "thread-per-user", "slack-scope",
         "slack-dm-scope"],
)  # fmt: skip
def test_session_keys(message, config, key):
    assert session_key(message.target(), message.chat_type, message.user_id, config) == key


@pytest.mark.parametrize(
    ("chat_type", "where", "config"),
    [(ChatType.GROUP, Target("tg", "c1"), PER_USER),
     (ChatType.GROUP, Target("tg", "c1", "t9"), PER_USER),
     (ChatType.DM, Target("tg", ""), PER_USER)],
)  # fmt: skip
def test_no_key_where_it_needs_a_user_and_there_is_none(chat_type, where, config):
    assert session_key(where, chat_type, None, config) is None


def test_a_shared_thread_needs_no_user():
    key = session_key(Target("tg", "c1", "t9"), ChatType.GROUP, None, SHARED_THREADS)
    assert key == "agent:main:tg:group:c1:thread:t9"


def test_a_topic_whose_id_is_a_users_id_is_not_that_users_session():
    topic = session_key(Target("tg", "c1", "42"), ChatType.GROUP, "7", SHARED_THREADS)
    user = session_key(Target("tg", "c1"), ChatType.GROUP, "42", PER_USER)
    shared_topic = session_key(Target("tg", "c1", "42"), ChatType.GROUP, "7", SHARED_THREADS)
    assert topic == shared_topic != user
    assert session_key(Target("tg", "c1"), ChatType.GROUP, "42", SHARED) != topic
