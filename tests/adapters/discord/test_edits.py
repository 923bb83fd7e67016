"""Edits on Discord: the Discord adapter in this process (tests/adapters/discord/
inprocess.py) against the fake Discord. A SendRequest with `edit_of` is a PATCH of that
message: its content replaced, its components as the request's buttons say (`[]` when
there are none, so an earlier state's buttons go away), answered Sent(edit_of); a
message gone or not the bot's is Permanent(missing), a 429 RetryAfter with Discord's
retry_after, other failures as for a send."""

from __future__ import annotations

from typing import Any

import pytest

from hermes.adapters.contract import Permanent, RetryAfter, SendRequest, Sent, Target
from hermes.adapters.discord.components import button_row
from hermes.gateway.approvals import buttons
from tests.adapters.discord.inprocess import NAME, running_discord
from tests.adapters.inprocess import Admissions, Running
from tests.adapters.serving import in_thread
from tests.fakes.discord import FakeDiscord

APPROVAL = buttons("3f9a1c")  # the approval prompt's
ROW, _ = button_row(APPROVAL)
GUILD, CHANNEL = "500", "3001"
TARGET = Target(NAME, CHANNEL, None, GUILD)


@pytest.fixture
def discord():
    with FakeDiscord(heartbeat_interval=0.2) as fake:
        yield fake
        assert fake.internal_errors == []


async def first(run: Running, text: str, **fields: Any) -> str:
    """Send `text` to TARGET as a new message; its id."""
    sent = await run.send(SendRequest(TARGET, text, "k0", **fields))
    assert isinstance(sent, Sent) and sent.message_id is not None
    return sent.message_id


def edit(message_id: str, text: str, key: str, **fields: Any) -> SendRequest:
    return SendRequest(TARGET, text, key, edit_of=message_id, **fields)


@pytest.mark.timeout(60)
async def test_an_edit_replaces_the_content_and_the_buttons_as_asked(discord):
    async with running_discord(discord, Admissions()) as run:
        await in_thread(discord.wait_settled)
        message_id = await first(run, "The answer so", buttons=APPROVAL)
        grown = await run.send(edit(message_id, "The answer so far", "k1", buttons=APPROVAL,
                                    reply_to="42"))  # fmt: skip
        kept = discord.messages_in(CHANNEL)
        bare = await run.send(edit(message_id, "The answer, **whole**", "k2", plain=True))
        same = await run.send(edit(message_id, "The answer, **whole**", "k3"))
        other = await first(run, "a second message")
    assert grown == bare == same == Sent(message_id)  # an identical edit is a 200 too
    assert [(m["content"], m["components"]) for m in kept] == [("The answer so far", ROW)]
    shown, second = discord.messages_in(CHANNEL)
    assert (shown["id"], shown["content"]) == (message_id, "The answer, **whole**")
    assert shown["components"] == [] and shown["edited_timestamp"] is not None
    assert (second["id"], second["content"]) == (other, "a second message")
    edits = discord.edits
    assert [(e["channel_id"], e["message_id"]) for e in edits] == [(CHANNEL, message_id)] * 3
    # the buttons sent again, then `[]` to take them away
    assert [(e["content"], e["components"]) for e in edits] == [
        ("The answer so far", ROW), ("The answer, **whole**", []),
        ("The answer, **whole**", []),
    ]  # fmt: skip
    assert len(discord.sent) == 2 and discord.refused == []  # an edit is no new message
    patches = [c for c in discord.calls if c["verb"] == "PATCH"]
    assert {c["path"] for c in patches} == {f"/api/v10/channels/{CHANNEL}/messages/{message_id}"}


@pytest.mark.timeout(60)
async def test_a_message_gone_or_not_the_bots_is_permanent_missing(discord):
    async with running_discord(discord, Admissions()) as run:
        await in_thread(discord.wait_settled)
        unknown = await run.send(edit("123456", "text", "k1"))
        theirs = discord.message("a user's", guild_id=GUILD, channel_id=CHANNEL)
        not_ours = await run.send(edit(theirs, "text", "k2"))
        message_id = await first(run, "soon deleted")
        discord.delete_message(message_id)
        deleted = await run.send(edit(message_id, "text", "k3"))
        kept_id = await first(run, "kept")
        too_long = await run.send(edit(kept_id, "x" * 2001, "k4"))
        discord.fail(403, 50013, "Missing Permissions", channel=CHANNEL, route="edits")
        forbidden = await run.send(edit(kept_id, "text", "k5"))
    assert unknown == Permanent("404 Unknown Message", missing=True)
    assert not_ours == Permanent("403 Cannot edit a message authored by another user",
                                 missing=True)  # fmt: skip
    assert deleted == Permanent("404 Unknown Message", missing=True)
    assert too_long == Permanent("400 Invalid Form Body")  # refused, yet not missing
    assert forbidden == Permanent("403 Missing Permissions")
    assert [r["code"] for r in discord.refused] == [10008, 50005, 10008, 50035, 50013]
    assert discord.edits == []
    assert [m["content"] for m in discord.messages_in(CHANNEL)] == ["kept"]


@pytest.mark.timeout(60)
async def test_a_429_on_an_edit_is_retry_after_its_seconds(discord):
    async with running_discord(discord, Admissions()) as run:
        await in_thread(discord.wait_settled)
        message_id = await first(run, "The answer so")
        discord.rate_limit(CHANNEL, retry_after=2.5, route="edits")
        limited = await run.send(edit(message_id, "The answer so far", "k1"))
        discord.rate_limit(retry_after=0.75, global_=True, route="edits")
        everything = await run.send(edit(message_id, "The answer so far", "k2"))
        discord.fail(502, 0, "Bad Gateway", route="edits")
        passing = await run.send(edit(message_id, "The answer so far", "k3"))
        done = await run.send(edit(message_id, "The answer so far", "k4"))
    assert limited == RetryAfter(2.5, "429 You are being rate limited.")
    assert everything == RetryAfter(0.75, "429 You are being rate limited.", scope_wide=True)
    assert passing == RetryAfter(None, "502 Bad Gateway")
    assert done == Sent(message_id) and discord.rate_limited == 2
    assert [e["content"] for e in discord.edits] == ["The answer so far"]
    assert [m["content"] for m in discord.messages_in(CHANNEL)] == ["The answer so far"]
