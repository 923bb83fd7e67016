"""Voice replies: where `media.speak.platforms` names the chat's platform, a turn's
answer, once queued as text, is read aloud by the speech endpoint and queued after it as
a voice note (its own outbox row, keyed by the answer's: a resumed turn adds none). A
speech failure costs only the voice note: the text went already. In `instead` mode the
text was queued held back (`hold`), and the voice note takes its place; a failure, or a
crash, lets the text go when the hold ends."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from hermes.adapters.contract import OutFile
from hermes.adapters.media import MediaError
from hermes.agent.speech import Speech, SpeechError, speak
from hermes.agent.tools.base import ToolContext
from hermes.delivery.files import queue_file, too_large, voice_instead
from hermes.delivery.outbox import nudge
from hermes.delivery.replies import Answer

log = logging.getLogger(__name__)


class VoiceReplies:
    def __init__(self, speech: Speech, outgoing: Path) -> None:
        self.speech = speech
        self.outgoing = outgoing

    async def follow(self, ctx: ToolContext, answer: Answer, text: str) -> None:
        """Queue `text` as a voice note after the answer `answer` queued, if its platform
        has voice replies."""
        config = self.speech.media.speak
        if not self.speech.speaks_on(answer.target.platform) or not text.strip():
            return
        if len(text) > config.max_chars:
            log.info("an answer of %d characters is not read aloud (max_chars)", len(text))
            return
        name = hashlib.sha256(f"{answer.key}:voice".encode()).hexdigest()[:16] + ".ogg"
        try:
            saved = await speak(config, self.speech.speak_key, text, self.outgoing, name)
        except (SpeechError, MediaError, OSError) as exc:  # the text went: only this is lost
            log.warning("a voice reply in %s failed: %s", ctx.session_id, exc)
            return
        refused = too_large(answer.target.platform, "reply.ogg", saved.size)
        if refused is not None:
            log.info("a voice reply is not sent: %s", refused)
            return
        file = OutFile(saved.path, "reply.ogg", "audio/ogg", saved.size, voice=True)
        if config.mode == "instead":
            await ctx.db.write(
                voice_instead,
                answer.target,
                file,
                answer.key,
                ctx.clock.now(),
                ctx.session_id,
                answer.reply_to,
            )
        else:
            await ctx.db.write(
                queue_file,
                answer.target,
                file,
                "",
                "reply",
                f"{answer.key}:voice",
                ctx.clock.now(),
                ctx.session_id,
                answer.reply_to,
            )
        nudge(ctx.outbox)
