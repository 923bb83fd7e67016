"""A chat's hourly media allowance (`media.per_chat_hour_mb`), on the trio clock: what a
chat fetched in the last hour counts against it; past it, its attachments are not fetched
(its adapter is not even asked) and the turn's line says why; an hour after, they are
fetched again. Another chat has an allowance of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from hermes.actors.actor import Actor
from hermes.adapters.contract import ChatType, Fetch, Fetched, InboundEvent
from hermes.adapters.media import save
from hermes.agent.settings import MediaConfig
from hermes.agent.speech import Speech
from hermes.gateway.inbound_media import HOUR, MediaIntake

MB = 1024 * 1024
PIECE = 600 * 1024  # two of them are past a 1 MB allowance
REFUSED = "[1 attachment(s) not fetched: this chat sent over 1 MB of files in the last hour]"


class Files(Actor):
    """An adapter's side of a `Fetch`: each attachment it is asked for (a reference
    "name:size") saved into its cache at once, as a platform's download would."""

    def __init__(self, cache: Path) -> None:
        super().__init__("files")
        self.cache = cache
        self.asked: list[tuple[str, ...]] = []

    async def handle(self, msg: Any) -> Any:
        if not isinstance(msg, Fetch):
            raise TypeError(f"files cannot handle {type(msg).__name__}")
        self.asked.append(msg.attachments)
        saved = []
        for ref in msg.attachments:
            name, size = ref.rsplit(":", 1)
            saved.append(save(self.cache, name, bytes(int(size))))
        msg.reply.set(Fetched(tuple(saved), ()))
        return None


def message(chat: str, n: int) -> InboundEvent:
    return InboundEvent("telegram", f"{chat}-{n}", ChatType.DM, chat, chat, "see attached",
                        attachments=(f"file-{chat}-{n}.bin:{PIECE}",))  # fmt: skip


async def test_past_the_hourly_allowance_nothing_is_fetched_until_the_hour_is_over(
    autojump_clock, tmp_path
):
    files = Files(tmp_path / "cache" / "telegram")
    given = {}  # what each message's turn was given for its files, as text
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(files.run)
        intake = MediaIntake(Speech(MediaConfig(per_chat_hour_mb=1.0)), lambda _: adapter)
        assert intake.per_hour == MB

        async def turn(chat: str, n: int) -> None:
            fetch = intake.for_events([message(chat, n)])  # as the turn fetches them
            assert fetch is not None
            given[f"{chat}-{n}"] = str(await fetch())

        await turn("7", 1)
        await trio.sleep(60)
        await turn("7", 2)  # 600 KB fetched in the hour so far: under 1 MB
        await trio.sleep(60)
        await turn("7", 3)  # 1.2 MB in the hour
        await turn("8", 1)  # another chat's own allowance
        await trio.sleep(HOUR - 121)  # a second before the hour since the first is over
        await turn("7", 4)
        await trio.sleep(2)  # the first has left the hour: 600 KB in it now
        await turn("7", 5)
        nursery.cancel_scope.cancel()
    asked = [ref.split(":")[0] for refs in files.asked for ref in refs]
    assert asked == ["file-7-1.bin", "file-7-2.bin", "file-8-1.bin", "file-7-5.bin"]
    refused = {key for key, text in given.items() if REFUSED in text}
    assert refused == {"7-3", "7-4"}  # the line says why
    for key in ("7-1", "7-2", "8-1", "7-5"):
        assert f"file-{key}.bin" in given[key]
    assert sorted(p.name for p in files.cache.iterdir()) == [
        f"file-{key}.bin" for key in ("7-1", "7-2", "7-5", "8-1")
    ]
