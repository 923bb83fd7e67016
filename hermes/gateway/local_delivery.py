"""Cron deliveries to the local endpoint: a connected client of the origin session
receives the brief, and the brief is mirrored into that session when planned."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.adapters.local_ws import Deliver
from hermes.cron.delivery import PlannedTarget, SendResult
from hermes.state.db import Db
from hermes.state.messages import NewMessage, append_message
from hermes.state.registry import Registry
from hermes.state.sessions import NewSession, ensure_session


class LocalDeliverer:
    def __init__(
        self, endpoint: Callable[[], Address | None], registry: Registry, state_db: Path
    ) -> None:
        self.endpoint = endpoint
        self.registry = registry
        self.state_db = state_db

    async def send(self, target: PlannedTarget, text: str) -> SendResult:
        platform, session_id = target.target.platform, target.target.chat_id
        if platform != "local" or session_id is None:
            return SendResult(False, error=f"no adapter is connected for {platform}")
        if target.mirror:
            async with Db(self.registry, self.state_db) as db:
                await db.write(ensure_session, NewSession(session_id, source="local"))
                await db.write(append_message, NewMessage(session_id, "assistant", text))
        params = {"session": session_id, "text": text, **target.meta}
        endpoint = self.endpoint()  # looked up now: the endpoint restarts on its own
        try:
            reached = (
                await endpoint.call(Deliver(session_id, "cron.brief", params)) if endpoint else 0
            )
        except ActorStopped:
            reached = 0
        if not reached:
            return SendResult(False, error=f"no client of session {session_id} is connected")
        return SendResult(True, message_id=f"{session_id}:{reached}")
