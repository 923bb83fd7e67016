"""Small actors the kernel tests drive."""

from __future__ import annotations

from typing import Any

import trio

from hermes.actors.actor import Actor


class Boom(Exception):
    """What a Probe raises when told to crash."""


class Probe(Actor):
    """Echoes calls; 'crash' crashes it, 'exit' ends it normally, ('sleep', s) takes s seconds."""

    def __init__(self, name: str | None = None, journal: list[str] | None = None) -> None:
        super().__init__(name)
        self.journal = journal if journal is not None else []

    async def on_start(self) -> None:
        self.journal.append(f"start {self.name}")

    async def handle(self, msg: Any) -> Any:
        if msg == "crash":
            raise Boom(self.name)
        if msg == "exit":
            self.stop()
            return None
        if msg == "fail":
            raise ValueError(f"{self.name} refused")
        if isinstance(msg, tuple) and msg[0] == "sleep":
            await trio.sleep(msg[1])
            return f"slept {msg[1]}"
        return msg

    async def flush(self) -> None:
        self.journal.append(f"flush {self.name}")

    def stop_intake(self) -> None:
        if not self._intake_closed:
            self.journal.append(f"intake {self.name}")
        super().stop_intake()
