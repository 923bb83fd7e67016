"""Secrets never leave: what serve holds, kept out of commands and redacted everywhere.

One policy, fed by every secret serve holds (the variables config takes secrets
from, every value in .env, the serve token, which also signs the dashboard's
cookies). Commands run without those variables unless `agent.tools.pass_env`
names them; their values are redacted from every tool result (before the
model, the transcript, a client or the outbox sees it), from provider error
text, and from every log line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from hermes.adapters.registry import PLATFORMS
from hermes.config import Secrets
from hermes.gateway.settings import Config
from hermes.terminal.env import BLOCKED_PATTERNS, EnvPolicy, Redactor


def serve_policy(config: Config, secrets: Secrets, token: str) -> EnvPolicy:
    """Every secret serve holds; the variables named like secrets, every platform's
    own patterns included, kept out of commands."""
    names = config.secret_names()
    platforms = tuple(p for platform in PLATFORMS.values() for p in platform.secret_variables)
    return EnvPolicy(
        allow=frozenset(config.agent.tools.pass_env),
        extra_blocked=frozenset(names),
        patterns=(*BLOCKED_PATTERNS, *platforms),
        hidden=(*secrets.hidden(names), token),
    )


def serve_redactor(policy: EnvPolicy) -> Redactor:
    """The one redactor: the policy's hidden values and every secret-named variable of
    serve's own environment."""
    return Redactor(policy.secret_values(os.environ))


class _RedactingFilter(logging.Filter):
    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


@contextmanager
def redacted_logs(redact: Redactor) -> Iterator[None]:
    """Every handler of the root logger redacts what it writes, for as long as this is
    open (serve's life)."""
    handlers = list(logging.getLogger().handlers)
    found = _RedactingFilter(redact)
    for handler in handlers:
        handler.addFilter(found)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(found)
