"""Serve on each chat fake that takes media (Telegram, Slack, Discord), behind one small
driver per platform: a user sends a voice note, an image or a file; the test reads what
the fake downloaded and what the bot uploaded. The fake model answers, and speaks (its
/audio endpoints: a voice note whose bytes are `SPEECH:<words>` says those words)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from tests.adapters.discord.serving import DiscordServe
from tests.adapters.serving import Serve, serving
from tests.adapters.slack.serving import SlackServe
from tests.adapters.telegram.serving import ANN, TOKEN, TelegramServe
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram


@attrs.define
class Chat:
    """One platform's fake, driven alike: `owner` is the allowlisted user (the owner),
    `stranger` one nobody allowed."""

    name: str
    fake: Any
    owner: str
    stranger: str
    harness: type[Serve]
    file_method: str  # how a document goes up
    voice_method: str

    @property
    def access(self) -> str:
        return f"    allowed_users: ['{self.owner}']\n    owner: '{self.owner}'\n"

    def ready(self) -> None:
        """Block until serve's adapter is connected (events sent before would wait, or
        on Discord be lost: the fake dispatches only to a session)."""
        if self.name == "discord":
            self.fake.wait_settled()
        elif self.name == "slack":
            self.fake.wait_connections(1)

    def send(self, text: str, content: bytes, name: str, mime: str, user: str | None = None,
             voice: bool = False) -> None:  # fmt: skip
        """`user` (default the owner) sends `content` as `name` in a DM, `text` its caption."""
        user = user or self.owner
        if self.name == "telegram":
            file_id = self.fake.add_file(content, file_name=name, mime_type=mime)
            kind = "voice" if voice else "photo" if mime.startswith("image/") else "document"
            self.fake.message(text, user_id=int(user), **{kind: file_id})
        elif self.name == "slack":
            found = self.fake.add_file(content, name, mime, user=user)
            self.fake.message(text, user=user, channel=f"D{user}", files=[found])
        else:
            found = self.fake.add_attachment(content, name, mime)
            self.fake.message(text, author_id=user, channel_id=f"2{user}",
                              attachments=[found])  # fmt: skip

    def texts(self) -> list[str]:
        """The text of every message the bot sent (captions of files included)."""
        field = "content" if self.name == "discord" else "text"
        texts = [str(s.get(field) or "") for s in self.fake.sent]
        if self.name == "telegram":  # sent as MarkdownV2: as the user reads it
            texts = [re.sub(r"\\(.)", r"\1", t) for t in texts]
        return texts

    def uploads(self) -> list[dict[str, Any]]:
        return list(self.fake.uploads)

    def upload_name(self, upload: dict[str, Any]) -> str:
        return upload.get("file_name") or upload.get("filename") or ""

    def upload_size(self, upload: dict[str, Any]) -> int:
        return upload["length"] if self.name == "slack" else upload["size"]


def _chat(name: str, fake: Any) -> Chat:
    if name == "telegram":
        return Chat(name, fake, str(ANN), "9999", TelegramServe, "sendDocument", "sendVoice")
    if name == "slack":
        return Chat(name, fake, "U1", "U9", SlackServe, "files.completeUploadExternal",
                    "files.completeUploadExternal")  # fmt: skip
    return Chat(name, fake, "1001", "1009", DiscordServe, "multipart", "multipart")


FAKES = {"telegram": lambda: FakeTelegram(token=TOKEN), "slack": FakeSlack,
         "discord": FakeDiscord}  # fmt: skip


@pytest.fixture(params=sorted(FAKES))
def chat(request) -> Iterator[Chat]:
    with FAKES[request.param]() as fake:
        yield _chat(request.param, fake)


@pytest.fixture
def serve(home, model, chat) -> Iterator[Serve]:
    with serving(chat.harness, chat.fake, home, model) as running:
        running.access = chat.access
        running.configure()
        yield running
