"""The inbound webhooks' section of config.yaml: routes, each with its secret, how its
sender signs, the prompt its deliveries become and where the answer goes.

Every signed delivery of a route is let in (its signature is who it is), one at a time
per route, none merged with the next: the defaults of `allow_all_users`, `busy` and
`merge_window` below say so.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import attrs

from hermes.adapters.deliver import deliver_target, names_of, platform_of
from hermes.adapters.settings import Busy, PlatformConfig
from hermes.adapters.template import Template, TemplateError
from hermes.config import VARIABLE_NAME, BadValue, Role, at_least, optional_seconds

Signing = Literal["github", "generic"]
HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,100}")
SIGNATURE_HEADERS = {"github": "X-Hub-Signature-256", "generic": "X-Signature-256"}


def _template(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    if not value.strip():
        raise BadValue(f"{attr.name}: the prompt is empty")
    try:
        Template.read(value)
    except TemplateError as exc:
        raise BadValue(f"{attr.name}: {exc}") from None


def _header(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is not None and not HEADER_NAME.fullmatch(value):
        raise BadValue(f"{attr.name}: {value!r} is not a header name (letters, digits and -)")


def _variable(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is not None and not VARIABLE_NAME.fullmatch(value):
        raise BadValue(f"{attr.name}: {value!r} is not the name of an environment variable")


@attrs.frozen
class WebhookRoute:
    """One route, `/webhooks/webhook/<name>` on the webhook listener: a sender's deliveries,
    proven by its secret, become a turn in the route's own conversation."""

    secret_env: str | None = attrs.field(default=None, validator=_variable)
    """The variable holding the secret the sender signs with (required): what you type
    into GitHub's webhook settings, or give your own sender."""
    prompt: str | None = attrs.field(default=None, validator=_template)
    """What a delivery asks the agent (required): text with `{dotted.path}` fields of the
    JSON body (`{repository.full_name}: {action}`, `{commits.0.id}`; `{{` is a brace). A
    field the body lacks reads `[no dotted.path]`."""
    deliver: str | None = attrs.field(default=None, validator=deliver_target)
    """Where the answer goes (required): a chat (`telegram:123`, `slack:C0123:1700.1`), a
    platform's home channel (`home:telegram`), or `none` (only the route's conversation
    keeps it)."""
    signature: Signing = "github"
    """How the sender signs: `github` (`sha256=<hex>` of the HMAC-SHA256 of the raw body)
    or `generic` (the bare hex)."""
    header: str | None = attrs.field(default=None, validator=_header)
    """The header carrying the signature; unset: `X-Hub-Signature-256` (github) or
    `X-Signature-256` (generic)."""
    role: Role = "user"
    """Whose turn a delivery starts: `user` (confined, as a stranger allowed in) or
    `owner`. Either way its text came from outside: later commands of the turn run as
    `terminal.after_untrusted` says."""

    def __attrs_post_init__(self) -> None:
        for key in ("secret_env", "prompt", "deliver"):
            if getattr(self, key) is None:
                raise BadValue(f"{key}: required (see docs/platforms/webhook.md)")

    def signature_header(self) -> str:
        """The header to read the signature from, lower-cased as the listener gives them."""
        return (self.header or SIGNATURE_HEADERS[self.signature]).lower()


@attrs.frozen
class WebhookConfig(PlatformConfig):
    """The inbound webhooks' own settings, beside those every platform has (it takes no
    `token_env`: each route names its own secret)."""

    routes: dict[str, WebhookRoute] = attrs.field(
        factory=dict, validator=names_of("route", ": it is the last part of the route's URL")
    )
    """The routes by name; a route `ci` is `/webhooks/webhook/ci` on the webhook listener
    (`gateway.webhooks`)."""
    max_prompt: int = attrs.field(default=8000, validator=at_least(100))
    """Characters a delivery's prompt may have once its fields are filled in; the rest is
    cut, saying so."""
    allow_all_users: bool = True
    """Every delivery a route's secret signs is let in: the signature is who it is."""
    busy: Busy | None = "queue"
    """A delivery that comes while its route's turn runs waits for it (at most 16 wait)."""
    merge_window: float | None = attrs.field(default=0.0, validator=optional_seconds)
    """Deliveries are never merged: each is a turn of its own."""

    def token_names(self) -> list[str]:
        return sorted({route.secret_env for route in self.routes.values() if route.secret_env})

    def answers_to(self) -> dict[str, str]:
        named = {}
        for name, route in self.routes.items():
            if (platform := platform_of(route.deliver)) is not None:
                named[f"routes.{name}.deliver"] = platform
        return named

    def named_owners(self) -> frozenset[str]:
        """The routes whose deliveries start owners' turns (a route is its deliveries'
        user), and `owner`."""
        owners = {name for name, route in self.routes.items() if route.role == "owner"}
        return super().named_owners() | owners
