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

import contextlib
import imaplib
import socket
import ssl
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import trio
from imapclient import SEEN, IMAPClient
from imapclient.exceptions import LoginError

from hermes.adapters.email.config import EmailConfig

T = TypeVar("T")

DEADLINE_NOOPS = 3  # NOOPs that may go unanswered before the connection is replaced
MAX_MESSAGE = 25 * 1024 * 1024  # bytes of one mail read (RFC822.SIZE checked first)
PIECE = 1024 * 1024  # bytes of a mail read in one FETCH


@attrs.define(eq=False)
class Mailbox:
    """One logged-in IMAP connection with the configured folder selected."""

    config: EmailConfig
    password: str = attrs.field(repr=False)
    client: IMAPClient | None = None
    uidvalidity: int = 0
    _closed: bool = False
    _thread: trio.CapacityLimiter = attrs.Factory(lambda: trio.CapacityLimiter(1))

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the connection's thread; a cancel does not wait for it."""
        return await trio.to_thread.run_sync(
            fn, *args, limiter=self._thread, abandon_on_cancel=True
        )

    async def open(self) -> None:
        await self.run(self._open)

    def _open(self) -> None:
        config = self.config
        context = ssl.create_default_context()
        client = IMAPClient(
            config.imap_host or "",
            port=config.imap_port,
            ssl=config.imap_security == "tls",
            ssl_context=context,
            timeout=2 * DEADLINE_NOOPS * config.liveness_seconds,
        )
        self.client = client
        try:
            if self._closed:  # closed while this thread connected: nobody will use it
                raise OSError("the mailbox was closed")
            if config.imap_security == "starttls":
                client.starttls(context)
            client.login(config.username or config.address or "", self.password)
            selected = client.select_folder(config.folder)
            self.uidvalidity = int(selected.get(b"UIDVALIDITY", 0))
            if config.processed_folder and not client.folder_exists(config.processed_folder):
                client.create_folder(config.processed_folder)
        except BaseException:
            self.close()
            raise

    async def waiting(self) -> list[int]:
        """The UIDs of the messages not yet processed, oldest first."""
        return await self.run(self._waiting)

    def _waiting(self) -> list[int]:
        assert self.client is not None
        criteria = ["ALL"] if self.config.processed_folder else ["UNSEEN"]
        return sorted(self.client.search(criteria))

    async def size(self, uid: int) -> int | None:
        """The message's size in bytes; None when it is gone."""
        return await self.run(self._size, uid)

    def _size(self, uid: int) -> int | None:
        assert self.client is not None
        found = self.client.fetch([uid], ["RFC822.SIZE"]).get(uid)
        return None if found is None else int(found.get(b"RFC822.SIZE", 0))

    async def piece(self, uid: int, offset: int) -> bytes:
        """Up to PIECE bytes of the message from `offset`, unflagged (BODY.PEEK): a large
        mail is read in pieces, each one progress."""
        return await self.run(self._piece, uid, offset)

    def _piece(self, uid: int, offset: int) -> bytes:
        assert self.client is not None
        found = self.client.fetch([uid], [f"BODY.PEEK[]<{offset}.{PIECE}>"]).get(uid, {})
        return next((v for k, v in found.items() if k.startswith(b"BODY[]")), b"") or b""

    async def find(self, message_id: str) -> bytes | None:
        """The mail with `message_id` in the folder or the processed folder (an
        attachment is saved from it once its sender is authorized); None: not there, or
        larger than MAX_MESSAGE."""
        return await self.run(self._find, message_id)

    def _find(self, message_id: str) -> bytes | None:
        assert self.client is not None
        for folder in filter(None, (self.config.folder, self.config.processed_folder)):
            self.client.select_folder(folder, readonly=True)
            for uid in self.client.search(["HEADER", "Message-ID", message_id]):
                size = self._size(uid)
                if size is None or size > MAX_MESSAGE:
                    continue
                found = self.client.fetch([uid], ["BODY.PEEK[]"]).get(uid, {})
                return found.get(b"BODY[]")
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
        """Shut the socket at once: a thread reading it (an IDLE, a NOOP the server never
        answers) wakes with an error and ends; then let the connection go."""
        self._closed = True
        client, self.client = self.client, None
        if client is None:
            return
        with contextlib.suppress(OSError):
            client.socket().shutdown(socket.SHUT_RDWR)  # before imaplib closes its file,
        with contextlib.suppress(OSError, imaplib.IMAP4.error):  # which waits on that read
            client.shutdown()


def refused(exc: LoginError) -> bool:
    """Whether a refused login says the credentials are wrong (fatal), not that the
    server cannot take it now (too many connections, unavailable: try again later)."""
    said = str(exc).upper()
    return (
        "AUTHENTICATIONFAILED" in said
        or "AUTHORIZATIONFAILED" in said
        or ("[" not in said and ("INVALID" in said or "AUTHENTICATION FAILED" in said))
    )
