"""The email adapter: IMAP in (IDLE), SMTP out, one conversation per thread.

- A connection logs in, selects the folder, then reads every message not yet processed
  (by its flag, or by its being in the folder at all: never by a UID kept from before,
  so a folder made again, a new UIDVALIDITY, needs nothing but the journal, which knows
  the answered mails by Message-ID), oldest first, until none is left:
  each is admitted *before* it is flagged \\Seen or moved to the processed folder, so a
  crash between the two reads it again and answers it once. A sender the receiving server
  does not vouch for, a mail written before the journal's retention (its Date: a copy
  seen again), and a mail that cannot be read, are logged and flagged, never answered.
  A large mail is read in pieces, each one progress.
- A stranger's mail costs little before the gateway decides (mail.py): only for a sender
  this platform's settings or pairing let in is its HTML parsed and its thread's subject
  and Message-IDs kept in state.db beside its admission, for the answer; those threads
  are forgotten once the journal has forgotten their last mail (retention.journal_days).
- Then IDLE, in slices with a NOOP between them: the NOOP is the progress the deadline
  (three slices) waits for, so a connection that stops answering is replaced.
- An authorized mail's attachments are read again (a connection of their own, by the
  mail's Message-ID) and saved under the cache: a stranger's cost nothing but the read.
- An answer is one mail (no splitting below the server's size limit), through SMTP
  submission, as a reply in its thread; a file is an attachment of one (read on a
  worker thread), its caption the text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
from pathlib import Path
from typing import Any

import trio
from imapclient.exceptions import LoginError

from hermes.actors.clock import Clock
from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter
from hermes.adapters.contract import (
    Cursor,
    Fetched,
    RetryAfter,
    SendRequest,
    SendResult,
    file_gone,
)
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.imap import DEADLINE_NOOPS, MAX_MESSAGE, Mailbox, refused
from hermes.adapters.email.mail import Read, answer_mail, attach, attachment, parse, read_mail
from hermes.adapters.email.smtp import CODES, submit
from hermes.adapters.media import MediaError, save
from hermes.adapters.refusals import Refusal
from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets
from hermes.state.pairing import approved_users

log = logging.getLogger(__name__)

FETCH_SECONDS = 300.0  # to read an authorized mail again for its attachments
FORGET_EVERY = 3600.0  # seconds between two prunings of the threads kept
DAY = 86400.0


class EmailAdapter(PlatformAdapter[EmailConfig]):
    platform = "email"
    concurrent_sends = 4

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.progress_deadline = DEADLINE_NOOPS * config.liveness_seconds
        self.password = setup.secrets.get(config.token_env)
        self.clock = setup.cursors.clock if setup.cursors is not None else Clock()
        self.journal_days = setup.journal_days
        self.named_users = setup.named_users  # gateway.owners and gateway.allowed_users here
        self.forget_due = -math.inf  # trio time of the next pruning of the threads kept
        self.validity_key = f"{setup.name}:uidvalidity"
        self.threads = f"{setup.name}:thread:"  # the keys of the threads kept, by sender
        self.salt_key = f"{setup.name}:message-id-salt"
        self.salt: str | None = None  # this install's, mixed into every Message-ID
        self.salt_lock = trio.Lock()
        self.fetching = trio.Lock()  # one more IMAP connection at most, for attachments
        if not config.require_authentication:
            log.warning(
                "%s: require_authentication is off: any From header is believed (only"
                " for a server no stranger can send through)",
                setup.name,
            )

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        config = cls.configured(config)
        mailbox = Mailbox(config, secrets.get(config.token_env) or "")
        try:
            await mailbox.open()
        except LoginError as exc:
            if refused(exc):
                raise AdapterFatal(_refused(config, exc)) from None
            raise
        finally:
            mailbox.close()
        return f"{config.address} ({config.folder})"

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        await super().on_start()

    # -- receiving --------------------------------------------------------------------

    async def connect(self) -> None:
        if not self.password:
            raise AdapterFatal(f"no password: set {self.config.token_env}")
        missing = [k for k in ("address", "imap_host", "smtp_host") if not getattr(self.config, k)]
        if missing:
            raise AdapterFatal(f"set platforms.{self.name}.{missing[0]}")
        if self.config.require_authentication and not self.config.trusted_authserv_id:
            raise AdapterFatal(
                f"set platforms.{self.name}.trusted_authserv_id to your receiving server's name"
                " (or require_authentication: false for a private server): without it no"
                " sender can be believed"
            )
        mailbox = Mailbox(self.config, self.password)
        try:
            try:
                await mailbox.open()
            except LoginError as exc:
                if refused(exc):
                    raise AdapterFatal(_refused(self.config, exc)) from None
                raise  # too many connections, unavailable: a restart, later
            self.progress()
            await self._validity(mailbox.uidvalidity)
            while True:
                await self._forget_threads()
                # Until none is left: a mail announced while one was taken came with that
                # FETCH or STORE's answer, which the IDLE after it would not repeat.
                while waiting := await mailbox.waiting():
                    for uid in waiting:
                        await self._take(mailbox, uid)
                self.settled()
                arrived, idled, every = False, 0.0, self.config.liveness_seconds
                while not arrived and idled < self.config.idle_seconds:
                    arrived = await mailbox.idle_slice(min(every, self.config.idle_seconds))
                    idled += every
                    self.progress()
        finally:
            mailbox.close()

    async def _validity(self, uidvalidity: int) -> None:
        if self.cursors is None:
            return
        kept = await self.cursors.get(self.validity_key)
        if kept is not None and kept != str(uidvalidity):
            log.warning(
                "%s: %s was made again (UIDVALIDITY %s, was %s): its mails are read"
                " as ever, and what was answered is known by its Message-ID",
                self.name,
                self.config.folder,
                uidvalidity,
                kept,
            )
        if kept != str(uidvalidity):
            await self.cursors.put(self.validity_key, str(uidvalidity))

    async def _forget_threads(self) -> None:
        """Forget the threads kept (their subject and Message-IDs) that no mail joined for
        as long as the journal remembers (at most once an hour): state.db keeps no
        conversation longer than its mails. A later mail in one keeps it again."""
        if self.cursors is None or trio.current_time() < self.forget_due:
            return
        self.forget_due = trio.current_time() + FORGET_EVERY
        before = self.clock.now() - self.journal_days * DAY
        gone = await self.cursors.forget(self.threads, before)
        if gone:
            log.info(
                "%s: forgot %d threads older than %g days (retention.journal_days)",
                self.name,
                gone,
                self.journal_days,
            )

    async def _take(self, mailbox: Mailbox, uid: int) -> None:
        raw = await self._read(mailbox, uid)
        if raw is None:
            log.warning(
                "%s: message %d is gone or larger than %d bytes; flagged, not answered",
                self.name,
                uid,
                MAX_MESSAGE,
            )
        else:
            approved: frozenset[str] = frozenset()
            if self.cursors is not None and not self.config.allow_all_users:
                approved = await self.cursors.db.read(approved_users, self.name)
            approved |= self.named_users  # gateway.owners, gateway.allowed_users: let in too
            not_before = self.clock.now() - self.journal_days * DAY
            read = await trio.to_thread.run_sync(self._read_mail, raw, approved, not_before)
            if read.event is None:
                log.warning("%s: a mail was not answered: %s", self.name, read.why)
            else:
                kept = None  # a stranger's thread is not kept: the gateway has not let them in
                if read.let_in:
                    about = {"subject": read.subject, "references": list(read.references)}
                    kept = Cursor(
                        self._thread_key(read.event.chat_id, read.event.thread_id),
                        json.dumps(about),
                    )
                await self.admit(read.event, kept)
        await mailbox.done(uid)  # only now: a crash before this reads it again
        self.progress()

    async def _read(self, mailbox: Mailbox, uid: int) -> bytes | None:
        """The whole mail, in pieces, each one progress; None: gone, or too large."""
        size = await mailbox.size(uid)
        if size is None or size > MAX_MESSAGE:
            return None
        pieces, got = [], 0
        while got < size:
            piece = await mailbox.piece(uid, got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
            self.progress()
        return b"".join(pieces)

    def _read_mail(self, raw: bytes, approved: frozenset[str], not_before: float) -> Read:
        """A mail read (on a worker thread: a large one takes a while); one that cannot
        be read is not an event, and says why."""
        try:
            return read_mail(
                raw, self.config, self.platform, approved=approved, not_before=not_before
            )
        except Exception as exc:  # a mail is anyone's bytes: never a crash that comes back
            return Read(None, "", f"it could not be read: {exc!r}")

    def _thread_key(self, chat_id: str, thread_id: str | None) -> str:
        """Where a conversation's subject and Message-IDs are kept: by its sender's
        address too, so nobody else's mail in a thread changes what hermes answers."""
        return f"{self.threads}{chat_id}:{thread_id or ''}"

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each attachment of an authorized mail, read again from the mailbox by the
        mail's Message-ID (one more connection at most) and saved under the cache (at
        most `max_attachment` bytes)."""
        if self.cache is None or not self.password:
            return Fetched(
                (), tuple(f"[{self.name} cannot save attachments here]" for _ in attachments)
            )
        refs = [json.loads(a) for a in attachments]
        mails: dict[str, bytes | None] = {}
        mailbox = Mailbox(self.config, self.password)
        try:
            async with self.fetching:
                with trio.fail_after(FETCH_SECONDS):
                    await mailbox.open()
                    for ref in refs:
                        if ref["id"] not in mails:
                            mails[ref["id"]] = await mailbox.find(ref["id"])
        except Exception as exc:
            why = f"the mailbox could not be read again: {exc!r}"
            return Fetched((), tuple(f"[{r['name']}: {why}]" for r in refs))
        finally:
            mailbox.close()
        return await trio.to_thread.run_sync(self._save, refs, mails)

    def _save(self, refs: list[dict[str, Any]], mails: dict[str, bytes | None]) -> Fetched:
        """Each attachment saved (on a worker thread: each mail parsed once)."""
        assert self.cache is not None
        parsed = {k: parse(raw) for k, raw in mails.items() if raw is not None}
        files, problems = [], []
        for ref in refs:
            name = Path(str(ref["name"])).name or "attachment"
            try:
                if ref["id"] not in parsed:
                    raise ValueError("the mail is no longer in the mailbox")
                data = attachment(parsed[ref["id"]], ref["part"])
                if len(data) > self.config.max_attachment:
                    raise ValueError(f"it is larger than {self.config.max_attachment} bytes")
                tag = hashlib.sha256(f"{ref['id']}:{ref['part']}".encode()).hexdigest()[:12]
                files.append(save(self.cache, f"{tag}-{name}", data, None, self.media))
            except (ValueError, MediaError, OSError) as exc:
                problems.append(f"[the attachment {name} could not be saved: {exc}]")
        return Fetched(tuple(files), tuple(problems))

    # -- sending ------------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        if not self.password:
            return RetryAfter(None, f"no password: set {self.config.token_env}")
        target = request.target
        kept: dict[str, Any] = {}
        if self.cursors is not None:
            key = self._thread_key(target.chat_id, target.thread_id)
            kept = json.loads(await self.cursors.get(key) or "{}")
        references = tuple(kept.get("references", ()))
        # A message in a thread that answers nothing (an approval's prompt, a brief to a
        # thread) still joins it: a reply to it continues the conversation.
        reply_to = request.reply_to or (references[-1] if references else None)
        now = self.clock.now()
        mail = answer_mail(
            self.config,
            target.chat_id,
            request.text,
            request.idempotency_key,
            now,
            kept.get("subject", ""),
            reply_to,
            references,
            salt=await self._salt(),
        )
        if request.file is not None:  # read and base64-encoded off the Trio thread
            try:
                await trio.to_thread.run_sync(attach, mail, request.file)
            except OSError as exc:  # its copy is gone: it can never be sent
                return file_gone(exc)
        result = await submit(self.config, self.password, mail)
        return self.refused(result, CODES) if isinstance(result, Refusal) else result

    async def _salt(self) -> str:
        """This install's Message-ID salt, made once and kept in state.db: two installs
        (or one whose state.db was made again) never make the same Message-ID, which
        a provider would take for a copy and drop."""
        async with self.salt_lock:
            if self.salt is None and self.cursors is not None:
                self.salt = await self.cursors.get(self.salt_key)
                if self.salt is None:
                    self.salt = secrets.token_hex(16)
                    await self.cursors.put(self.salt_key, self.salt)
            return self.salt or ""


def _refused(config: EmailConfig, exc: LoginError) -> str:
    return (
        f"the IMAP server refused the token (the password in {config.token_env}) for"
        f" {config.username or config.address}: {exc}"
    )
