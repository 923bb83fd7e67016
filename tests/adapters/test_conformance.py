"""The adapter conformance kit: what every adapter and its fake must show, parametrized over
the adapters: the local endpoint, the OpenAI-compatible API, Telegram, Slack, Discord,
WhatsApp, email, Matrix, Signal, Teams, Mattermost, iMessage and SMS (built in, against
their fakes in tests/fakes/; the API's client is the official `openai` package). The API is
a server like the local
endpoint (the first part's items that are not about connections run on it; a request
sent again with its Idempotency-Key is its replay), and has no seam of its own for the
second part (it acknowledges nothing to a platform: its answer is the acknowledgement).
WhatsApp, Teams and SMS (Twilio) are pushed to (webhooks):
they have no connection to keep alive, so the items about connections (deafness, a token
refused at connect, bots) are the connected platforms' only; their deliveries come again,
like the local endpoint's retries, so the replay step runs on them; and anyone can post to
their listener, so a delivery that is not proven (a wrong signature) must be refused and
admit nothing.

Through `hermes serve` as a real process (the first part): each driver speaks to serve
the way its platform's users do (the local endpoint: a WebSocket client; the chat
platforms: messages injected into their fakes) and reads what the user got back. A kit
item runs on every adapter whose platform has the thing it tests: the local endpoint is
a server (no progress deadline, no token to refuse, no bots), so the liveness items run
on the chat platforms; Telegram never delivers an update it was told was received
again, nor Slack an acknowledged envelope (a repeat comes only across a restart, which
the kill item covers), nor Discord a dispatch outside a Resume, so the replay step runs
where the platform replays. "Deaf" is each platform's way of going silent: a hung poll,
a half-open socket, a gateway that stops acknowledging heartbeats.

Email is connected (an IMAP connection in IDLE, its NOOPs the progress); its deliveries
come again (a copy of a mail with the same Message-ID); a bot is a program's mail
(Auto-Submitted); deaf is an IMAP session that stops answering.

Matrix is connected (a /sync long poll, each answer the progress), in a DM in the clear
and in an encrypted one (Alice on a client that encrypts as Element does); a bot marks
its messages `m.notice`; deaf is a homeserver that holds syncs and never answers. Its
seam acknowledges by the next sync's `since`. Signal runs the items through serve and
the deadline (the daemon's event stream, its keep-alives the progress; a replayed
message comes again); it has no bots and no token (the daemon holds the account), and
nothing is acknowledged to the daemon (a reconnect names the last admitted event: the
Signal tests show it).

iMessage (BlueBubbles) is pushed to, as WhatsApp and Teams are, by a webhook whose
token is in its URL; the server never delivers again, but the adapter's catch-up (its
message query from the last admitted message's date) brings what the webhook did not, so
a replay is recognised and its seam acknowledges by a 200 or by a catch-up past it.

Mattermost is connected (a WebSocket, its events and pongs the progress; deaf is a
half-open socket); a bot's post says `from_bot`. Its socket replays nothing: a new
connection catches up by REST from a margin before the last admitted post, so its
seam acknowledges by the `since` of a catch-up (tests/adapters/mattermost shows the
catch-up through serve).

The seam's own promises (the second part) are shown on each chat platform's adapter in
this process (tests/adapters/inprocess.py) with an `admit` the kit holds open while it
watches the fake: nothing is acknowledged to the platform (Telegram's offset, Slack's
envelope, Discord's sequence) before its admission commits, however long that takes, and
the progress deadline waits for it; an admission that failed leaves the event to come
again; a refused token is fatal at once, and one refused while sends wait keeps them
(the rows wait, nothing is dead-lettered) and ends the adapter with the reason; a rate
limit on receiving (Telegram's getUpdates 429) waits as long as the platform said.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from email.utils import make_msgid
from typing import Any
from unittest.mock import ANY
from urllib.parse import urlsplit

import pytest
import trio
import trio.testing

from hermes.actors.clock import Clock
from hermes.actors.link import BACKING_OFF, FATAL, LIVE
from hermes.adapters import contract
from hermes.adapters.base import AdapterFactory
from hermes.adapters.contract import (
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Target,
    Unconfirmed,
)
from hermes.adapters.cursors import Cursors
from hermes.adapters.email.adapter import EmailAdapter
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.imessage.adapter import CATCH_UP_MARGIN_MS as IMESSAGE_MARGIN_MS
from hermes.adapters.imessage.adapter import IMessageAdapter
from hermes.adapters.imessage.config import IMessageConfig
from hermes.adapters.matrix.adapter import MatrixAdapter
from hermes.adapters.matrix.config import MatrixConfig
from hermes.adapters.mattermost.adapter import CATCH_UP_MARGIN_MS, MattermostAdapter
from hermes.adapters.mattermost.config import MattermostConfig
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.slack.adapter import SlackAdapter
from hermes.adapters.slack.config import SlackConfig
from hermes.adapters.sms.adapter import SmsAdapter
from hermes.adapters.sms.config import SmsConfig
from hermes.adapters.teams.adapter import TeamsAdapter
from hermes.adapters.teams.config import TeamsConfig
from hermes.adapters.telegram.adapter import TelegramAdapter
from hermes.adapters.telegram.config import TelegramConfig
from hermes.adapters.webhooks import WebhookListener
from hermes.adapters.whatsapp.adapter import WhatsAppAdapter
from hermes.adapters.whatsapp.config import WhatsAppConfig
from hermes.config import Secrets
from tests.adapters.api.serving import CLIENT as API_CLIENT
from tests.adapters.api.serving import ApiServe
from tests.adapters.discord.inprocess import QuickDiscord
from tests.adapters.discord.serving import TOKEN_VAR as DISCORD_VAR
from tests.adapters.discord.serving import DiscordServe
from tests.adapters.email.serving import PASSWORD_VAR as EMAIL_VAR
from tests.adapters.email.serving import TRUSTED as EMAIL_TRUSTED
from tests.adapters.email.serving import VOUCHED as EMAIL_VOUCHED
from tests.adapters.email.serving import EmailServe, MailServers, mail
from tests.adapters.imessage.serving import PASSWORD_VAR as IMESSAGE_VAR
from tests.adapters.imessage.serving import WEBHOOK_TOKEN as IMESSAGE_WEBHOOK_TOKEN
from tests.adapters.imessage.serving import WEBHOOK_VAR as IMESSAGE_WEBHOOK_VAR
from tests.adapters.imessage.serving import IMessageServe
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.matrix.serving import TOKEN_VAR as MATRIX_VAR
from tests.adapters.matrix.serving import MatrixServe, element
from tests.adapters.mattermost.serving import TOKEN_VAR as MATTERMOST_VAR
from tests.adapters.mattermost.serving import MattermostServe
from tests.adapters.relay import HeldRelay
from tests.adapters.serving import Serve, in_thread, serving, until_line
from tests.adapters.signal.serving import KEEPALIVE as SIGNAL_KEEPALIVE
from tests.adapters.signal.serving import SignalServe
from tests.adapters.slack.serving import APP_VAR as SLACK_APP_VAR
from tests.adapters.slack.serving import BOT_VAR as SLACK_BOT_VAR
from tests.adapters.slack.serving import SlackServe
from tests.adapters.sms.serving import ANN as SMS_USER
from tests.adapters.sms.serving import SmsServe
from tests.adapters.teams.serving import ANN as TEAMS_USER
from tests.adapters.teams.serving import TeamsServe
from tests.adapters.telegram.serving import TOKEN as TELEGRAM_TOKEN
from tests.adapters.telegram.serving import TOKEN_VAR as TELEGRAM_VAR
from tests.adapters.telegram.serving import TelegramServe
from tests.adapters.whatsapp.serving import ANN as WHATSAPP_USER
from tests.adapters.whatsapp.serving import WhatsAppServe
from tests.fakes.bluebubbles import ANN as IMESSAGE_USER
from tests.fakes.bluebubbles import PASSWORD as IMESSAGE_PASSWORD
from tests.fakes.bluebubbles import FakeBlueBubbles
from tests.fakes.bluebubbles import dm as imessage_dm
from tests.fakes.discord import TOKEN as DISCORD_TOKEN
from tests.fakes.discord import FakeDiscord
from tests.fakes.dovecot import DOVECOT
from tests.fakes.mailserver import ALICE_ADDRESS as EMAIL_USER
from tests.fakes.mailserver import HERMES_ADDRESS as EMAIL_BOT
from tests.fakes.mailserver import HERMES_PASSWORD as EMAIL_PASSWORD
from tests.fakes.mailserver import mail_servers, make_mail
from tests.fakes.matrix import ALICE as MATRIX_USER
from tests.fakes.matrix import HERMES as MATRIX_BOT
from tests.fakes.matrix import HERMES_TOKEN as MATRIX_TOKEN
from tests.fakes.matrix import FakeMatrix
from tests.fakes.matrix_client import Received
from tests.fakes.mattermost import BOT_TOKEN as MATTERMOST_TOKEN
from tests.fakes.mattermost import FakeMattermost
from tests.fakes.openai import text_answer
from tests.fakes.signal import ALICE as SIGNAL_USER
from tests.fakes.signal import FakeSignal
from tests.fakes.slack import APP_TOKEN as SLACK_APP_TOKEN
from tests.fakes.slack import BOT_TOKEN as SLACK_TOKEN
from tests.fakes.slack import FakeSlack
from tests.fakes.teams import APP_ID as TEAMS_APP_ID
from tests.fakes.teams import SECRET as TEAMS_SECRET
from tests.fakes.teams import FakeTeams
from tests.fakes.teams import personal as teams_personal
from tests.fakes.telegram import FakeTelegram, parse_markdown_v2
from tests.fakes.twilio import ACCOUNT_SID as TWILIO_ACCOUNT
from tests.fakes.twilio import AUTH_TOKEN as TWILIO_TOKEN
from tests.fakes.twilio import NUMBER as TWILIO_NUMBER
from tests.fakes.twilio import PUBLIC_URL as TWILIO_PUBLIC_URL
from tests.fakes.twilio import FakeTwilio
from tests.fakes.whatsapp import APP_SECRET as WHATSAPP_SECRET
from tests.fakes.whatsapp import PHONE_NUMBER_ID as WHATSAPP_NUMBER
from tests.fakes.whatsapp import TOKEN as WHATSAPP_TOKEN
from tests.fakes.whatsapp import VERIFY_TOKEN as WHATSAPP_VERIFY
from tests.fakes.whatsapp import FakeWhatsApp


class LocalDriver:
    """A user of `hermes chat`: one chat.send per message, named by its message id."""

    name = "local"
    replays = True

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.answers: list[str] = []

    async def say(self, text: str, ref: str) -> None:
        reply = await self.serve.rpc("chat.send", {"text": text, "session": "kit",
                                                   "message_id": ref})  # fmt: skip
        result = reply["result"]
        if result["status"] != "duplicate":
            self.answers.append(result["text"])

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def say_ignoring_the_end() -> None:
            try:
                await self.say(text, ref)
            except Exception:  # serve is killed under it
                pass

        nursery.start_soon(say_ignoring_the_end)

    async def say_again(self, text: str, ref: str) -> None:
        await self.say(text, ref)

    def received(self) -> list[str]:
        return self.answers


class ApiDriver:
    """A client of the OpenAI-compatible API (the official `openai` package): a request per
    message, in one conversation, its Idempotency-Key the message's ref."""

    name = "api"
    replays = True

    def __init__(self, serve: ApiServe) -> None:
        self.serve = serve
        self.answers: list[str] = []
        self.by_ref: dict[str, str] = {}  # each message's answer, by its Idempotency-Key

    def _ask(self, text: str, ref: str) -> str:
        reply = self.serve.client().chat.completions.create(
            model="hermes", messages=[{"role": "user", "content": text}],
            extra_headers={"Idempotency-Key": ref, "X-Hermes-Session": "kit"},
        )  # fmt: skip
        return reply.choices[0].message.content

    async def say(self, text: str, ref: str) -> None:
        self.by_ref[ref] = await in_thread(self._ask, text, ref)
        self.answers.append(self.by_ref[ref])

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def say_ignoring_the_end() -> None:
            with contextlib.suppress(Exception):  # serve is killed under it
                await self.say(text, ref)

        nursery.start_soon(say_ignoring_the_end)

    async def say_again(self, text: str, ref: str) -> None:
        """Sent again: the answer of its own one turn, not another turn's."""
        assert await in_thread(self._ask, text, ref) == self.by_ref[ref]

    def received(self) -> list[str]:
        return self.answers


class TelegramDriver:
    """A Telegram user: messages injected into the fake Bot API, in a private chat."""

    name = "telegram"
    replays = False  # a confirmed update is never delivered again
    deaf_restarts = True
    token = TELEGRAM_TOKEN
    fatal = "401"
    revoked_by_drop = False

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.tg: FakeTelegram = serve.platform

    async def say(self, text: str, ref: str) -> None:
        before = len(self.tg.sent)
        self.tg.message(text)
        await in_thread(self.tg.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        self.tg.message(text)

    def received(self) -> list[str]:
        return [parse_markdown_v2(s["text"]) for s in self.tg.sent]  # as the user sees it

    def polls(self) -> int:
        return self.tg.polls

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.tg.wait_polls(count, timeout)

    def deafen(self) -> None:
        self.tg.hang_polls()

    def undeafen(self) -> None:
        self.tg.unhang_polls()

    def revoke_token(self) -> None:
        self.tg.revoke_token()

    async def say_as_bot(self, text: str) -> None:
        update = self.tg.message(text, is_bot=True)
        await in_thread(self.tg.wait_acked, update, 30.0)


class SlackDriver:
    """A Slack user: DMs injected into the fake as Socket Mode events."""

    name = "slack"
    replays = False  # an acknowledged envelope is never delivered again
    deaf_restarts = True
    token = SLACK_TOKEN
    fatal = "link_disabled"
    revoked_by_drop = False

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.slack: FakeSlack = serve.platform

    async def say(self, text: str, ref: str) -> None:
        before = len(self.slack.sent)
        self.slack.message(text)
        await in_thread(self.slack.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        self.slack.message(text)

    def received(self) -> list[str]:
        return [s["text"] for s in self.slack.sent]

    def polls(self) -> int:
        return self.slack.connections_opened

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.slack.wait_connections(count, timeout)

    def deafen(self) -> None:
        self.slack.half_open()

    def undeafen(self) -> None:
        """A half-open socket stays so; the new one is live."""

    def revoke_token(self) -> None:
        self.slack.disable_link()
        self.slack.disconnect("link_disabled")

    async def say_as_bot(self, text: str) -> None:
        event = self.slack.message(text, bot_id="B9")
        await in_thread(self.slack.wait_acked, event, 30.0)


class MattermostDriver:
    """A Mattermost user: DMs injected into the fake, pushed on its WebSocket. The socket
    replays nothing; the catch-up brings again only posts of the margin before the last
    admitted one, which the adapter knows (tests/adapters/mattermost shows it); a user
    speaks once serve is connected, as the catch-up of the first start is not its test."""

    name = "mattermost"
    replays = False
    deaf_restarts = True
    token = MATTERMOST_TOKEN
    fatal = "session_expired"
    revoked_by_drop = False  # the sockets close, the reconnect's users/me is refused

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.mm: FakeMattermost = serve.platform

    async def say(self, text: str, ref: str) -> None:
        await in_thread(self.mm.wait_authenticated, 1)
        before = len(self.mm.sent)
        self.mm.message(text)
        await in_thread(self.mm.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def once_connected() -> None:
            await in_thread(self.mm.wait_authenticated, 1)
            self.mm.message(text)

        nursery.start_soon(once_connected)

    def received(self) -> list[str]:
        return [s["message"] for s in self.mm.sent]

    def polls(self) -> int:
        return len(self.mm.sockets)

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.mm.wait_authenticated(count, timeout)

    def deafen(self) -> None:
        self.mm.half_open()

    def undeafen(self) -> None:
        """A half-open socket stays so; the new one is live."""

    def revoke_token(self) -> None:
        self.mm.revoke_token()

    async def say_as_bot(self, text: str) -> None:
        await in_thread(self.mm.wait_authenticated, 1)
        self.mm.message(text, bot=True)  # the socket keeps order: seen before what follows


class DiscordDriver:
    """A Discord user: DMs injected into the fake Gateway as MESSAGE_CREATE."""

    name = "discord"
    replays = False  # a dispatch is delivered again only within a Resume
    deaf_restarts = False  # a silent gateway is a zombie, resumed in the connection
    token = DISCORD_TOKEN
    fatal = "4004"
    revoked_by_drop = False

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.discord: FakeDiscord = serve.platform

    async def say(self, text: str, ref: str) -> None:
        await in_thread(self.discord.wait_identifies, 1)  # Discord keeps nothing for no one
        before = len(self.discord.sent)
        self.discord.message(text)
        await in_thread(self.discord.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def once_identified() -> None:
            await in_thread(self.discord.wait_identifies, 1)
            self.discord.message(text)

        nursery.start_soon(once_identified)

    def received(self) -> list[str]:
        return [s["content"] for s in self.discord.sent]

    def polls(self) -> int:
        return self.discord.connections

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.discord.wait_connections(count, timeout)

    def deafen(self) -> None:
        self.discord.zombie()

    def undeafen(self) -> None:
        """The zombie socket is gone; the new one is live."""

    def revoke_token(self) -> None:
        self.discord.close(4004)

    async def say_as_bot(self, text: str) -> None:
        before = len(self.discord.dispatches)
        self.discord.message(text, author_bot=True)
        await in_thread(
            self.discord.wait_until, lambda fake: len(fake.dispatches) > before, 30.0, "it"
        )


class WhatsAppDriver:
    """A WhatsApp user: messages the fake delivers to serve's webhook, signed as Meta's."""

    name = "whatsapp"
    replays = True  # Meta delivers again what was not answered 2xx (and may anyway)

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.wa: FakeWhatsApp = serve.platform
        self.wamids: dict[str, str] = {}  # the kit's ref -> the message's wamid

    async def say(self, text: str, ref: str) -> None:
        before = len(self.wa.sent)
        self.start_saying(None, text, ref)
        await in_thread(self.wa.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery | None, text: str, ref: str) -> None:
        self.wamids[ref] = self.wa.deliver_text(WHATSAPP_USER, text)

    async def say_again(self, text: str, ref: str) -> None:
        wamid = self.wamids[ref]
        again = self.wa.deliver_payload(self.wa.delivery(wamid)["payload"], key=f"{ref}-again")
        await in_thread(self.wa.wait_delivered, again)  # taken (200): recognised, or not

    def received(self) -> list[str]:
        return [s["text"] for s in self.wa.sent]


class TeamsDriver:
    """A Teams user in their personal chat with the bot: activities the fake delivers to
    serve's webhook, signed as the Bot Framework signs them."""

    name = "teams"
    replays = True  # the connector sends again what was not answered 2xx

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.teams: FakeTeams = serve.platform
        self.ids: dict[str, str] = {}  # the kit's ref -> the activity's id

    async def say(self, text: str, ref: str) -> None:
        before = len(self.teams.sent)
        self.start_saying(None, text, ref)
        await in_thread(self.teams.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery | None, text: str, ref: str) -> None:
        self.ids[ref] = self.teams.message(text, user=TEAMS_USER)

    async def say_again(self, text: str, ref: str) -> None:
        self.teams.deliver_again(self.ids[ref])
        [_, again] = await in_thread(self.teams.wait_attempts, self.ids[ref], 2)
        assert again["status_code"] == 200  # taken: recognised, or not

    def received(self) -> list[str]:
        return [s["text"] for s in self.teams.sent]


class IMessageDriver:
    """An iMessage user in their DM with hermes: messages the fake BlueBubbles delivers to
    serve's webhook, the token in its URL."""

    name = "imessage"
    replays = True  # a delivery may come again (a replay), and the catch-up brings each

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.bb: FakeBlueBubbles = serve.platform
        self.guids: dict[str, str] = {}  # the kit's ref -> the message's guid

    async def say(self, text: str, ref: str) -> None:
        before = len(self.bb.sent)
        self.start_saying(None, text, ref)
        await in_thread(self.bb.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery | None, text: str, ref: str) -> None:
        self.guids[ref] = self.bb.message(text, user=IMESSAGE_USER)

    async def say_again(self, text: str, ref: str) -> None:
        self.bb.deliver_again(self.guids[ref])
        again = await in_thread(self.bb.wait_delivered, self.guids[ref], 2)
        assert again["status_code"] == 200  # taken: recognised, or not

    def received(self) -> list[str]:
        return [s["message"] for s in self.bb.sent]


class SmsDriver:
    """An SMS user: texts the fake Twilio delivers to serve's webhook, signed over the
    public URL as Twilio signs them."""

    name = "sms"
    replays = True  # a MessageSid may come again (Twilio's retries of a delivery)

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.twilio: FakeTwilio = serve.platform
        self.sids: dict[str, str] = {}  # the kit's ref -> the message's MessageSid

    async def say(self, text: str, ref: str) -> None:
        before = len(self.twilio.sent)
        self.start_saying(None, text, ref)
        await in_thread(self.twilio.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery | None, text: str, ref: str) -> None:
        self.sids[ref] = self.twilio.message(text, SMS_USER)

    async def say_again(self, text: str, ref: str) -> None:
        self.twilio.deliver_again(self.sids[ref])
        [_, again] = await in_thread(self.twilio.wait_attempts, self.sids[ref], 2)
        assert again["status_code"] == 200  # taken: recognised, or not

    def received(self) -> list[str]:
        return [s["body"] for s in self.twilio.sent]


class EmailDriver:
    """An email user: mails delivered into hermes's INBOX on Dovecot, vouched for by the
    trusted receiving server; the answers are what the SMTP server took in."""

    name = "email"
    replays = True  # a copy of a mail (its Message-ID the same) may come again
    deaf_restarts = True
    token = EMAIL_PASSWORD
    fatal = "AUTHENTICATIONFAILED"
    revoked_by_drop = True  # a changed password: the session is dropped, the login refused

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.mail: MailServers = serve.platform
        self.raw: dict[str, bytes] = {}  # the kit's ref -> the mail as delivered

    def _deliver(self, text: str, ref: str, **headers: str) -> str:
        message_id = f"<{ref}@example.org>"
        self.raw[ref] = make_mail(EMAIL_USER, EMAIL_BOT, f"About {ref}", text,
                                  message_id=message_id, auth_results=EMAIL_VOUCHED,
                                  headers=headers)  # fmt: skip
        self.mail.imap.deliver(EMAIL_BOT, self.raw[ref])
        return message_id

    async def say(self, text: str, ref: str) -> None:
        before = len(self.mail.smtp.received)
        self._deliver(text, ref)
        await in_thread(self.mail.smtp.wait_received, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        self._deliver(text, ref)

    async def say_again(self, text: str, ref: str) -> None:
        self.mail.imap.deliver(EMAIL_BOT, self.raw[ref])  # read (flagged) again: recognised
        seen = functools.partial(self.mail.imap.wait_seen, EMAIL_BOT, f"<{ref}@example.org>",
                                 count=2, timeout=30.0)  # fmt: skip
        await in_thread(seen)

    def received(self) -> list[str]:
        return [m.text for m in self.mail.smtp.received]

    def polls(self) -> int:
        return self.mail.imap.logins(EMAIL_BOT)

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.mail.imap.wait_logins(EMAIL_BOT, count, timeout)

    def deafen(self) -> None:
        self.mail.deafen()

    def undeafen(self) -> None:
        """The frozen session stays so; a new login gets a live one."""

    def revoke_token(self) -> None:
        self.mail.imap.set_password(EMAIL_BOT, "changed by the user")
        self.mail.imap.kick(EMAIL_BOT)

    async def say_as_bot(self, text: str) -> None:
        """An out-of-office reply: a program's mail (RFC 3834), never answered."""
        message_id = self._deliver(text, "bot", **{"Auto-Submitted": "auto-replied"})
        seen = functools.partial(self.mail.imap.wait_seen, EMAIL_BOT, message_id, timeout=30.0)
        await in_thread(seen)


class MatrixDriver:
    """A Matrix user: Alice, in a DM with hermes on the fake homeserver, on a client that
    encrypts as Element does where the room is encrypted (this room is not). A sync's
    token moves past what it brought only once that is admitted; a bot marks its
    messages `m.notice`; deaf is a homeserver that holds syncs and never answers."""

    name = "matrix"
    replays = False  # an event comes again only in a batch replayed after a restart
    deaf_restarts = True
    token = MATRIX_TOKEN
    fatal = "M_UNKNOWN_TOKEN"
    revoked_by_drop = False
    encrypted = False

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.hs: FakeMatrix = serve.platform
        self.room = self.hs.create_room([MATRIX_USER, MATRIX_BOT], direct=True,
                                        encrypted=self.encrypted)  # fmt: skip
        self._alice = element(self.hs)
        self.alice = self._alice.__enter__()

    def close(self) -> None:
        self._alice.__exit__(None, None, None)

    async def _begun(self) -> None:
        """hermes's first sync was answered: what Alice says now is new to it."""
        await in_thread(functools.partial(self.hs.wait_syncs, 2, 30.0, user=MATRIX_BOT))

    async def say(self, text: str, ref: str) -> None:
        await self._begun()
        before = len(self.hs.sent)
        await in_thread(self.alice.send_text, self.room, text)
        await in_thread(functools.partial(self.hs.wait_sent, before + 2, 30.0))

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def once_begun() -> None:
            await self._begun()
            await in_thread(self.alice.send_text, self.room, text)

        nursery.start_soon(once_begun)

    def received(self) -> list[str]:
        self.alice.sync()
        return answers(self.alice.messages(self.room, sender=MATRIX_BOT))

    def polls(self) -> int:
        return sum(1 for s in self.hs.syncs if s["user"] == MATRIX_BOT)

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.hs.wait_syncs(count, timeout, user=MATRIX_BOT)

    def deafen(self) -> None:
        """Syncs go unanswered; once hermes's next one is held, it sends no more (a sync
        on its way as the homeserver went silent would count as a new connection's)."""
        self.hs.hang_syncs()
        self.hs.wait_held_syncs(1)

    def undeafen(self) -> None:
        self.hs.unhang_syncs()

    def revoke_token(self) -> None:
        self.hs.revoke_token(MATRIX_TOKEN)

    async def say_as_bot(self, text: str) -> None:
        await self._begun()
        polls = self.polls()
        notice = {"msgtype": "m.notice", "body": text}
        await in_thread(self.alice.send_event, self.room, "m.room.message", notice)
        await in_thread(self.wait_polls, polls + 1)  # the sync that brought it ended


class EncryptedMatrixDriver(MatrixDriver):
    """The same in an encrypted room: Alice's words reach hermes only through the room
    key her client shares, and she reads hermes's answers by the key it shares."""

    encrypted = True


def answers(messages: list[Received]) -> list[str]:
    """The texts as a user reads them: an edit (`m.replace`) shown in place of its
    original."""
    texts: dict[str, str] = {}
    for message in messages:
        relation = message.content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace" and relation.get("event_id") in texts:
            texts[relation["event_id"]] = message.content["m.new_content"]["body"]
        else:
            texts[message.event_id] = message.content["body"]
    return list(texts.values())


class SignalDriver:
    """A Signal user: Alice's messages reach the fake signal-cli daemon, which pushes them
    on its event stream (held on Signal's servers while serve is away); deaf is a daemon
    whose stream stops, keep-alives and all. Signal has no bots, and the daemon holds
    the account (no token to revoke): the connected items are not Signal's."""

    name = "signal"
    replays = True  # a message the daemon replays after a reconnect comes again
    deaf_restarts = True

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.daemon: FakeSignal = serve.platform
        self.envelopes: dict[str, dict[str, Any]] = {}  # the kit's ref -> what was said

    async def say(self, text: str, ref: str) -> None:
        before = len(self.daemon.sent)
        self.start_saying(None, text, ref)
        await in_thread(self.daemon.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery | None, text: str, ref: str) -> None:
        self.envelopes[ref] = self.daemon.message(SIGNAL_USER, text)

    async def say_again(self, text: str, ref: str) -> None:
        before = len(self.daemon.delivered)
        self.daemon.envelope(self.envelopes[ref])  # the same sender and timestamp
        await in_thread(self.daemon.wait_delivered, before + 1, 30.0)
        await in_thread(self.daemon.wait_open_streams, 1)

    def received(self) -> list[str]:
        return [s["message"] for s in self.daemon.sent]

    def polls(self) -> int:
        return self.daemon.connections

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.daemon.wait_connections(count, timeout)

    def deafen(self) -> None:
        self.daemon.deafen()

    def undeafen(self) -> None:
        self.daemon.undeafen()


@contextlib.contextmanager
def serve_on(name: str, home, model) -> Iterator[Serve]:
    """Serve on the test's home with `name`'s fake (the local endpoint: serve with no chat
    platform)."""
    if name == "local":
        with serving(Serve, None, home, model) as serve:
            yield serve
        return
    if name == "api":
        with serving(ApiServe, API_CLIENT, home, model) as serve:
            yield serve
        return
    if name == "email":
        with mail() as servers, serving(EmailServe, servers, home, model) as serve:
            yield serve
        return
    if name == "telegram":
        fake, harness = FakeTelegram(token=TELEGRAM_TOKEN), TelegramServe
    elif name == "slack":
        fake, harness = FakeSlack(), SlackServe
    elif name == "whatsapp":
        fake, harness = FakeWhatsApp(), WhatsAppServe
    elif name == "teams":
        fake, harness = FakeTeams(), TeamsServe
    elif name == "imessage":
        fake, harness = FakeBlueBubbles(), IMessageServe
    elif name == "sms":
        fake, harness = FakeTwilio(), SmsServe
    elif name.startswith("matrix"):
        fake, harness = FakeMatrix(), MatrixServe
    elif name == "signal":
        fake, harness = FakeSignal(keepalive=SIGNAL_KEEPALIVE), SignalServe
    elif name == "mattermost":
        fake, harness = FakeMattermost(), MattermostServe
    else:
        fake, harness = FakeDiscord(), DiscordServe
    with fake, serving(harness, fake, home, model) as serve:
        yield serve


DRIVERS = {"local": LocalDriver, "api": ApiDriver, "telegram": TelegramDriver, "slack": SlackDriver,
           "discord": DiscordDriver, "whatsapp": WhatsAppDriver, "teams": TeamsDriver,
           "email": EmailDriver, "matrix": MatrixDriver,
           "matrix-encrypted": EncryptedMatrixDriver, "signal": SignalDriver,
           "mattermost": MattermostDriver, "imessage": IMessageDriver,
           "sms": SmsDriver}  # fmt: skip
CONNECTED = (
    "telegram",
    "slack",
    "discord",
    "email",
    "matrix",
    "mattermost",
)  # a connection to keep, a token, bots
SYSTEM = {"email": (DOVECOT, ("dovecot-imapd",))}  # what a platform's servers need here


def require_servers(name: str, require_system) -> None:
    """Skip (or fail, in CI) where the platform's servers need a program this machine lacks."""
    if name in SYSTEM:
        program, packages = SYSTEM[name]
        require_system(program, packages=packages)


@pytest.fixture
def driven(require_system, home, model):
    """How a kit fixture serves on a platform: its system program first, where it has one."""

    @contextlib.contextmanager
    def on(name: str) -> Iterator[Any]:
        require_servers(name, require_system)
        with serve_on(name, home, model) as serve:
            driver = DRIVERS[name](serve)
            try:
                yield driver
            finally:
                if hasattr(driver, "close"):
                    driver.close()

    return on


@pytest.fixture(params=sorted(DRIVERS))
def driver(request, driven):
    with driven(request.param) as platform:
        yield platform


@pytest.fixture(params=CONNECTED)
def connected(request, driven):
    with driven(request.param) as platform:
        yield platform


@pytest.fixture(params=[n for n in (*CONNECTED, "signal") if DRIVERS[n].deaf_restarts])
def deaf(request, driven):
    """Where going deaf is caught by the progress deadline (Discord's gateway catches
    a silent connection by its heartbeats first: tests/adapters/discord)."""
    with driven(request.param) as platform:
        yield platform


@pytest.mark.timeout(90)
async def test_an_event_is_admitted_then_answered_and_a_duplicate_is_answered_once(model, driver):
    serve = driver.serve
    model.script(text_answer("hello back"))
    serve.start()
    await driver.say("hello", "m1")
    assert driver.received() == ["hello back"]
    [(platform, _, _)] = serve.journal()  # in the journal before it was acknowledged
    assert platform == driver.name
    if driver.replays:
        await driver.say_again("hello", "m1")  # delivered again: recognised, not answered
    serve.stop()
    assert [state for *_, state in serve.journal()] == ["answered"]
    assert driver.received() == ["hello back"]
    assert len(model.requests) == 1


@pytest.mark.timeout(120)
async def test_serve_killed_after_admission_answers_once_after_the_restart(model, driver):
    serve = driver.serve
    model.delay = 30.0  # the turn is in flight when serve is killed
    serve.start()
    async with trio.open_nursery() as nursery:
        driver.start_saying(nursery, "are you there?", "m1")
        await in_thread(model.wait_requests, 1)
        serve.kill()
    assert [state for *_, state in serve.journal()] == ["started"]
    model.delay = 0.0
    model.script(text_answer("yes, here"))
    serve.start()
    await in_thread(model.wait_requests, 2)  # resumed once
    log = serve.stop()  # the drain lets the resumed turn finish
    assert "resuming" in log
    assert serve.assistant_replies() == ["yes, here"]
    assert [state for *_, state in serve.journal()] == ["answered"]
    # The user sees it once, marked as after a restart (the local endpoint's and the API's
    # clients held the request that died: they send it again, tests/adapters/api).
    if driver.name not in ("local", "api"):
        assert driver.received() == ["(answered after hermes restarted) yes, here"]
    assert len(model.requests) == 2


@pytest.mark.timeout(90)
@pytest.mark.long
async def test_a_missed_progress_deadline_restarts_the_adapter_with_backoff(model, deaf):
    connected = deaf
    serve, name = connected.serve, connected.name
    serve.start()
    await in_thread(connected.wait_polls, 1)
    connected.deafen()  # polls are taken and never answered
    polls = connected.polls()
    await in_thread(until_line, serve.procs[-1], "no progress for")  # the deadline passed
    adapter = (await serve.status())[name]  # within the first backoff (1 s)
    assert adapter.detail["adapter"] == "backing off", adapter.detail
    assert "no progress for" in adapter.detail["reason"]
    await in_thread(connected.wait_polls, polls + 1, 30.0)  # a new connection polls again
    adapter = (await serve.status())[name]
    assert adapter.restarts >= 1
    connected.undeafen()
    model.script(text_answer("back"))
    await connected.say("hi", "m1")
    adapter = (await serve.status())[name]
    assert adapter.detail["adapter"] == "live"
    serve.stop()


@pytest.mark.timeout(90)
async def test_a_fatal_error_stops_the_restarts_and_says_why(model, connected):
    serve, name = connected.serve, connected.name
    serve.start()
    await in_thread(connected.wait_polls, 1)
    connected.revoke_token()
    await in_thread(until_line, serve.procs[-1], "not restarting")
    # The supervisor's decision, the kernel's rule for a transient child that ended
    # normally: nothing starts it again.
    await in_thread(until_line, serve.procs[-1], f"{name} ended by itself; not restarted")
    adapter = (await serve.status())[name]
    assert adapter.detail["adapter"] == "fatal" and connected.fatal in adapter.detail["reason"]
    # The platform says so on the live connection; email's server only drops it, and the
    # one reconnect is refused: one restart, then none.
    assert (await serve.status())[name].restarts == (1 if connected.revoked_by_drop else 0)
    serve.stop()
    log = (serve.home.logs / "hermes.log").read_text()
    assert connected.token not in log  # nor any URL with it


@pytest.mark.timeout(90)
async def test_a_bots_message_is_ignored(model, connected):
    serve = connected.serve
    serve.start()
    await connected.say_as_bot("I am a bot")
    model.script(text_answer("to the human"))
    await connected.say("and I am not", "m2")
    serve.stop()
    assert connected.received() == ["to the human"]
    states = [state for *_, state in serve.journal()]  # refused where it was admitted at all
    assert states in (["refused", "answered"], ["answered"])
    assert len(model.requests) == 1


# -- the seam, in this process: admission gates acknowledgement ---------------------------


class Seam:
    """A chat platform's adapter and its fake, for the kit items run in this process: how
    the platform shows that an event was acknowledged, and that it was not."""

    name: str
    adapter: AdapterFactory
    fake: Any
    chat: str  # a chat to send to
    send_path: bytes  # what a send's request says (tests/adapters/relay.py holds it)
    comes_again_while_held = False  # the platform delivers an unacknowledged event again
    pushed = False  # deliveries come to the webhook listener: no connection carries them
    says_how_long = True  # a rate-limited send says how long to wait (Retry-After)

    def __enter__(self) -> Seam:
        self.fake.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.fake.__exit__(*exc)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        """The adapter's config and secrets, its base_url the fake's unless given."""
        raise NotImplementedError

    def send_url(self) -> str:
        """Where the adapter's sends go (a relay may stand in front)."""
        return self.fake.url

    def wait_sent(self, count: int) -> None:
        """Until the platform took `count` sends."""
        self.fake.wait_sent(count)

    def sends_limited(self, seconds: float) -> None:
        """The next send is answered 429 with `seconds` to wait."""
        raise NotImplementedError

    def sends_failing(self) -> None:
        """The next send meets a passing fault (a 5xx)."""
        raise NotImplementedError

    def sends_refused(self) -> None:
        """The next send is refused for good (forbidden, no such chat)."""
        raise NotImplementedError

    def sends_unauthorized(self) -> None:
        """The next send is refused for its token (revoked while the send waited)."""
        raise NotImplementedError

    def sent(self) -> list[str]:
        """The texts the platform took, as its users read them."""
        raise NotImplementedError

    async def connected(self) -> None:
        """Until the adapter is connected and listening."""
        raise NotImplementedError

    def say(self, text: str) -> str:
        """A user's message; the event id its admission will carry."""
        raise NotImplementedError

    async def still_unacknowledged(self, event_id: str) -> None:
        """Show that the platform has not been told the event was received (waiting for
        what would follow an acknowledgement where the platform has such a thing)."""
        raise NotImplementedError

    async def acknowledged(self, event_id: str) -> None:
        """Until the platform was told the event was received."""
        raise NotImplementedError

    def never_connected(self) -> bool:
        """The adapter never got past the token check."""
        raise NotImplementedError

    def listening(self, port: int) -> None:
        """A pushed platform delivers to the listener on `port` from now on."""
        raise NotImplementedError

    def say_forged(self, text: str) -> str:
        """A pushed platform: a message delivered by someone who cannot prove it is the
        platform (a wrong signature); the event id it would be admitted under."""
        raise NotImplementedError

    async def refused(self, event_id: str) -> None:
        """A pushed platform: until the listener refused that delivery (4xx)."""
        raise NotImplementedError


class TelegramSeam(Seam):
    """Telegram's adapter on the fake Bot API (polls held 1 s). It acknowledges an update
    by a later poll's offset."""

    name = "telegram"
    adapter = TelegramAdapter
    chat = "1001"
    send_path = b"/sendMessage"

    def __init__(self, refusing: bool = False) -> None:
        token = "999:another-token" if refusing else TELEGRAM_TOKEN
        self.tg = self.fake = FakeTelegram(token=token)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        url = base_url or self.tg.url
        config = TelegramConfig(token_env=TELEGRAM_VAR, base_url=url, poll_timeout=1)
        return config, Secrets({TELEGRAM_VAR: TELEGRAM_TOKEN}, frozenset())

    def sends_limited(self, seconds: float) -> None:
        self.tg.fail("sendMessage", 429, retry_after=seconds)

    def sends_failing(self) -> None:
        self.tg.fail("sendMessage", 502)

    def sends_refused(self) -> None:
        self.tg.fail("sendMessage", 403)  # the user blocked the bot

    def sends_unauthorized(self) -> None:
        self.tg.fail("sendMessage", 401)

    def sent(self) -> list[str]:
        return [parse_markdown_v2(s["text"]) for s in self.tg.sent]

    async def connected(self) -> None:
        await in_thread(self.tg.wait_held_polls, 1)

    def say(self, text: str) -> str:
        return str(self.tg.message(text))  # the update_id

    async def still_unacknowledged(self, event_id: str) -> None:
        assert self.tg.acked < int(event_id) and int(event_id) in self.tg.pending

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(self.tg.wait_acked, int(event_id))

    def never_connected(self) -> bool:
        return self.tg.polls == 0

    def limit_receiving(self, retry_after: float) -> None:
        """The next poll is answered 429 with `retry_after`."""
        self.tg.fail("getUpdates", 429, retry_after=retry_after)

    async def receiving_limited(self) -> None:
        """Until that poll was answered."""
        await in_thread(functools.partial(self.tg.wait_errors, 1, method="getUpdates"))


class SlackSeam(Seam):
    """Slack's adapter on the fake's Socket Mode (an envelope unacknowledged for half a
    second comes again, as after Slack's 3 s)."""

    name = "slack"
    adapter = SlackAdapter
    comes_again_while_held = True
    chat = "D1"
    send_path = b"/chat.postMessage"

    def __init__(self, refusing: bool = False) -> None:
        bot = "xoxb-0002-0002-another-bot-token" if refusing else SLACK_TOKEN
        self.slack = self.fake = FakeSlack(ack_timeout=0.5, bot_token=bot)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        config = SlackConfig(token_env=SLACK_BOT_VAR, app_token_env=SLACK_APP_VAR,
                                base_url=base_url or self.slack.url, idle_timeout=3)  # fmt: skip
        tokens = {SLACK_BOT_VAR: SLACK_TOKEN, SLACK_APP_VAR: SLACK_APP_TOKEN}
        return config, Secrets(tokens, frozenset())

    def sends_limited(self, seconds: float) -> None:
        self.slack.fail("chat.postMessage", "ratelimited", retry_after=seconds)

    def sends_failing(self) -> None:
        self.slack.fail("chat.postMessage", "internal_error", status=500)

    def sends_refused(self) -> None:
        self.slack.fail("chat.postMessage", "channel_not_found")

    def sends_unauthorized(self) -> None:
        self.slack.fail("chat.postMessage", "token_revoked")

    def sent(self) -> list[str]:
        return [s["text"] for s in self.slack.sent]

    async def connected(self) -> None:
        await in_thread(self.slack.wait_connections, 1)

    def say(self, text: str) -> str:
        return self.slack.message(text)  # the payload's event_id

    async def still_unacknowledged(self, event_id: str) -> None:
        """Slack sends the envelope again: nobody acknowledged it."""
        await in_thread(functools.partial(self.slack.wait_deliveries, 2, event_id=event_id))
        assert event_id not in self.slack.acked

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(self.slack.wait_acked, event_id)

    def never_connected(self) -> bool:
        return self.slack.connections_opened == 0


class DiscordSeam(Seam):
    """Discord's adapter on the fake Gateway (heartbeats every 0.2 s). It acknowledges a
    dispatch by the sequence its heartbeats (and a Resume) carry."""

    name = "discord"
    adapter = QuickDiscord
    chat = "2001"
    send_path = b"/messages"

    def __init__(self, refusing: bool = False) -> None:
        token = "another-token" if refusing else DISCORD_TOKEN
        self.discord = self.fake = FakeDiscord(token, heartbeat_interval=0.2)
        self.beats = 0  # heartbeats before the last message was said

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        config = PlatformConfig(token_env=DISCORD_VAR, base_url=base_url or self.discord.url)
        return config, Secrets({DISCORD_VAR: DISCORD_TOKEN}, frozenset())

    def sends_limited(self, seconds: float) -> None:
        self.discord.rate_limit(retry_after=seconds)

    def sends_failing(self) -> None:
        self.discord.fail(502, 0, "Bad Gateway")

    def sends_refused(self) -> None:
        self.discord.fail(403, 50013, "Missing Permissions")

    def sends_unauthorized(self) -> None:
        self.discord.fail(401, 0, "401: Unauthorized")

    def sent(self) -> list[str]:
        return [s["content"] for s in self.discord.sent]

    async def connected(self) -> None:
        await in_thread(self.discord.wait_settled)

    def say(self, text: str) -> str:
        self.beats = len(self.discord.heartbeats)
        return self.discord.message(text)  # the message id

    @staticmethod
    def _seq(fake: FakeDiscord, message_id: str) -> int | None:
        """The sequence its dispatch carried (None: not dispatched yet)."""
        return next((d["s"] for d in fake.dispatches if d["id"] == message_id), None)

    async def still_unacknowledged(self, event_id: str) -> None:
        """Heartbeats go on, every one with a sequence short of the message's."""
        await in_thread(self.discord.wait_heartbeats, self.beats + 3)
        told = [h["d"] for h in self.discord.heartbeats[self.beats :]]
        assert max(told) < self._seq(self.discord, event_id), told

    async def acknowledged(self, event_id: str) -> None:
        def told(fake: FakeDiscord) -> bool:
            seq = self._seq(fake, event_id)
            return seq is not None and any((h["d"] or 0) >= seq for h in fake.heartbeats)

        wait = functools.partial(self.discord.wait_until, told, what=f"{event_id} acknowledged")
        await in_thread(wait)

    def never_connected(self) -> bool:
        return self.discord.connections == 0


class WhatsAppSeam(Seam):
    """WhatsApp's adapter behind a webhook listener in this process, on the fake Cloud
    API. It acknowledges a delivery by its 200; one not answered 2xx (a 503 past the
    listener's wait, a 500) Meta delivers again."""

    name = "whatsapp"
    adapter = WhatsAppAdapter
    chat = WHATSAPP_USER
    send_path = b"/messages"
    comes_again_while_held = True
    pushed = True
    says_how_long = False  # Meta's rate errors carry no wait: the outbox backs off

    def __init__(self, refusing: bool = False) -> None:
        token = "EAAG-another-token" if refusing else WHATSAPP_TOKEN
        self.wa = self.fake = FakeWhatsApp(token=token)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        url = f"{base_url}/v21.0" if base_url else self.wa.graph_url
        config = WhatsAppConfig(token_env="WA_TOKEN", app_secret_env="WA_SECRET",
                                verify_token_env="WA_VERIFY", base_url=url,
                                phone_number_id=WHATSAPP_NUMBER)  # fmt: skip
        secrets = {"WA_TOKEN": WHATSAPP_TOKEN, "WA_SECRET": WHATSAPP_SECRET,
                   "WA_VERIFY": WHATSAPP_VERIFY}  # fmt: skip
        return config, Secrets(secrets, frozenset())

    def listening(self, port: int) -> None:
        self.wa.configure(webhook_url=WhatsAppServe.webhook_url(port))

    def sends_limited(self, seconds: float) -> None:
        self.wa.fail(130429)

    def sends_failing(self) -> None:
        self.wa.fail(131000, status=500)  # "something went wrong"

    def sends_refused(self) -> None:
        self.wa.fail(100, status=400)  # an invalid parameter

    def sends_unauthorized(self) -> None:
        self.wa.fail(190, status=401)  # the access token expired or was revoked

    def sent(self) -> list[str]:
        return [s["text"] for s in self.wa.sent]

    async def connected(self) -> None:
        await in_thread(functools.partial(self.wa.wait_until, lambda f: f.number_lookups > 0,
                                          what="the number read"))  # fmt: skip

    def say(self, text: str) -> str:
        return self.wa.deliver_text(WHATSAPP_USER, text)  # the wamid

    async def still_unacknowledged(self, event_id: str) -> None:
        assert self.wa.delivery(event_id)["state"] != "acknowledged"

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(self.wa.wait_delivered, event_id)

    def never_connected(self) -> bool:
        return self.wa.number_lookups == 0

    def say_forged(self, text: str) -> str:
        return self.wa.deliver_text(WHATSAPP_USER, text, bad_signature=True)

    async def refused(self, event_id: str) -> None:
        await in_thread(functools.partial(self.wa.wait_until, lambda f: any(
            d["id"] == event_id and d["status_code"] == 403 for d in f.deliveries),
            what="the forgery refused"))  # fmt: skip


class TeamsSeam(Seam):
    """Teams's adapter behind a webhook listener in this process, on the fake Teams. It
    acknowledges an activity by its 200; one not answered 2xx the connector sends again.
    Its sends go to the configured connector (`base_url`): no activity named another."""

    name = "teams"
    adapter = TeamsAdapter
    chat = teams_personal(TEAMS_USER)
    send_path = b"/activities"
    comes_again_while_held = True
    pushed = True

    def __init__(self, refusing: bool = False) -> None:
        self.teams = self.fake = FakeTeams(secret="another-secret" if refusing else TEAMS_SECRET)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        teams = self.teams
        config = TeamsConfig(app_id=TEAMS_APP_ID, token_env="TEAMS_SECRET",
                             base_url=base_url or teams.service_url, login_url=teams.url,
                             openid_url=teams.openid_url)  # fmt: skip
        return config, Secrets({"TEAMS_SECRET": TEAMS_SECRET}, frozenset())

    def listening(self, port: int) -> None:
        self.teams.configure(webhook_url=TeamsServe.webhook_url(port))

    def sends_limited(self, seconds: float) -> None:
        self.teams.fail(429, retry_after=seconds)

    def sends_failing(self) -> None:
        self.teams.fail(502, "ServiceError")

    def sends_refused(self) -> None:
        self.teams.fail(403, "BotNotInConversationRoster")

    def sends_unauthorized(self) -> None:
        self.teams.revoke_secret()  # the token refused, and no new one for the secret

    def sent(self) -> list[str]:
        return [s["text"] for s in self.teams.sent]

    async def connected(self) -> None:
        await in_thread(functools.partial(self.teams.wait_until,
                                          lambda f: f.token_grants and f.metadata_fetches,
                                          what="the token and the keys"))  # fmt: skip

    def say(self, text: str) -> str:
        return f"{self.chat}/{self.teams.message(text, user=TEAMS_USER)}"  # the event id

    async def still_unacknowledged(self, event_id: str) -> None:
        activity = event_id.rsplit("/", 1)[1]
        assert all(d.get("status_code") != 200 for d in self.teams.deliveries
                   if d["id"] == activity)  # fmt: skip

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(self.teams.wait_delivered, event_id.rsplit("/", 1)[1])

    def never_connected(self) -> bool:
        return self.teams.token_grants == 0

    def say_forged(self, text: str) -> str:
        return f"{self.chat}/{self.teams.message(text, user=TEAMS_USER, forge='signature')}"

    async def refused(self, event_id: str) -> None:
        [attempt] = await in_thread(self.teams.wait_attempts, event_id.rsplit("/", 1)[1])
        assert attempt["status_code"] == 401


class IMessageSeam(Seam):
    """iMessage's adapter behind a webhook listener in this process, on the fake
    BlueBubbles (a catch-up every second). A message is acknowledged by its delivery's
    200, or once the adapter's catch-up starts past it (the server never delivers again:
    one whose delivery failed comes by the catch-up)."""

    name = "imessage"
    adapter = IMessageAdapter
    chat = imessage_dm(IMESSAGE_USER)
    send_path = b"/api/v1/message/text"
    pushed = True
    says_how_long = False  # BlueBubbles has no rate limit of its own, nor a Retry-After

    def __init__(self, refusing: bool = False) -> None:
        password = "another password" if refusing else IMESSAGE_PASSWORD
        self.bb = self.fake = FakeBlueBubbles(password=password)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        config = IMessageConfig(token_env=IMESSAGE_VAR, webhook_token_env=IMESSAGE_WEBHOOK_VAR,
                                base_url=base_url or self.bb.url, catch_up_every=1)  # fmt: skip
        secrets = {IMESSAGE_VAR: IMESSAGE_PASSWORD, IMESSAGE_WEBHOOK_VAR: IMESSAGE_WEBHOOK_TOKEN}
        return config, Secrets(secrets, frozenset())

    def listening(self, port: int) -> None:
        self.bb.configure(webhook_url=IMessageServe.webhook_url(port), echo_own=False)

    def sends_limited(self, seconds: float) -> None:
        self.bb.fail("text", 429)

    def sends_failing(self) -> None:
        self.bb.fail("text", 500)

    def sends_refused(self) -> None:
        self.bb.fail("text", 400)

    def sends_unauthorized(self) -> None:
        self.bb.fail("text", 401)

    def sent(self) -> list[str]:
        return [s["message"] for s in self.bb.sent]

    async def connected(self) -> None:
        await in_thread(functools.partial(self.bb.wait_until, lambda f: f.queries and f.webhook_url,
                                          what="the first catch-up"))  # fmt: skip

    def say(self, text: str) -> str:
        return self.bb.message(text, user=IMESSAGE_USER)  # the guid

    def _acknowledged(self, guid: str) -> bool:
        created = next(m["dateCreated"] for m in self.bb.messages_in(self.chat)
                       if m["guid"] == guid)  # fmt: skip
        delivered = any(d["guid"] == guid and d.get("status_code") == 200
                        for d in self.bb.deliveries)  # fmt: skip
        return delivered or any(q["after"] + IMESSAGE_MARGIN_MS >= created
                                for q in self.bb.queries if not q.get("where"))  # fmt: skip

    async def still_unacknowledged(self, event_id: str) -> None:
        assert not self._acknowledged(event_id)

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(functools.partial(self.bb.wait_until,
                                          lambda f: self._acknowledged(event_id), 30.0,
                                          f"{event_id} acknowledged"))  # fmt: skip

    def never_connected(self) -> bool:
        return self.bb.queries == []

    def say_forged(self, text: str) -> str:
        return self.bb.message(text, user=IMESSAGE_USER, token="guessed")

    async def refused(self, event_id: str) -> None:
        attempt = await in_thread(self.bb.wait_delivered, event_id)
        assert attempt["status_code"] == 401


class SmsSeam(Seam):
    """SMS's adapter behind a webhook listener in this process, on the fake Twilio. It
    acknowledges a message by its 200 (the empty TwiML); one not answered 2xx the fake
    delivers again, as Twilio with retries in its connection overrides."""

    name = "sms"
    adapter = SmsAdapter
    chat = SMS_USER
    send_path = b"/Messages.json"
    comes_again_while_held = True
    pushed = True

    def __init__(self, refusing: bool = False) -> None:
        token = "another-auth-token" if refusing else TWILIO_TOKEN
        self.twilio = self.fake = FakeTwilio(token=token)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        config = SmsConfig(account_sid=TWILIO_ACCOUNT, number=TWILIO_NUMBER,
                           token_env="TWILIO_TOKEN", base_url=base_url or self.twilio.url,
                           public_url=TWILIO_PUBLIC_URL)  # fmt: skip
        return config, Secrets({"TWILIO_TOKEN": TWILIO_TOKEN}, frozenset())

    def listening(self, port: int) -> None:
        self.twilio.configure(webhook_url=SmsServe.webhook_url(port))

    def sends_limited(self, seconds: float) -> None:
        self.twilio.fail(429, 20429, retry_after=seconds)

    def sends_failing(self) -> None:
        self.twilio.fail(500, 20500)

    def sends_refused(self) -> None:
        self.twilio.fail(400, 21610)  # the recipient texted STOP

    def sends_unauthorized(self) -> None:
        self.twilio.revoke()

    def sent(self) -> list[str]:
        return [s["body"] for s in self.twilio.sent]

    async def connected(self) -> None:
        await in_thread(functools.partial(self.twilio.wait_until, lambda f: f.account_reads > 0,
                                          what="the account read"))  # fmt: skip

    def say(self, text: str) -> str:
        return self.twilio.message(text, SMS_USER)  # the MessageSid

    async def still_unacknowledged(self, event_id: str) -> None:
        assert all(d.get("status_code") != 200 for d in self.twilio.deliveries
                   if d["id"] == event_id)  # fmt: skip

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(self.twilio.wait_delivered, event_id)

    def never_connected(self) -> bool:
        return self.twilio.account_reads == 0

    def say_forged(self, text: str) -> str:
        return self.twilio.message(text, SMS_USER, forge="url")

    async def refused(self, event_id: str) -> None:
        [attempt] = await in_thread(self.twilio.wait_attempts, event_id)
        assert attempt["status_code"] == 403


class EmailSeam(Seam):
    """Email's adapter on a real Dovecot and the test's SMTP server. It acknowledges a mail
    by flagging it \\Seen; one left unflagged the next connection reads again."""

    name = "email"
    adapter = EmailAdapter
    chat = EMAIL_USER
    send_path = b"Message-ID: <"  # in the mail's header, sent after DATA
    says_how_long = False  # SMTP's 4xx carry no wait: the outbox backs off

    def __init__(self, refusing: bool = False) -> None:
        self.password = "not the password" if refusing else EMAIL_PASSWORD
        self.servers = mail_servers(smtp_login=(EMAIL_BOT, EMAIL_PASSWORD))

    def __enter__(self) -> Seam:
        self.imap, self.smtp = self.servers.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.servers.__exit__(*exc)

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        smtp = urlsplit(base_url or self.send_url())
        config = EmailConfig(token_env=EMAIL_VAR, address=EMAIL_BOT, imap_host=self.imap.host,
                             imap_port=self.imap.port, smtp_host=smtp.hostname,
                             smtp_port=smtp.port or 25, imap_security="plain",
                             smtp_security="plain", allow_insecure=True,
                             trusted_authserv_id=EMAIL_TRUSTED, liveness_seconds=1.0)  # fmt: skip
        return config, Secrets({EMAIL_VAR: self.password}, frozenset())

    def send_url(self) -> str:
        return f"smtp://{self.smtp.host}:{self.smtp.port}"

    def wait_sent(self, count: int) -> None:
        self.smtp.wait_received(count)

    def sends_limited(self, seconds: float) -> None:
        self.smtp.fail(451, "4.7.1 too many messages, slow down", at="MAIL")

    def sends_failing(self) -> None:
        self.smtp.fail(451, "4.3.0 try again later", at="DATA")

    def sends_refused(self) -> None:
        self.smtp.fail(550, "5.1.1 no such user", at="RCPT", recipient=EMAIL_USER)

    def sends_unauthorized(self) -> None:
        self.smtp.login = (EMAIL_BOT, "a new password")  # the login is refused (535)

    def sent(self) -> list[str]:
        return [m.text for m in self.smtp.received]

    async def connected(self) -> None:
        await in_thread(self.imap.wait_logins, EMAIL_BOT)

    def say(self, text: str) -> str:
        message_id = make_msgid(domain="example.org")
        self.imap.deliver(EMAIL_BOT, make_mail(EMAIL_USER, EMAIL_BOT, "Hi", text,
                                               message_id=message_id,
                                               auth_results=EMAIL_VOUCHED))  # fmt: skip
        return message_id

    async def still_unacknowledged(self, event_id: str) -> None:
        [mail] = [m for m in self.imap.messages(EMAIL_BOT) if m.message_id == event_id]
        assert not mail.seen

    async def acknowledged(self, event_id: str) -> None:
        await in_thread(functools.partial(self.imap.wait_seen, EMAIL_BOT, event_id))

    def never_connected(self) -> bool:
        return self.imap.logins(EMAIL_BOT) == 0


class MatrixSeam(Seam):
    """Matrix's adapter on the fake homeserver (syncs held 1 s), in a DM in the clear. It
    acknowledges what a sync brought by the next sync's `since`, past it."""

    name = "matrix"
    adapter = MatrixAdapter
    send_path = b"/send/m.room.message/"

    def __init__(self, refusing: bool = False) -> None:
        self.token = "syt_not_hermes_token" if refusing else MATRIX_TOKEN
        self.hs = self.fake = FakeMatrix()
        self.chat = self.hs.create_room([MATRIX_USER, MATRIX_BOT], direct=True)
        self.positions: dict[str, int] = {}  # an event said -> its place in the stream

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        config = MatrixConfig(token_env=MATRIX_VAR, base_url=base_url or self.hs.url,
                              user_id=MATRIX_BOT, allowed_users=(MATRIX_USER,),
                              sync_timeout=1.0)  # fmt: skip
        return config, Secrets({MATRIX_VAR: self.token}, frozenset())

    def sends_limited(self, seconds: float) -> None:
        self.hs.fail(429, endpoint="send", retry_after_ms=int(seconds * 1000))

    def sends_failing(self) -> None:
        self.hs.fail(502, endpoint="send")

    def sends_refused(self) -> None:
        self.hs.fail(403, endpoint="send")  # not in the room

    def sends_unauthorized(self) -> None:
        self.hs.fail(401, endpoint="send", errcode="M_UNKNOWN_TOKEN")

    def sent(self) -> list[str]:
        return [s["content"]["body"] for s in self.hs.sent if s["sender"] == MATRIX_BOT]

    async def connected(self) -> None:
        await in_thread(functools.partial(self.hs.wait_syncs, 2, user=MATRIX_BOT))

    def say(self, text: str) -> str:
        event_id = self.hs.message(self.chat, MATRIX_USER, text)["event_id"]
        self.positions[event_id] = _position(self.hs.stream_token)
        return event_id

    def _past(self, event_id: str) -> bool:
        """Whether a sync of hermes's started past the event."""
        return any(s["user"] == MATRIX_BOT and _position(s["since"]) >= self.positions[event_id]
                   for s in self.hs.syncs)  # fmt: skip

    async def still_unacknowledged(self, event_id: str) -> None:
        assert not self._past(event_id)

    async def acknowledged(self, event_id: str) -> None:
        wait = functools.partial(self.hs.wait_until, lambda _: self._past(event_id),
                                 what=f"a sync past {event_id}")  # fmt: skip
        await in_thread(wait)

    def never_connected(self) -> bool:
        return not any(s["user"] == MATRIX_BOT for s in self.hs.syncs)

    def limit_receiving(self, retry_after: float) -> None:
        """The next sync is answered 429 with `retry_after`."""
        self.hs.fail(429, endpoint="sync", retry_after_ms=int(retry_after * 1000))

    async def receiving_limited(self) -> None:
        await in_thread(self.hs.wait_refused, 1)


class MattermostSeam(Seam):
    """Mattermost's adapter on the fake. Nothing is acknowledged on its WebSocket: the
    adapter keeps the time of the last admitted post, and a new connection catches up
    from the margin before it; so a post is acknowledged once a catch-up starts from it
    or a later one (shown by cutting the socket and posting once more while it is down)."""

    name = "mattermost"
    adapter = MattermostAdapter
    chat = "dm-ann"
    send_path = b"POST /api/v4/posts "

    def __init__(self, refusing: bool = False) -> None:
        token = "another-token" if refusing else MATTERMOST_TOKEN
        self.mm = self.fake = FakeMattermost(token=token)
        self.mm.join(self.chat, "D")  # the DM sends go to

    def setup(self, base_url: str | None = None) -> tuple[PlatformConfig, Secrets]:
        config = MattermostConfig(token_env=MATTERMOST_VAR, base_url=base_url or self.mm.url,
                                  idle_timeout=3)  # fmt: skip
        return config, Secrets({MATTERMOST_VAR: MATTERMOST_TOKEN}, frozenset())

    def sends_limited(self, seconds: float) -> None:
        self.mm.fail("create", 429, reset=seconds)

    def sends_failing(self) -> None:
        self.mm.fail("create", 500, "app.internal.app_error")

    def sends_refused(self) -> None:
        self.mm.fail("create", 403, "api.context.permissions.app_error")

    def sends_unauthorized(self) -> None:
        self.mm.fail("create", 401, "api.context.session_expired.app_error")

    def sent(self) -> list[str]:
        return [s["message"] for s in self.mm.sent]

    async def connected(self) -> None:
        await in_thread(self.mm.wait_authenticated, 1)

    def say(self, text: str) -> str:
        return self.mm.message(text)  # the post's id

    def _past(self, event_id: str) -> bool:
        created = self.mm.created_at(event_id)
        return any(c["since"] + CATCH_UP_MARGIN_MS >= created for c in self.mm.catchups)

    async def still_unacknowledged(self, event_id: str) -> None:
        assert not self._past(event_id)

    async def acknowledged(self, event_id: str) -> None:
        while not self._past(event_id):
            await in_thread(self._caught_up_again)

    def _caught_up_again(self) -> None:
        """Cut the socket, post while it is down, and wait for the catch-up that brings it."""
        before = len(self.mm.catchups)
        self.mm.drop(then="probe")
        self.mm.wait_until(lambda f: len(f.catchups) > before, 30.0, "a catch-up")

    def never_connected(self) -> bool:
        return self.mm.sockets == []


def _position(token: str | None) -> int:
    """A sync token's place in the fake's stream (`s<N>`; none: before everything)."""
    return int(token[1:]) if token else -1


SEAMS: dict[str, type[Seam]] = {
    s.name: s
    for s in (
        TelegramSeam,
        SlackSeam,
        DiscordSeam,
        WhatsAppSeam,
        TeamsSeam,
        IMessageSeam,
        SmsSeam,
        EmailSeam,
        MatrixSeam,
        MattermostSeam,
    )
}


@asynccontextmanager
async def adapter_on(
    seam: Seam, admissions: Admissions, base_url: str | None = None, **kwargs: Any
) -> AsyncIterator[Running]:
    """The seam's adapter in this process, on its fake (or at `base_url`)."""
    config, secrets = seam.setup(base_url)
    async with running(seam.adapter, seam.name, config, secrets, admissions, **kwargs) as run:
        if not seam.pushed:
            yield run
            return
        listener = WebhookListener("127.0.0.1", 0, frozenset({seam.name}),
                                   lambda _: run.adapter.current(), MAX_BODY,
                                   seam.listening)  # fmt: skip
        async with trio.open_nursery() as nursery:
            await nursery.start(listener.run)
            yield run
            listener.stop()


@pytest.fixture(params=sorted(SEAMS))
def seam(request, require_system) -> Iterator[Seam]:
    require_servers(request.param, require_system)
    with SEAMS[request.param]() as platform:
        yield platform


@pytest.fixture(params=sorted(SEAMS))
def refusing(request, require_system) -> Iterator[Seam]:
    """A seam whose fake knows another token than the adapter's."""
    require_servers(request.param, require_system)
    with SEAMS[request.param](refusing=True) as platform:
        yield platform


@pytest.fixture(params=[n for n, kind in sorted(SEAMS.items()) if kind.pushed])
def pushed(request) -> Iterator[Seam]:
    """A seam whose platform pushes to the webhook listener."""
    with SEAMS[request.param]() as platform:
        yield platform


@pytest.fixture(params=[n for n, kind in sorted(SEAMS.items()) if hasattr(kind, "limit_receiving")])
def limited(request) -> Iterator[Seam]:
    """A seam whose platform can rate-limit receiving (Telegram's getUpdates)."""
    with SEAMS[request.param]() as platform:
        yield platform


MAX_BODY = 1 << 20  # of a delivery to the listener in this process
# Past every progress deadline here, the one a Discord connection starts on (60 s, until
# Hello gives the heartbeat interval) included.
LONG_ADMISSION = 120.0


@pytest.mark.timeout(60)
async def test_nothing_is_acknowledged_before_its_admission_commits_however_long(seam, jump_clock):
    admissions = Admissions()
    async with adapter_on(seam, admissions) as run:
        await seam.connected()
        first = seam.say("first")
        await seam.acknowledged(first)
        admissions.hold("held")  # the journal takes its time over this one
        held = seam.say("held")
        await admissions.wait_for(held)
        deadline = run.incarnations[-1].progress_deadline  # none where it is pushed to
        assert seam.pushed or 2 * deadline < LONG_ADMISSION
        jump_clock.jump(LONG_ADMISSION)  # it outlasts the progress deadline...
        await trio.testing.wait_all_tasks_blocked()  # ...and the watchdog has looked
        await seam.still_unacknowledged(held)
        assert (run.restarts, len(run.incarnations), run.status.state) == (0, 1, LIVE)
        admissions.release("held")
        await seam.acknowledged(held)
        if seam.comes_again_while_held:  # its second delivery is read after the first's ack
            await admissions.wait_for(held, times=2)
        assert (run.restarts, len(run.incarnations)) == (0, 1)  # the same connection went on
    assert admissions.ids.count(first) == 1
    if seam.comes_again_while_held:  # admitted again; the journal knows it by its key
        assert admissions.ids.count(held) >= 2
    else:
        assert admissions.ids.count(held) == 1


@pytest.mark.timeout(60)
async def test_an_event_whose_admission_failed_is_not_acknowledged_and_comes_again(
    seam, registry, tmp_path
):
    admissions = Admissions()
    state_db = tmp_path / "state.db"  # what the adapter keeps (an offset, a session)
    async with adapter_on(
        seam, admissions, cursors=lambda: Cursors(registry, state_db, Clock())
    ) as run:
        await seam.connected()
        admissions.hold("doomed")
        doomed = seam.say("doomed")
        await admissions.wait_for(doomed)
        admissions.fail("doomed")  # the journal could not take it: the connection crashes
        if not seam.pushed:  # (pushed to: the delivery is answered 500, and comes again)
            await run.status.reach(BACKING_OFF)
        await seam.acknowledged(doomed)  # only once a later admission of it committed
        restarts = 0 if seam.pushed else 1
        assert run.restarts == restarts and len(run.incarnations) == restarts + 1
    assert admissions.ids.count(doomed) >= 2


@pytest.mark.timeout(60)
async def test_a_token_refused_at_connect_is_fatal_and_never_retried(refusing, jump_clock):
    async with adapter_on(refusing, Admissions()) as run:
        await run.status.reach(FATAL)
        jump_clock.jump(60)  # long past any restart's backoff
        await trio.testing.wait_all_tasks_blocked()
        assert run.status.state == FATAL and "refused the token" in run.status.reason
        assert (run.restarts, len(run.incarnations)) == (0, 1)
    assert refusing.never_connected()


@pytest.mark.timeout(60)
async def test_a_pushed_delivery_not_proven_is_refused_and_admits_nothing(pushed):
    admissions = Admissions()
    async with adapter_on(pushed, admissions):
        await pushed.connected()
        forged = pushed.say_forged("forged")
        await pushed.refused(forged)
        real = pushed.say("real")
        await admissions.wait_for(real)
    assert admissions.ids == [real]


RETRY_AFTER = 30


@pytest.mark.timeout(60)
async def test_a_429_on_receiving_waits_the_platforms_retry_after(limited, jump_clock):
    admissions = Admissions()
    async with adapter_on(limited, admissions) as run:
        await limited.connected()
        limited.limit_receiving(RETRY_AFTER)  # the next poll is refused...
        before = limited.say("before")  # ...once this one ends the poll held now
        await admissions.wait_for(before)
        await limited.receiving_limited()
        await run.status.reach(BACKING_OFF)  # the adapter has the answer: it waits
        limited_at = trio.current_time()
        during = limited.say("while limited")
        step = run.incarnations[-1].progress_deadline / 2  # the adapter shows it is alive
        for n in range(math.ceil(RETRY_AFTER / step)):
            jump_clock.jump(step)
            await trio.testing.wait_all_tasks_blocked()
            if n == 2:
                assert run.status.state == BACKING_OFF  # shown meanwhile, as a wait
        await admissions.wait_for(during)
        assert admissions.first_time(during) - limited_at >= RETRY_AFTER - 1
        assert run.restarts == 0 and run.status.state == LIVE


@pytest.mark.timeout(60)
async def test_a_send_is_answered_with_a_typed_result(seam, monkeypatch):
    """What the platform answered, as the outbox acts on it: taken; rate limited for as
    long as it said; a passing fault; refused for good; no answer within the send's
    deadline (it may have arrived: never sent blindly again); never sent (no connection)."""
    monkeypatch.setattr(contract, "SEND_DEADLINE", 1.0)  # the contract's 30 s, shorter
    with HeldRelay(seam.send_url()) as relay:  # the sends go through it
        async with adapter_on(seam, Admissions(), base_url=relay.url) as run:
            await seam.connected()

            async def send(text: str) -> SendResult:
                return await run.send(SendRequest(Target(seam.name, seam.chat), text, text))

            taken = await send("taken")
            assert isinstance(taken, Sent) and taken.message_id
            seam.sends_limited(7)
            assert await send("limited") == RetryAfter(7.0 if seam.says_how_long else None, ANY)
            seam.sends_failing()
            assert await send("failing") == RetryAfter(None, ANY)
            seam.sends_refused()
            assert isinstance(await send("refused"), Permanent)
            relay.hold(seam.send_path)
            assert isinstance(await send("unanswered"), Unconfirmed)
            relay.release()  # it arrives after all
            await in_thread(seam.wait_sent, 2)
            relay.close()
            never = await send("never sent")
            assert isinstance(never, RetryAfter) and never.seconds is None
            assert "not sent" in never.reason
    assert seam.sent() == ["taken", "unanswered"]


@pytest.mark.timeout(60)
async def test_a_token_revoked_while_sends_wait_keeps_them_and_ends_the_adapter(seam):
    """A send refused for its token is not a dead letter (the row waits for a fixed
    token): the adapter goes fatal with the reason in its status, and is not restarted.
    A platform that pushes to hermes (WhatsApp) still has what it delivers admitted."""
    admissions = Admissions()
    async with adapter_on(seam, admissions) as run:
        await seam.connected()
        seam.sends_unauthorized()
        kept = await run.send(SendRequest(Target(seam.name, seam.chat), "kept", "kept"))
        assert kept == RetryAfter(None, ANY)
        await run.status.reach(FATAL)
        assert run.status.reason.startswith("the token was refused: ")
        if seam.pushed:
            await admissions.wait_for(seam.say("still heard"))
            held = await run.send(SendRequest(Target(seam.name, seam.chat), "held", "held"))
            assert held == RetryAfter(None, ANY)
        assert (run.restarts, len(run.incarnations)) == (0, 1)
    assert seam.sent() == []
