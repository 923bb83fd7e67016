"""What a turn adds to the user's message for the files it carries: fetched through the
message's adapter only in the turn, after authorization (a stranger's media costs
nothing), within the chat's hourly allowance; a voice note's words transcribed; kept with
the message as structured data (hermes.agent.attachments), which the model call renders."""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.actors.reply import Reply
from hermes.adapters.contract import Fetch, Fetched, InboundEvent
from hermes.adapters.media import Saved
from hermes.agent.attachments import Attached, Attachments
from hermes.agent.speech import Speech, SpeechError, transcribe

log = logging.getLogger(__name__)
FETCH_TIMEOUT = 300.0  # seconds an event's attachments may take to download
HOUR = 3600.0


class MediaIntake:
    """Fetches and transcribes; counts what each chat fetched in the last hour."""

    def __init__(self, speech: Speech, adapter_of: Callable[[str], Address | None]) -> None:
        self.speech = speech
        self.adapter_of = adapter_of
        self.per_hour = int(speech.media.per_chat_hour_mb * 1024 * 1024)
        self.fetched: dict[tuple[str, str], collections.deque[tuple[float, int]]] = {}

    def for_events(
        self, events: Sequence[InboundEvent]
    ) -> Callable[[], Awaitable[Attachments]] | None:
        """How the turn fetches its events' attachments (a burst's, in order; None: they
        have none). In the turn, so /stop cancels a slow download."""
        carrying = [e for e in events if e.attachments]
        if not carrying:
            return None

        async def fetch() -> Attachments:
            parts = [await self.attachments(event) for event in carrying]
            return Attachments(
                tuple(f for p in parts for f in p.files), tuple(n for p in parts for n in p.notes)
            )

        return fetch

    async def attachments(self, event: InboundEvent) -> Attachments:
        chat = (event.platform, event.chat_id)
        spent = self._spent(chat)
        if spent >= self.per_hour:
            mb = self.per_hour // (1024 * 1024)
            note = (
                f"[{len(event.attachments)} attachment(s) not fetched: this chat sent "
                f"over {mb} MB of files in the last hour]"
            )
            return Attachments(notes=(note,))
        fetched = await self._fetch(event)
        if fetched.files:
            now = trio.current_time()
            self.fetched.setdefault(chat, collections.deque()).append(
                (now, sum(f.size for f in fetched.files))
            )
        files = []
        for saved in fetched.files:
            heard = await self._heard(saved) if saved.kind == "audio" else None
            files.append(Attached(saved, heard))
        return Attachments(tuple(files), fetched.problems)

    def _spent(self, chat: tuple[str, str]) -> int:
        window = self.fetched.get(chat)
        if window is None:
            return 0
        while window and window[0][0] < trio.current_time() - HOUR:
            window.popleft()
        if not window:
            del self.fetched[chat]
            return 0
        return sum(size for _, size in window)

    async def _fetch(self, event: InboundEvent) -> Fetched:
        adapter = self.adapter_of(event.platform)
        fetched, reply = Fetched((), ("[the attachments could not be fetched now]",)), Reply()
        if adapter is not None:
            with contextlib.suppress(ActorStopped), trio.move_on_after(FETCH_TIMEOUT):
                await adapter.cast(Fetch(event.attachments, reply))
                fetched = await reply.wait()
        return fetched

    async def _heard(self, audio: Saved) -> str:
        """The transcript line of a voice note: what the model reads instead of the sound."""
        config = self.speech.media.transcribe
        if config.base_url is None:
            return (
                "[a voice note arrived, but no speech-to-text is configured: its words "
                "cannot be heard; say so if it matters]"
            )
        try:
            words = await transcribe(config, self.speech.transcribe_key, audio)
        except SpeechError as exc:
            log.warning("transcribing %s failed: %s", audio.name, exc)
            return f"[the voice note could not be transcribed: {exc}]"
        return f"[voice note, transcribed]: {words}" if words else "[the voice note is silent]"
