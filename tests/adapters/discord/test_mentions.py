"""Mentions on Discord: what the model writes pings nobody. Every create and edit the
adapter sends carries `allowed_mentions` with nothing to parse, so an answer saying
@everyone, @here, `<@123>` or `<@&456>` stays text; a reply keeps the reply ping of the
person it answers (`replied_user`). Read from what the fake Discord received and whom
it says each message pings (its `mention_everyone`, `mentions`, `mention_roles`)."""

from __future__ import annotations

from typing import Any

import pytest

from hermes.adapters.contract import OutFile, SendRequest, Sent, Target
from hermes.gateway.approvals import buttons
from tests.adapters.discord.inprocess import NAME, running_discord
from tests.adapters.inprocess import Admissions
from tests.adapters.serving import in_thread
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai import text_answer

GUILD, CHANNEL, ASKER = "500", "3001", "777"
LOUD = "@everyone and @here: <@123> please page <@&456>, and <@!124> too"
NO_PINGS = {"parse": []}
REPLY_PING = {"parse": [], "replied_user": True}


@pytest.fixture
def discord():
    with FakeDiscord(heartbeat_interval=0.2) as fake:
        yield fake
        assert fake.internal_errors == []


def pinged(message: dict[str, Any]) -> tuple[bool, list[str], list[str]]:
    """Whom the fake says a message pings: everyone?, users, roles."""
    users = [user["id"] for user in message["mentions"]]
    return message["mention_everyone"], users, message["mention_roles"]


@pytest.mark.timeout(60)
async def test_texts_files_prompts_and_edits_ping_nobody_but_the_replied_asker(
    discord: FakeDiscord, tmp_path
):
    chart = tmp_path / "chart.txt"
    chart.write_bytes(b"the chart")
    file = OutFile(str(chart), "chart.txt", "text/plain", chart.stat().st_size)
    target = Target(NAME, CHANNEL, None, GUILD)
    admissions = Admissions()
    async with running_discord(discord, admissions) as run:
        await in_thread(discord.wait_settled)
        asked = discord.message("who is on call?", guild_id=GUILD, channel_id=CHANNEL,
                                author_id=ASKER, mentions_bot=True)  # fmt: skip
        await admissions.wait_for(asked)
        reply = await run.send(SendRequest(target, LOUD, "k1", reply_to=asked))
        prompt = await run.send(SendRequest(target, LOUD, "k2", buttons=buttons("3f9a1c")))
        with_file = await run.send(SendRequest(target, LOUD, "k3", reply_to=asked, file=file))
        assert isinstance(prompt, Sent) and prompt.message_id is not None
        edited = await run.send(SendRequest(target, LOUD + "!", "k4", edit_of=prompt.message_id))
        user = {"id": ASKER, "username": "ann"}
        discord.dispatch("INTERACTION_CREATE", {"id": "902", "token": "t2", "type": 2,
                                                "application_id": "1", "channel_id": CHANNEL,
                                                "user": user, "data": {"name": "ask"}})  # fmt: skip
        [slash] = await in_thread(discord.wait_callbacks, 1)
    assert all(isinstance(result, Sent) for result in (reply, prompt, with_file, edited))
    assert discord.refused == []
    # whom each message pings: the asker by the reply ping, nobody the text names
    ours = [m for m in discord.messages_in(CHANNEL) if m["id"] != asked]
    assert [pinged(m) for m in ours] == [
        (False, [ASKER], []), (False, [], []), (False, [ASKER], []),
    ]  # fmt: skip
    # what Discord received: every create, the multipart one's payload_json too, and the edit
    assert [(s["content"], s["allowed_mentions"]) for s in discord.sent] == [
        (LOUD, REPLY_PING), (LOUD, NO_PINGS), (LOUD, REPLY_PING),
    ]  # fmt: skip
    assert discord.sent[1]["components"] and len(discord.uploads) == 1
    [edit] = discord.edits
    assert (edit["content"], edit["allowed_mentions"]) == (LOUD + "!", NO_PINGS)
    assert slash["data"]["allowed_mentions"] == NO_PINGS


@pytest.mark.timeout(60)
async def test_an_answer_saying_everyone_and_a_user_pings_only_the_asker(serve, model, discord):
    """End to end: the model's answer names @everyone and `<@123>`; the reply hermes sends
    carries no mention but the reply ping of the person who asked."""
    model.script(text_answer(LOUD))
    serve.start()
    await in_thread(discord.wait_identifies, 1)
    asked = discord.message("who is on call?", guild_id=GUILD, channel_id=CHANNEL,
                            author_id=ASKER, mentions_bot=True)  # fmt: skip
    [sent] = await in_thread(discord.wait_sent, 1, 30.0)
    serve.stop()
    [answer] = [m for m in discord.messages_in(CHANNEL) if m["id"] == sent["id"]]
    assert pinged(answer) == (False, [ASKER], [])
    assert (sent["content"], sent["message_reference"]["message_id"]) == (LOUD, asked)
    assert sent["allowed_mentions"] == REPLY_PING
