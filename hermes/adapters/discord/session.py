"""The Discord gateway session hermes resumes, kept in state.db between incarnations.

A new incarnation of the adapter (after a crash or a missed deadline) and a restart
of hermes resume the session instead of identifying anew: Discord replays what it
dispatched since the kept sequence, so nothing sent meanwhile is lost, and no
IDENTIFY is spent (Discord caps them per day). The sequence kept is one whose
dispatch, and every one before it, was admitted: it may lag (a resume then replays
more, and admission recognises what it already has), never lead.
"""

from __future__ import annotations

import json
import logging

import attrs
import trio

from hermes.adapters.cursors import Cursors

log = logging.getLogger(__name__)


@attrs.define
class Session:
    """A live gateway session: its id, where to resume it, the bot it is for (READY
    says it once: a resumed session needs it to see mentions), and the sequence of the
    last dispatch admitted."""

    id: str
    resume_url: str
    bot_id: str
    seq: int | None = None


class KeptSession:
    """The adapter's current session (`current`), kept in state.db under one cursor key
    as JSON ("" once it is forgotten). Without cursors it is kept in memory only."""

    def __init__(self, cursors: Cursors | None, key: str) -> None:
        self.cursors = cursors
        self.key = key
        self.current: Session | None = None
        self._written: str | None = None
        self._lock = trio.Lock()  # the heartbeat and the reader both keep it

    async def load(self) -> Session | None:
        """The session an earlier incarnation kept, as `current` (None: none, or one
        that cannot be read, which is as good as none: the adapter identifies)."""
        if self.cursors is None:
            return None
        text = await self.cursors.get(self.key) or ""
        self._written = text
        try:
            kept = json.loads(text) if text else None
            self.current = None if kept is None else Session(**kept)
        except (TypeError, ValueError) as exc:
            log.warning("%s: the kept Discord session is unreadable: %r", self.key, exc)
            self.current = None
        return self.current

    async def keep(self) -> None:
        """Write `current` as it is now, if it changed since the last write."""
        if self.cursors is None:
            return
        async with self._lock:  # written in order: a later state never goes under an earlier
            text = "" if self.current is None else json.dumps(attrs.asdict(self.current))
            if text != self._written:
                await self.cursors.put(self.key, text)
                self._written = text

    async def forget(self) -> None:
        """Discord ended the session: the next socket identifies anew."""
        self.current = None
        await self.keep()
