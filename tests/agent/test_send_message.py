"""send_message queues into the outbox: the target is checked, the text split, the rows
returned, and the outbox told."""

from __future__ import annotations

import json

import attrs
import pytest
import trio
import trio.lowlevel

from hermes.actors.actor import Actor
from hermes.agent.tools.base import ToolError
from hermes.agent.tools.send_message import SendMessageTool
from hermes.delivery.outbox import Enqueued


class Nudged(Actor):
    def __init__(self) -> None:
        super().__init__("outbox")
        self.nudged = trio.Event()

    async def handle(self, msg):
        assert isinstance(msg, Enqueued)
        self.nudged.set()


async def test_send_message_queues_chunks_and_tells_the_outbox(ctx):
    outbox = Nudged()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(outbox.run)
        ctx = attrs.evolve(ctx, outbox=address, platforms=frozenset({"local", "discord"}))
        text = "word " * 600  # 3000 characters: two Discord messages
        answer = json.loads(await SendMessageTool()({"target": "discord:c9:t1", "text": text},
                                                    ctx))  # fmt: skip
        assert answer["queued"] and len(answer["outbox_rows"]) == 2
        rows = await ctx.db.read(lambda conn: conn.execute(
            "SELECT platform, chat_id, thread_id, kind, state, origin, length(text) FROM outbox"
            " ORDER BY id").fetchall())  # fmt: skip
        assert [r[:6] for r in rows] == [("discord", "c9", "t1", "send", "pending", "s1")] * 2
        assert all(r[6] <= 2000 for r in rows)
        with trio.fail_after(30):
            await outbox.nudged.wait()
        outbox.stop()


@pytest.mark.parametrize(
    "target, problem",
    [("nowhere", "platform:chat_id"), ("slack:c1", "no platform 'slack' is configured")],
)
async def test_send_message_refuses_a_bad_target(ctx, target, problem):
    with pytest.raises(ToolError, match=problem):
        await SendMessageTool()({"target": target, "text": "hi"}, ctx)
    assert await ctx.db.read(lambda conn: conn.execute("SELECT count(*) FROM outbox").get) == 0
