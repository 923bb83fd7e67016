"""Session keys: which conversation an inbound message belongs to.

    agent:<profile>:<platform>:<chat_type>[:<scope>]:<chat>[:<thread>][:<user>]

A DM is keyed by its chat (the sender stands in only when there is no chat
id), then its thread. In a group or channel: the chat, then the thread; the
sender is added when `group_sessions_per_user` (default true) and the
message is not in a thread, and inside a thread only when
`thread_sessions_per_user` (threads are shared by default). A workspace or
guild (scope) goes before the chat id: Slack's channel ids are unique only
within their workspace.
"""

from __future__ import annotations

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.config import GatewayConfig

PROFILE = "main"


def session_key(event: InboundEvent, config: GatewayConfig, profile: str = PROFILE) -> str:
    parts = ["agent", profile, event.platform, str(event.chat_type)]
    if event.scope_id:
        parts.append(event.scope_id)
    if event.chat_type is ChatType.DM:
        parts.append(event.chat_id or event.user_id)
        if event.thread_id:
            parts.append(event.thread_id)
        return ":".join(parts)
    parts.append(event.chat_id)
    if event.thread_id:
        parts.append(event.thread_id)
        if config.thread_sessions_per_user:
            parts.append(event.user_id)
    elif config.group_sessions_per_user:
        parts.append(event.user_id)
    return ":".join(parts)
