"""The mailbox over IMAP, on one worker thread: imapclient is blocking, so every call
of a connection runs in the adapter's own thread, one at a time (a limiter of one),
never on the Trio thread.

IDLE is held in slices of the config's `liveness_seconds`: between two a NOOP proves
the connection alive (the adapter's progress), and the IDLE is renewed well before the
server's 29-minute limit. Every call may be abandoned when the adapter is cancelled (its
deadline passed): `close` shuts the socket under the thread, which then ends on its own;
a socket read times out only after the deadline, so the deadline always speaks first.
A message is read with BODY.PEEK[] (reading does not flag it), and is flagged \\Seen, or
moved to the processed folder, only once the adapter has admitted it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import trio
from imapclient import SEEN, IMAPClient

from hermes.adapters.email.config import EmailConfig

T = TypeVar("T")

DEADLINE_NOOPS = 3  # NOOPs that may go unanswered before the connection is replaced
MAX_MESSAGE = 25 * 1024 * 1024  # bytes of one mail read (RFC822.SIZE checked first)


@attrs.define(eq=False)
class Mailbox:
    """One logged-in IMAP connection with the configured folder selected."""

    config: EmailConfig
    password: str = attrs.field(repr=False)
    client: IMAPClient | None = None
    uidvalidity: int = 0
    _thread: trio.CapacityLimiter = attrs.Factory(lambda: trio.CapacityLimiter(1))

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the connection's thread; a cancel does not wait for it."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self._thread,
                                             abandon_on_cancel=True)  # fmt: skip

    async def open(self) -> None:
        await self.run(self._open)

    def _open(self) -> None:
        config = self.config
        context = ssl.create_default_context()
        client = IMAPClient(config.imap_host or "", port=config.imap_port,
                            ssl=config.imap_security == "tls", ssl_context=context,
                            timeout=2 * DEADLINE_NOOPS * config.liveness_seconds)  # fmt: skip
        if config.imap_security == "starttls":
            client.starttls(context)
        client.login(config.username or config.address or "", self.password)
        selected = client.select_folder(config.folder)
        self.uidvalidity = int(selected.get(b"UIDVALIDITY", 0))
        if config.processed_folder and not client.folder_exists(config.processed_folder):
            client.create_folder(config.processed_folder)
        self.client = client

    async def waiting(self) -> list[int]:
        """The UIDs of the messages not yet processed, oldest first."""
        return await self.run(self._waiting)

    def _waiting(self) -> list[int]:
        assert self.client is not None
        criteria = ["ALL"] if self.config.processed_folder else ["UNSEEN"]
        return sorted(self.client.search(criteria))

    async def fetch(self, uid: int) -> bytes | None:
        """The whole message, unflagged; None when it is gone or too large."""
        return await self.run(self._fetch, uid)

    def _fetch(self, uid: int) -> bytes | None:
        assert self.client is not None
        size = self.client.fetch([uid], ["RFC822.SIZE"]).get(uid, {}).get(b"RFC822.SIZE", 0)
        if size > MAX_MESSAGE:
            return None
        found = self.client.fetch([uid], ["BODY.PEEK[]"]).get(uid, {})
        return found.get(b"BODY[]")

    async def find(self, message_id: str) -> bytes | None:
        """The mail with `message_id` in the folder or the processed folder (an
        attachment is saved from it once its sender is authorized); None: not there."""
        return await self.run(self._find, message_id)

    def _find(self, message_id: str) -> bytes | None:
        assert self.client is not None
        for folder in filter(None, (self.config.folder, self.config.processed_folder)):
            self.client.select_folder(folder, readonly=True)
            for uid in self.client.search(["HEADER", "Message-ID", message_id]):
                raw = self._fetch(uid)
                if raw is not None:
                    return raw
        return None

    async def done(self, uid: int) -> None:
        """The message was admitted (or refused): flag it \\Seen, or move it away."""
        await self.run(self._done, uid)

    def _done(self, uid: int) -> None:
        assert self.client is not None
        if self.config.processed_folder:
            self.client.move([uid], self.config.processed_folder)
        else:
            self.client.add_flags([uid], [SEEN])

    async def idle_slice(self, seconds: float) -> bool:
        """IDLE for up to `seconds`, then a NOOP; whether something arrived meanwhile."""
        return await self.run(self._idle_slice, seconds)

    def _idle_slice(self, seconds: float) -> bool:
        assert self.client is not None
        self.client.idle()
        try:
            said = list(self.client.idle_check(timeout=seconds))
        finally:
            said += self.client.idle_done()[1]  # what came as the IDLE ended counts too
        said += self.client.noop()[1]
        return any(isinstance(r, tuple) and len(r) > 1 and r[1] == b"EXISTS" for r in said)

    def close(self) -> None:
        """Shut the socket at once: a thread in IDLE on it wakes with an error and ends."""
        client, self.client = self.client, None
        if client is not None:
            try:
                client.shutdown()
            except OSError:
                pass
