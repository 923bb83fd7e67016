"""A press as the Mattermost server posts it, read by inbound.press_event: the token
covers the command and where it was shown, so what keys the press is what it says."""

from __future__ import annotations

from hermes.adapters.mattermost.inbound import action_key, action_token, press_event

KEY = action_key("mm-bot-token")


def press(trigger: str, user: str = "ann", post: str = "post1") -> dict:
    token = action_token(KEY, "/approve 7", "dm-ann", "", "dm")
    context = {"command": "/approve 7", "root": "", "kind": "dm", "token": token}
    return {"user_id": user, "channel_id": "dm-ann", "post_id": post, "trigger_id": trigger,
            "context": context}  # fmt: skip


def test_a_replayed_press_is_the_same_event_whatever_its_trigger():
    first = press_event(press("trigger1"), KEY, "mattermost")
    replayed = press_event(press("chosen-by-the-sender"), KEY, "mattermost")
    assert first is not None and replayed is not None
    assert replayed.event_id == first.event_id  # the journal admits it once
    other = press_event(press("trigger1", user="bob"), KEY, "mattermost")
    assert other is not None and other.event_id != first.event_id
    assert press_event(press("trigger1", post=""), KEY, "mattermost") is None
