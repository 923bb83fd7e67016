"""Which addresses a request from hermes's side may reach: only globally routable ones,
unless an owner listed them, so an address a model or a sandboxed command names cannot be
turned against the host (its loopback services, the LAN, the cloud metadata address).

web_fetch (hermes.agent.web.addresses) and the sandbox's network proxy
(hermes.terminal.proxy) judge every connection by these rules, after DNS resolution, and
connect to the very address judged: one resolution, so a name whose answer changes
between two lookups (rebinding) gains nothing.
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

import attrs
import trio

from hermes.actors.errors import Invalid
from hermes.config import ConfigError

IPAddress = IPv4Address | IPv6Address

SHARED = ip_network("100.64.0.0/10")  # RFC 6598, carrier-grade NAT
PRIVATE = tuple(
    ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
NAT64 = ip_network("64:ff9b::/96")  # RFC 6052: an IPv4 address in its last 32 bits
METADATA = frozenset(ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


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


class AddressRefused(Invalid):
    """A connection the rules do not allow; nothing was sent to the address."""


async def allowed_addresses(host: str, port: int, allow: AllowList) -> list[str]:
    """Every address `host` resolves to, each allowed (AddressRefused names the first that
    is not), as literals to connect to. A name that does not resolve: socket.gaierror."""
    answers = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    literals = list(dict.fromkeys(str(answer[4][0]) for answer in answers))
    for literal in literals:
        address = ip_address(literal)
        if not allow.allows(host, address) and (why := refusal(address)) is not None:
            what = (
                f"{address} is {why}"
                if literal == host.strip("[]")
                else f"{host} resolves to {address}, which is {why}"
            )
            raise AddressRefused(f"refused to connect: {what}")
    return literals
