"""The HTML a Matrix answer carries (`formatted_body`), as the homeserver receives it: an
image the answer's Markdown names is a link to it, never an `<img>` a client would load
when the message is opened (a tracking pixel, telling its server who read it and when)."""

from __future__ import annotations

import pytest

from hermes.adapters.contract import SendRequest, Sent, Target
from tests.adapters.inprocess import Admissions
from tests.adapters.matrix.test_adapter import begun, matrix
from tests.fakes.matrix import ALICE, HERMES, FakeMatrix

ANSWER = (
    "Here: ![the chart](https://tracker.example/p.png) and [the source](https://example.org/)"
    " [![build](https://tracker.example/badge.png)](https://example.org/ci)"
)


@pytest.mark.timeout(30)
async def test_a_markdown_image_goes_as_a_link_in_a_reply_and_in_its_edit(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES], direct=True)
    async with matrix(hs, Admissions()) as run:
        await begun(hs)
        sent = await run.send(SendRequest(Target("matrix", room), ANSWER, "reply:1:0"))
        assert isinstance(sent, Sent)
        edit = SendRequest(Target("matrix", room), ANSWER + " (more)", "reply:1:0:edit",
                           edit_of=sent.message_id)  # fmt: skip
        assert isinstance(await run.send(edit), Sent)
    reply, edited = (s["content"] for s in hs.sent)
    for html in (reply["formatted_body"], edited["formatted_body"],
                 edited["m.new_content"]["formatted_body"]):  # fmt: skip
        assert '<a href="https://tracker.example/p.png">the chart</a>' in html
        assert '<a href="https://example.org/">the source</a>' in html
        assert '<a href="https://example.org/ci">build</a>' in html  # a link in a link: its text
        assert "<img" not in html
    assert reply["body"] == ANSWER  # the text as the model wrote it
