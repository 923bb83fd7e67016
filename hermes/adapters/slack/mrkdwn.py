"""Text as Slack shows it: its mrkdwn needs only &, < and > escaped (a `<` would
start a link or a mention); the rest is shown as written."""

from __future__ import annotations


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
