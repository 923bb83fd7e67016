"""SMS's section of config.yaml: the Twilio account and number hermes texts from, the
public URL Twilio calls (its signatures are over it), and where files go out from."""

from __future__ import annotations

import re
from typing import Any

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import BadValue, not_blank

E164 = re.compile(r"\+[1-9][0-9]{1,14}")


def e164(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    """A phone number as Twilio writes it: `+`, the country code, the number."""
    if value is not None and not E164.fullmatch(value):
        raise BadValue(f"{attr.name}: {value!r} is not a number in E.164 (e.g. +15551234567)")


def public(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    """An absolute http(s) URL without a query: the signed URL is exactly it."""
    if value is not None and (not re.match(r"https?://[^/?#]+", value) or "?" in value):
        raise BadValue(f"{attr.name}: {value!r} is not an http(s) URL without a query")


@attrs.frozen
class SmsConfig(PlatformConfig):
    """SMS's own settings, beside those every platform has (`token_env`: the variable
    holding the account's auth token, which signs every webhook and, without an API key,
    authenticates hermes's sends; `base_url`: Twilio's API, unset
    `https://api.twilio.com`; `allowed_users`: numbers in E.164, `'+15551234567'`)."""

    account_sid: str | None = attrs.field(default=None, validator=not_blank)
    """The account's SID (`AC...`, required), from the Twilio Console's home page."""
    number: str | None = attrs.field(default=None, validator=e164)
    """The Twilio number hermes texts from, in E.164 (`+15551234567`); required unless
    `messaging_service_sid` is set."""
    messaging_service_sid: str | None = attrs.field(default=None, validator=not_blank)
    """A Messaging Service (`MG...`) to send through instead of `number` (its sender pool
    picks the number)."""
    public_url: str | None = attrs.field(default=None, validator=public)
    """The URL Twilio calls for an incoming message, exactly as typed in the Console
    (required): `https://your.host/webhooks/sms` behind your reverse proxy. Twilio signs
    each request over it; status callbacks go to it with `/status` added."""
    api_key_sid: str | None = attrs.field(default=None, validator=not_blank)
    """An API key (`SK...`) hermes sends with instead of the auth token (the auth token
    still checks Twilio's signatures)."""
    api_key_secret_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the API key's secret (with `api_key_sid`)."""
    media_url: str | None = attrs.field(default=None, validator=public)
    """The public URL of `/webhooks/sms/media` behind your reverse proxy (usually
    `public_url` + `/media`): a file goes out as an MMS whose media Twilio fetches there,
    at an unguessable path that expires; unset: files are not sent (refused, saying why)."""

    def token_names(self) -> list[str]:
        return [n for n in (self.token_env, self.api_key_secret_env) if n]
