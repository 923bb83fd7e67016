"""`hermes setup`'s platform questions: which platforms, then each one's keys (its
`Platform.asks`, each explained by its field's docstring) and its token, checked with the
adapter's own `check_token` (as `hermes doctor` does); a refused token is asked again,
with the platform's own words. Nothing here names a platform: the registry says them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from hermes.actors.errors import Invalid
from hermes.adapters.platform import Platform
from hermes.adapters.registry import chat_platforms
from hermes.cli.config_reference import field_help
from hermes.cli.setup_ask import Asker
from hermes.cli.setup_model import read_secret
from hermes.config import InputError, Secrets, structure

if TYPE_CHECKING:
    from hermes.ops.doctor import CheckResult


class TokenRefused(Invalid):
    """A platform refused its token, or could not be asked (--non-interactive)."""


def wizard_platforms() -> dict[str, Platform]:
    """The platforms setup asks about: those whose record names what it asks (`asks`).
    One without (the API, inbound webhooks) has no token to check nor owner to find: its
    docs say how to write its section."""
    return {name: p for name, p in chat_platforms().items() if p.asks}


def secret_key(key: str) -> bool:
    """A key that names a variable holding a secret (`token_env`, `app_secret_env`)."""
    return key.endswith("_env")


def flag(name: str, key: str) -> str:
    """A platform key's flag: `--telegram-token-env`, `--email-imap-host`."""
    return f"--{name}-{key}".replace("_", "-")


def dest(name: str, key: str) -> str:
    return f"{name}_{key}"


def file_flag(name: str, key: str) -> str:
    """The flag that gives a secret from a file: `--telegram-token-file`."""
    return flag(name, key.removesuffix("_env") + "_file")


def register(parser: argparse.ArgumentParser) -> None:
    """--platform, and every platform's keys as flags, from the registry."""
    platforms = wizard_platforms()
    group = parser.add_argument_group("platforms")
    group.add_argument(
        "--platform",
        action="append",
        metavar="NAME",
        choices=sorted(platforms),
        help=f"a platform to set up (repeat for more): {', '.join(sorted(platforms))}",
    )
    group.add_argument(
        "--owner",
        action="append",
        metavar="PLATFORM:ID",
        help="you, the owner, on a platform (skips finding you by a message to the bot)",
    )
    group.add_argument(
        "--allow",
        action="append",
        metavar="PLATFORM:ID",
        help="someone else who may talk to the bot (repeat for more)",
    )
    group.add_argument(
        "--advanced",
        action=argparse.BooleanOptionalAction,
        help="ask for each platform's API address too (a test server, a proxy)",
    )
    for name, platform in platforms.items():
        keys = _keys(platform)
        for key in keys:
            if secret_key(key):
                group.add_argument(
                    flag(name, key),
                    dest=dest(name, key),
                    metavar="VAR",
                    help=f"{name}: the variable holding its {_said(key)} (copied to .env)",
                )
                group.add_argument(
                    file_flag(name, key),
                    dest=dest(name, key.removesuffix("_env") + "_file"),
                    metavar="PATH",
                    help=f"{name}: a file holding its {_said(key)}",
                )
            else:
                group.add_argument(
                    flag(name, key),
                    dest=dest(name, key),
                    metavar="VALUE",
                    help=f"{name}: its {key}",
                )


def _keys(platform: Platform) -> list[str]:
    """The keys asked for a platform: its API address (advanced), then its own."""
    return list(dict.fromkeys(("base_url", *platform.asks)))


def _said(key: str) -> str:
    return key.removesuffix("_env").replace("_", " ")


@attrs.define
class PlatformAnswers:
    """One platform's section as answered, the secrets it names, and what its token
    check said (the bot's identity)."""

    name: str
    section: dict[str, Any]
    secrets: dict[str, str]
    identity: str


def pick(asker: Asker, args: argparse.Namespace) -> list[str]:
    """The platforms to set up now (those config.yaml has already stay as they are)."""
    platforms = wizard_platforms()
    choices = [(n, f"{n}: {p.token_hint}" if p.tokens else n) for n, p in platforms.items()]
    return asker.choose_many(
        "Which chat platforms? (space picks, Enter goes on; none: only `hermes chat`)",
        "--platform",
        args.platform,
        choices,
    )


def ask_platform(
    asker: Asker,
    args: argparse.Namespace,
    name: str,
    current: dict[str, Any],
    env_path: Path,
    advanced: bool,
) -> PlatformAnswers:
    """The platform's keys asked (a flag answers its own), its token checked until the
    platform takes it."""
    platform = wizard_platforms()[name]
    meanings = field_help(platform.settings)
    section = dict(current)
    secrets: dict[str, str] = {}
    asker.say(f"\n{name}: {platform.token_hint}" if platform.tokens else f"\n{name}")
    for key in _keys(platform):
        given = getattr(args, dest(name, key))
        if secret_key(key):
            continue  # below, with the check
        if key == "base_url" and key not in platform.asks:
            if given is None and not advanced:
                continue
            answer = asker.text(
                f"{name} API address (empty: the real service's):",
                flag(name, key),
                given,
                current.get(key) or "",
            )
            section[key] = answer or None
            continue
        section[key] = asker.text(
            f"{name} {key}: {meanings.get(key, '')}", flag(name, key), given, current.get(key)
        )
    secret_keys = [k for k in platform.asks if secret_key(k)]
    from_flags = True
    while True:
        for key in secret_keys:
            variable = (
                (getattr(args, dest(name, key)) if from_flags else None)
                or section.get(key)
                or f"{name}_{key.removesuffix('_env')}".upper()
            )
            section[key] = variable
            value = None
            if from_flags:
                value = read_secret(
                    getattr(args, dest(name, key)),
                    getattr(args, dest(name, key.removesuffix("_env") + "_file")),
                    flag(name, key),
                    file_flag(name, key),
                )
            if value is None:
                value = asker.secret(
                    f"{name} {_said(key)} (hidden; saved in .env as {variable}):",
                    flag(name, key),
                )
            secrets[variable] = value
        from_flags = False
        result = trio.run(_check, name, section, secrets, env_path)
        if result.ok:
            asker.say(f"  {name} took the token: {result.detail}")
            return PlatformAnswers(name, section, secrets, result.detail)
        if not asker.interactive or not secret_keys:
            raise TokenRefused(f"{name}: {result.detail}")
        asker.say(f"  {name} said: {result.detail}; try again")


async def _check(
    name: str, section: dict[str, Any], secrets: dict[str, str], env_path: Path
) -> CheckResult:
    """doctor's check of one platform's token (imported when asked: it loads much)."""
    from hermes.ops.doctor import check_platform

    platform = wizard_platforms()[name]
    try:
        settings = structure({k: v for k, v in section.items() if v is not None}, platform.settings)
    except InputError as exc:
        raise Invalid(f"platforms.{name}: {exc}") from None
    return await check_platform(name, settings, Secrets(secrets, frozenset()), env_path)
