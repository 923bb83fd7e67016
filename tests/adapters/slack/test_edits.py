"""Edits on Slack: the Slack adapter in this process (tests/adapters/inprocess.py) against
the fake Slack. A SendRequest with `edit_of` is a `chat.update` of that message: its text
replaced (escaped as a send's), its buttons as the request says (sent as `blocks`, `[]`
when there are none, since Slack keeps the old blocks otherwise), answered
Sent(edit_of); a message that cannot be edited is Permanent(missing), a 429 RetryAfter
with Slack's Retry-After."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from hermes.adapters.contract import Permanent, RetryAfter, SendRequest, Sent, Target
from hermes.adapters.slack.adapter import SlackAdapter
from hermes.adapters.slack.config import SlackConfig
from hermes.config import Secrets
from hermes.gateway.approvals import buttons
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.serving import in_thread
from tests.adapters.slack.serving import APP_VAR, BOT_VAR
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, TEAM_ID, FakeSlack

APPROVAL = buttons("3f9a1c")  # the approval prompt's
THREAD = "1699999999.000100"  # the thread the turn is in (older than any fake ts)
TARGET = Target("slack", "C5", THREAD, TEAM_ID)


@asynccontextmanager
async def slack_adapter(slack: FakeSlack) -> AsyncIterator[Running]:
    config = SlackConfig(token_env=BOT_VAR, app_token_env=APP_VAR, base_url=slack.url,
                         idle_timeout=3)  # fmt: skip
    secrets = Secrets({BOT_VAR: BOT_TOKEN, APP_VAR: APP_TOKEN}, frozenset())
    async with running(SlackAdapter, "slack", config, secrets, Admissions()) as run:
        await in_thread(slack.wait_connections, 1)
        yield run


async def first(run: Running, text: str, **fields: Any) -> str:
    """Send `text` to TARGET as a new message; its ts."""
    sent = await run.send(SendRequest(TARGET, text, "k0", **fields))
    assert isinstance(sent, Sent) and sent.message_id is not None
    return sent.message_id


def edit(ts: str, text: str, key: str, **fields: Any) -> SendRequest:
    return SendRequest(TARGET, text, key, edit_of=ts, **fields)


def commands(message: dict[str, Any]) -> list[str]:
    return [element["value"] for block in message.get("blocks") or ()
            if block["type"] == "actions" for element in block["elements"]]  # fmt: skip


def updates(slack: FakeSlack) -> list[dict[str, Any]]:
    return [c["params"] for c in slack.calls if c["method"] == "chat.update"]


@pytest.mark.timeout(60)
async def test_an_edit_replaces_the_text_of_the_message(slack):
    async with slack_adapter(slack) as run:
        ts = await first(run, "The answer so")
        grown = await run.send(edit(ts, "The answer so far <is> & grows", "k1", reply_to="9.9"))
        same = await run.send(edit(ts, "The answer so far <is> & grows", "k2"))  # not modified
        other = await first(run, "a second message")
    assert grown == Sent(ts) and same == Sent(ts)  # Slack has no "not modified": ok
    [shown, second] = slack.messages_in("C5")
    escaped = "The answer so far &lt;is&gt; &amp; grows"
    assert (shown["ts"], shown["text"], shown["thread_ts"]) == (ts, escaped, THREAD)
    assert html.unescape(shown["text"]) == "The answer so far <is> & grows"
    assert "blocks" not in shown and shown["edited"]["user"] == "UBOT"
    assert (second["ts"], second["text"]) == (other, "a second message")
    assert [(e["ts"], e["text"], e["blocks"]) for e in slack.edits] == [(ts, escaped, [])] * 2
    assert updates(slack) == [{"channel": "C5", "ts": ts, "text": escaped, "blocks": []}] * 2
    assert len(slack.sent) == 2 and slack.refused == []  # an edit is no new message


@pytest.mark.timeout(60)
async def test_buttons_are_kept_or_removed_as_the_request_says(slack):
    async with slack_adapter(slack) as run:
        ts = await first(run, "Run `sudo ls`?", buttons=APPROVAL)
        kept = await run.send(edit(ts, "Run `sudo ls` in /srv?", "k1", buttons=APPROVAL))
        [now] = slack.messages_in("C5")
        pressed = slack.press(ts, "Deny")  # the buttons of the edited message work
        removed = await run.send(edit(ts, "Approved: `sudo ls` runs now.", "k2"))
    assert kept == Sent(ts) and removed == Sent(ts)
    assert now["blocks"][0]["text"]["text"] == "Run `sudo ls` in /srv?"
    assert commands(now) == ["/approve 3f9a1c", "/approve 3f9a1c always", "/deny 3f9a1c"]
    assert slack.payload(pressed)["actions"][0]["value"] == "/deny 3f9a1c"
    [after] = slack.messages_in("C5")
    assert after["text"] == "Approved: `sudo ls` runs now." and "blocks" not in after
    with pytest.raises(LookupError, match="no button"):
        slack.press(ts, "Approve")  # gone with the blocks
    assert [commands({"blocks": e["blocks"]}) for e in slack.edits] == [commands(now), []]


@pytest.mark.timeout(60)
async def test_a_message_that_cannot_be_edited_is_permanent_missing(slack):
    async with slack_adapter(slack) as run:
        ts = await first(run, "hello")
        theirs = slack.message("a user's", channel="C5", channel_type="channel")
        users_ts = slack.payload(theirs)["event"]["ts"]
        unknown = await run.send(edit("1.000001", "x", "k1"))
        not_ours = await run.send(edit(users_ts, "x", "k2"))
        slack.fail("chat.update", "edit_window_closed", channel="C5")
        too_old = await run.send(edit(ts, "x", "k3"))
        too_long = await run.send(edit(ts, "<" * 10_001, "k4"))  # 40,004 escaped
        slack.delete_message(ts)
        deleted = await run.send(edit(ts, "x", "k5"))
    assert unknown == Permanent("chat.update: message_not_found", missing=True)
    assert not_ours == Permanent("chat.update: cant_update_message", missing=True)
    assert too_old == Permanent("chat.update: edit_window_closed", missing=True)
    assert too_long == Permanent("chat.update: msg_too_long")  # as a send's: not missing
    assert deleted == Permanent("chat.update: message_not_found", missing=True)
    assert slack.edits == [] and slack.messages_in("C5") == []


@pytest.mark.timeout(60)
async def test_a_429_on_an_edit_is_retry_after_its_seconds(slack):
    async with slack_adapter(slack) as run:
        ts = await first(run, "hello")
        slack.fail("chat.update", "ratelimited", retry_after=7)
        limited = await run.send(edit(ts, "hello again", "k1"))
        slack.fail("chat.update", "internal_error", status=500)
        broken = await run.send(edit(ts, "hello again", "k1"))
        again = await run.send(edit(ts, "hello again", "k1"))
    assert limited == RetryAfter(7.0, "chat.update: ratelimited (HTTP 429)")
    assert broken == RetryAfter(None, "chat.update: internal_error (HTTP 500)")
    assert again == Sent(ts) and slack.rate_limited == 1
    assert [m["text"] for m in slack.messages_in("C5")] == ["hello again"]
    assert len(slack.edits) == 1
