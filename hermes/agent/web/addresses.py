"""web_fetch's connections behind the address rules (hermes.terminal.addresses): only
globally routable addresses, unless `web.allow_private` lists them.

The check runs after DNS resolution, on every connection (each redirect hop opens its
own), and the connection goes to the very address that was checked: `GuardedBackend`
resolves once, judges every address, and connects to an address literal, so a host whose
DNS answer changes between two lookups (rebinding) gains nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import httpcore

from hermes.agent.tools.base import ToolError
from hermes.terminal.addresses import AddressRefused, AllowList, allowed_addresses

HINT = "an owner can let web_fetch reach it by listing it in config.yaml under web.allow_private"


class Refused(ToolError):
    """A connection the guard does not allow; nothing was sent to the address."""


async def checked_addresses(host: str, port: int, allow: AllowList) -> list[str]:
    """Every address `host` resolves to, each allowed (Refused names the first that is
    not), as literals to connect to: one resolution, no second one behind the check."""
    try:
        return await allowed_addresses(host, port, allow)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from exc
    except AddressRefused as exc:
        raise Refused(f"{exc}; {HINT}") from None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's Trio backend behind the guard: every TCP connection goes to an address
    `checked_addresses` allowed. TLS still verifies and sends SNI for the host name, which
    httpcore passes to `start_tls` on its own."""

    def __init__(self, allow: AllowList) -> None:
        self.allow = allow
        self.inner = httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: httpcore.ConnectError | None = None
        for literal in await checked_addresses(host, port, self.allow):
            try:
                return await self.inner.connect_tcp(
                    literal, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None  # getaddrinfo answers with at least one address
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)
