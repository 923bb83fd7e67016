"""Session keys: which conversation a message in a chat belongs to.

    agent:<profile>:<platform>:<chat_type>[:<scope>]:<chat>[:thread:<thread>][:user:<user>]

A DM is keyed by its chat (the sender stands in only when there is no chat
id), then its thread. In a group or channel: the chat, then the thread; the
sender is added when the platform's `groups.sessions` is `per_user` (the
default) and the message is not in a thread, and inside a thread when `thread_sessions_per_user`
(default true: a thread shared by an owner and a user would put the user's
words in the owner's conversation). A workspace or
guild (scope) goes before the chat id: Slack's channel ids are unique only
within their workspace. A thread and a user are labelled, so a topic whose id
equals a user's id is never that user's session.

The router keys inbound events with it; delivery (its lowest user) keys the sessions a cron
brief seeds, so a reply resolves to the very session the brief was written to.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping

import attrs

from hermes.adapters.contract import ChatType, Target
from hermes.adapters.settings import GatewayConfig, PlatformConfig

PROFILE = "main"


@attrs.frozen
class Keying:
    """What config says about keys: the platforms whose groups are one conversation for
    everyone (`groups.sessions: shared`), and whether a thread is each user's."""

    shared_groups: frozenset[str] = frozenset()
    thread_per_user: bool = True

    @classmethod
    def of(cls, platforms: Mapping[str, PlatformConfig], gateway: GatewayConfig) -> Keying:
        shared = frozenset(n for n, p in platforms.items() if p.groups.sessions == "shared")
        return cls(shared, gateway.thread_sessions_per_user)


PER_USER = Keying()
"""The default keying: every group's conversations per user, and every thread's."""


def session_key(
    where: Target,
    chat_type: ChatType,
    user_id: str | None,
    keying: Keying,
    profile: str = PROFILE,
) -> str | None:
    """The key of `user_id`'s conversation at `where`; None where the key needs a user
    and there is none (a per-user group session nobody's message resolves to)."""
    parts = ["agent", profile, where.platform, str(chat_type)]
    if where.scope_id:
        parts.append(where.scope_id)
    if chat_type is ChatType.DM:
        if where.chat_id:
            parts.append(where.chat_id)
        elif user_id:
            parts += ["user", user_id]
        else:
            return None
        if where.thread_id:
            parts += ["thread", where.thread_id]
        return ":".join(parts)
    parts.append(where.chat_id)
    if where.thread_id:
        parts += ["thread", where.thread_id]
    if not shared(where, chat_type, keying):
        if not user_id:
            return None
        parts += ["user", user_id]
    return ":".join(parts)


def shared(where: Target, chat_type: ChatType, keying: Keying) -> bool:
    """Whether the conversation at `where` is one for every user of its chat (its key
    names no user): a group's or a thread's, where config turns per-user sessions off."""
    if chat_type is ChatType.DM:
        return False
    if where.thread_id:
        return not keying.thread_per_user
    return where.platform in keying.shared_groups


def new_session_id(platform: str) -> str:
    return f"{platform}_{time.strftime('%Y%m%d_%H%M%S')}_{secrets.token_hex(3)}"
