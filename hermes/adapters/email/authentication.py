"""Whether the receiving mail server vouches for a message's sender.

A `From` header alone is trivially forged, so a mail is authorized by its sender only
when the server that received it says so: an `Authentication-Results` header (RFC
8601) added by the configured `trusted_authserv_id` (the receiving server's own name:
headers from anyone else, a sender included, are not read) showing `dmarc=pass` for
the From address's domain (its `header.from`: the domain the server checked must be the
one hermes read), or `dkim=pass` for a signing domain aligned with it (the same domain,
or one a level or more above it: relaxed alignment). Quoted strings in the header are
read as values, never as results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# One result in a header: `method=result`, its properties (`header.d=example.org`).
_RESULT = re.compile(r"(?P<method>[a-z0-9-]+)\s*=\s*(?P<result>[a-z]+)(?P<rest>[^;]*)", re.I)
_PROPERTY = re.compile(r"(?P<key>[a-z0-9.-]+)\s*=\s*(?P<value>[^\s;()]+)", re.I)
_COMMENT = re.compile(r"\([^()]*\)")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def vouched(headers: Iterable[str], trusted_authserv_id: str, from_domain: str) -> bool:
    """Whether the topmost of the `Authentication-Results` header values `headers` (in
    the mail's order) by `trusted_authserv_id` passes DMARC, or DKIM aligned with
    `from_domain`. Only the topmost: the receiving server adds its header above what
    came with the mail, so one lower down with its name was written by someone else."""
    trusted = trusted_authserv_id.strip().lower()
    domain = from_domain.strip().lower().rstrip(".")
    if not trusted or not domain:
        return False
    for header in headers:
        bare = _COMMENT.sub("", _QUOTED.sub('""', header))
        authserv, _, results = bare.partition(";")
        names = authserv.split()  # the authserv-id, and perhaps a version after it
        if not names or names[0].lower() != trusted:
            continue
        return _passes(results, domain)  # the topmost is the server's own: one below is not
    return False


def _passes(results: str, domain: str) -> bool:
    for found in _RESULT.finditer(results):
        method, result = found["method"].lower(), found["result"].lower()
        if result != "pass":
            continue
        if method == "dmarc" and _property(found["rest"], "header.from") == domain:
            return True
        if method == "dkim" and _aligned(_signing_domain(found["rest"]), domain):
            return True
    return False


def _signing_domain(rest: str) -> str:
    return _property(rest, "header.d") or _property(rest, "header.i").rsplit("@", 1)[-1]


def _property(rest: str, key: str) -> str:
    """A result's property (`header.from`), lower-cased, without a trailing dot."""
    for prop in _PROPERTY.finditer(rest):
        if prop["key"].lower() == key:
            return prop["value"].lower().rstrip(".")
    return ""


def _aligned(signer: str, domain: str) -> bool:
    """Relaxed alignment: the From domain is the signing domain or below it (a signer of
    a bare top-level name aligns with nothing)."""
    if not signer or "." not in signer:
        return False
    return domain == signer or domain.endswith("." + signer)
