"""What a command's environment may hold, and keeping secrets out of its output.

A child's environment is built from an allow list (BASE_VARIABLES, plus the names
`agent.tools.pass_env` lets through), never from serve's own environment minus a deny
list: a secret under a name nobody thought of (`SECRET_KEY`, `DATABASE_URL`,
`SSH_AUTH_SOCK`) never reaches a command. The names that look like credentials (a list
of patterns) still decide which values are secrets: those are redacted from whatever a
command prints, in case one arrived some other way.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping

import attrs

BLOCKED_PATTERNS = (
    "*_API_KEY",
    "*_APIKEY",
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_CREDENTIALS",
    "*_PRIVATE_KEY",
    "OPENAI_*",
    "ANTHROPIC_*",
    "OPENROUTER_*",
    "GEMINI_*",
    "GOOGLE_API_*",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "HERMES_*",
)
BASE_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME")
NOT_SECRET = frozenset({"HERMES_HOME"})  # kept out of commands, but a path, not a secret
MIN_SECRET_LENGTH = 6  # shorter values would redact ordinary words
REDACTED = "[REDACTED]"


@functools.cache
def _compile(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for all the name patterns (shared: every terminal session has a policy)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


@attrs.frozen
class EnvPolicy:
    """What a child's environment holds and which values are secrets. `allow`: names a
    child gets beside BASE_VARIABLES (`agent.tools.pass_env`; a secret's name too, on
    purpose); `extra_blocked`: exact names whose values are secrets (the ones config takes
    secrets from); `hidden`: values redacted wherever they appear (every secret serve
    holds)."""

    allow: frozenset[str] = frozenset()
    extra_blocked: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = BLOCKED_PATTERNS
    hidden: tuple[str, ...] = attrs.field(default=(), repr=False)
    _matcher: re.Pattern[str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_matcher", _compile(self.patterns))

    def is_secret(self, name: str) -> bool:
        if name in self.allow:
            return False
        if name in self.extra_blocked:
            return True
        return self._matcher.match(name.upper()) is not None

    def child_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The allow-listed variables of `environ`: BASE_VARIABLES, then `allow`."""
        names = (*BASE_VARIABLES, *sorted(self.allow))
        return {name: environ[name] for name in names if name in environ}

    def secret_values(self, environ: Mapping[str, str]) -> list[str]:
        named = [v for k, v in environ.items() if self.is_secret(k) and k not in NOT_SECRET]
        return [v for v in (*named, *self.hidden) if len(v) >= MIN_SECRET_LENGTH]


class Redactor:
    """Replaces known secret values in text.

    `feed` streams: it redacts whole lines and holds back a partial last line
    (up to `max_line` characters), so a secret split across two reads is still
    caught. Secrets with a newline inside are not supported.
    """

    def __init__(self, secrets: Iterable[str], max_line: int = 65_536) -> None:
        values = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None
        self._max_line = max_line
        self._partial = ""

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def feed(self, text: str) -> str:
        if self._pattern is None:
            return text
        text = self._partial + text
        end = text.rfind("\n") + 1
        if end == 0 and len(text) > self._max_line:
            end = len(text)  # one enormous line: let it through rather than grow
        self._partial = text[end:]
        return self(text[:end])

    def flush(self) -> str:
        rest, self._partial = self._partial, ""
        return self(rest)
