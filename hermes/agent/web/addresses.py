"""Which addresses the agent's web requests may reach: only globally routable ones, unless
`web.allow_private` lists them, so a URL a model was given cannot be turned against the
host (its loopback services, the LAN, the cloud metadata address).

The check runs after DNS resolution, on every connection (each redirect hop opens its
own), and the connection goes to the very address that was checked: `GuardedBackend`
resolves once, judges every address, and connects to an address literal, so a host whose
DNS answer changes between two lookups (rebinding) gains nothing.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
)
from typing import Any

import attrs
import httpcore
import trio

from hermes.agent.tools.base import ToolError
from hermes.config import ConfigError

IPAddress = IPv4Address | IPv6Address

SHARED = ip_network("100.64.0.0/10")  # RFC 6598, carrier-grade NAT
PRIVATE = tuple(
    ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
NAT64 = ip_network("64:ff9b::/96")  # RFC 6052: an IPv4 address in its last 32 bits
METADATA = frozenset(ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
HINT = "an owner can let web_fetch reach it by listing it in config.yaml under web.allow_private"


class Refused(ToolError):
    """A connection the guard does not allow; nothing was sent to the address."""


def embedded_ipv4(address: IPAddress) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 address stands for, with the name of its form."""
    if address.version == 4:
        return None
    assert isinstance(address, IPv6Address)
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address in NAT64:
        return "NAT64", IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if 1 < int(address) < 2**32:  # ::a.b.c.d, deprecated (:: and ::1 are themselves)
        return "IPv4-compatible", IPv4Address(int(address))
    return None


def refusal(address: IPAddress) -> str | None:
    """Why `address` may not be reached ("loopback", "private", ...), None when it is
    globally routable. `is_global` alone is not enough: Python counts multicast, NAT64,
    6to4 and IPv4-compatible addresses of loopback and site-local addresses as global."""
    if (form := embedded_ipv4(address)) is not None:
        name, ipv4 = form
        if (why := refusal(ipv4)) is not None:
            return f"the {name} form of {ipv4}, which is {why}"
        if name != "IPv4-compatible":  # deprecated: reserved whatever it holds
            return None
    note = " (a cloud metadata address)" if address in METADATA else ""
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    if address.is_link_local:
        return f"link-local{note}"
    if address.is_multicast:
        return "multicast"
    if address in SHARED:
        return f"shared address space (CGNAT, {SHARED}){note}"
    if any(address in network for network in PRIVATE):
        return f"private{note}"
    if isinstance(address, IPv6Address) and address.is_site_local:
        return "site-local"
    if address.is_reserved or not address.is_global:
        return "reserved, not globally routable"
    return None


def host_name(entry: str) -> str | None:
    """`entry` as a DNS host name (lower case, IDNA, no trailing dot), None if it is not
    one (a top-level label of digits only is a mistyped address, not a name)."""
    try:
        name = entry.encode("idna").decode("ascii").lower().removesuffix(".")
    except UnicodeError:
        return None
    labels = name.split(".")
    if len(name) > 253 or not all(HOST_LABEL.fullmatch(label) for label in labels):
        return None
    return None if labels[-1].isdigit() else name


@attrs.frozen
class AllowList:
    """What `web.allow_private` lets through although the guard would refuse it: host
    names (every address they resolve to), addresses and ranges."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPv4Network | IPv6Network, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        hosts: set[str] = set()
        networks: list[IPv4Network | IPv6Network] = []
        for raw in entries:
            entry = str(raw).strip()
            try:
                networks.append(ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if (name := host_name(entry)) is None:
                raise ConfigError(
                    f"web.allow_private: {raw!r} is neither a host name, an IP address "
                    "nor a range such as 10.0.0.0/8"
                )
            hosts.add(name)
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, address: IPAddress) -> bool:
        if host_name(host) in self.hosts:
            return True
        form = embedded_ipv4(address)
        candidates = (address,) if form is None else (address, form[1])
        return any(a in network for a in candidates for network in self.networks)


async def checked_addresses(host: str, port: int, allow: AllowList) -> list[str]:
    """Every address `host` resolves to, each allowed (Refused names the first that is
    not), as literals to connect to: one resolution, no second one behind the check."""
    try:
        answers = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from exc
    literals = list(dict.fromkeys(str(answer[4][0]) for answer in answers))
    for literal in literals:
        address = ip_address(literal)
        if not allow.allows(host, address) and (why := refusal(address)) is not None:
            what = (
                f"{address} is {why}"
                if literal == host.strip("[]")
                else f"{host} resolves to {address}, which is {why}"
            )
            raise Refused(f"refused to connect: {what}; {HINT}")
    return literals


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
