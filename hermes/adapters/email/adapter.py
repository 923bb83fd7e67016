"""The email adapter: IMAP in (IDLE), SMTP out, one conversation per thread.

- A connection logs in, selects the folder (a changed UIDVALIDITY means the folder was
  made again: everything in it is read again, and the journal, keyed by Message-ID,
  knows what was answered), then reads every message not yet processed, oldest first:
  each is admitted (with its thread's subject and Message-IDs kept beside it, for the
  answer) *before* it is flagged \\Seen or moved to the processed folder, so a crash
  between the two reads it again and answers it once. A sender the receiving server does
  not vouch for is logged and left alone (flagged, never answered).
- Then IDLE, in slices with a NOOP between them: the NOOP is the progress the deadline
  (three slices) waits for, so a connection that stops answering is replaced.
- An authorized mail's attachments are read again (a connection of their own, by the
  mail's Message-ID) and saved under the cache: a stranger's cost nothing but the read.
- An answer is one mail (no splitting below the server's size limit), through SMTP
  submission, as a reply in its thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import trio
from imapclient.exceptions import LoginError

from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter
from hermes.adapters.contract import Cursor, Fetched, RetryAfter, SendRequest, SendResult
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.imap import DEADLINE_NOOPS, Mailbox
from hermes.adapters.email.mail import answer_mail, attachment, parse, read_mail
from hermes.adapters.email.smtp import submit
from hermes.adapters.media import save
from hermes.config import PlatformConfig, Secrets

log = logging.getLogger(__name__)


class EmailAdapter(PlatformAdapter):
    platform = "email"
    concurrent_sends = 4

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup.name, setup.status, setup.admit)
        config = setup.config
        if not isinstance(config, EmailConfig):  # the tree reads it as EMAIL.settings
            raise TypeError(f"the email adapter needs an EmailConfig, not {config!r}")
        self.platform = setup.name
        self.config = config
        self.progress_deadline = DEADLINE_NOOPS * config.liveness_seconds
        self.cache = setup.cache / setup.name if setup.cache is not None else None
        self.password = setup.secrets.get(config.token_env) if config.token_env else None
        self.cursors = setup.cursors
        self.clock = setup.cursors.clock if setup.cursors is not None else None
        self.thread_key = f"{setup.name}:thread:"
        self.validity_key = f"{setup.name}:uidvalidity"
        if not config.require_authentication:
            log.warning("%s: require_authentication is off: any From header is believed (only"
                        " for a server no stranger can send through)", setup.name)  # fmt: skip

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        if not isinstance(config, EmailConfig):
            raise TypeError(f"the email token check needs an EmailConfig, not {config!r}")
        mailbox = Mailbox(config, secrets.get(config.token_env or "") or "")
        try:
            await mailbox.open()
        except LoginError as exc:
            raise AdapterFatal(_refused(config, exc)) from None
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
                raise AdapterFatal(_refused(self.config, exc)) from None
            self.progress()
            await self._validity(mailbox.uidvalidity)
            while True:
                for uid in await mailbox.waiting():
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
            log.warning("%s: %s was made again (UIDVALIDITY %s, was %s): reading it all again;"
                        " what was answered is known by its Message-ID", self.name,
                        self.config.folder, uidvalidity, kept)  # fmt: skip
        if kept != str(uidvalidity):
            await self.cursors.put(self.validity_key, str(uidvalidity))

    async def _take(self, mailbox: Mailbox, uid: int) -> None:
        raw = await mailbox.fetch(uid)
        if raw is None:
            log.warning("%s: message %d is gone or too large; left alone", self.name, uid)
        else:
            read = read_mail(raw, self.config, self.platform)
            if read.event is None:
                log.warning("%s: a mail was not answered: %s", self.name, read.why)
            else:
                thread = read.event.thread_id or read.event.chat_id
                about = {"subject": read.subject, "references": list(read.references)}
                kept = Cursor(self.thread_key + thread, json.dumps(about))
                await self.admit(read.event, kept)
        await mailbox.done(uid)  # only now: a crash before this reads it again
        self.progress()

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each attachment of an authorized mail, read again from the mailbox by the
        mail's Message-ID and saved under the cache (at most `max_attachment` bytes)."""
        if self.cache is None or not self.password:
            return Fetched((), tuple(f"[{self.name} cannot save attachments here]"
                                     for _ in attachments))  # fmt: skip
        refs = [json.loads(a) for a in attachments]
        mails: dict[str, bytes | None] = {}
        paths, problems = [], []
        mailbox = Mailbox(self.config, self.password)
        try:
            with trio.fail_after(self.progress_deadline):
                await mailbox.open()
                for ref in refs:
                    if ref["id"] not in mails:
                        mails[ref["id"]] = await mailbox.find(ref["id"])
        except Exception as exc:
            why = f"the mailbox could not be read again: {exc!r}"
            return Fetched((), tuple(f"[{r['name']}: {why}]" for r in refs))
        finally:
            mailbox.close()
        for ref in refs:
            raw = mails[ref["id"]]
            try:
                if raw is None:
                    raise ValueError("the mail is no longer in the mailbox")
                data = attachment(parse(raw), ref["part"])
                if len(data) > self.config.max_attachment:
                    raise ValueError(f"it is larger than {self.config.max_attachment} bytes")
                tag = hashlib.sha256(f"{ref['id']}:{ref['part']}".encode()).hexdigest()[:12]
                path = await trio.to_thread.run_sync(save, self.cache, f"{tag}-{ref['name']}",
                                                     data)  # fmt: skip
            except (ValueError, OSError) as exc:
                problems.append(f"[the attachment {ref['name']} could not be saved: {exc}]")
                continue
            paths.append(str(path))
        return Fetched(tuple(paths), tuple(problems))

    # -- sending ------------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        if not self.password:
            return RetryAfter(None, f"no password: set {self.config.token_env}")
        kept: dict[str, Any] = {}
        if self.cursors is not None:
            thread = request.target.thread_id or request.target.chat_id
            kept = json.loads(await self.cursors.get(self.thread_key + thread) or "{}")
        now = self.clock.now() if self.clock is not None else 0.0
        mail = answer_mail(self.config, request.target.chat_id, request.text,
                           request.idempotency_key, now, kept.get("subject", ""),
                           request.reply_to, tuple(kept.get("references", ())))  # fmt: skip
        return await submit(self.config, self.password, mail)


def _refused(config: EmailConfig, exc: LoginError) -> str:
    return (f"the IMAP server refused the token (the password in {config.token_env}) for"
            f" {config.username or config.address}: {exc}")  # fmt: skip
