"""The end of `hermes setup`: the owner found by a code they send the bot, then a message
to the owner on each platform and their answer waited for, and a table of what worked."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable

import attrs

from hermes.actors.clock import Clock
from hermes.adapters.contract import Target
from hermes.cli.act import perform
from hermes.cli.setup_serve import journal_event, outbox_state, wait_for
from hermes.delivery.outbox_store import DEAD, SENT, UNKNOWN
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.outbox import Queued, SendArgs

CODE_LETTERS = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L to misread
CODE_LENGTH = 6
GREETING = (
    "hermes is set up and this is its first message to you. Answer anything here and"
    " `hermes setup` will see it arrive."
)
SLACK = 1.0  # seconds a look reaches back (serve's clock and ours, a message in flight)


def new_code() -> str:
    return "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))


@attrs.define
class Outcome:
    """What worked on one platform, for the table at the end."""

    platform: str
    token: str = "kept"  # what the token check said; `kept`: the platform was not asked
    owner: str | None = None
    target: Target | None = None  # where the owner is written to
    sent: str = "-"
    answered: str = "-"

    def ok(self) -> bool:
        return self.owner is not None and self.sent in ("-", SENT) and self.answered != "no"


def progress_line(what: str) -> Callable[[float], None]:
    """A line that counts the seconds waited, rewritten in place."""

    def show(waited: float) -> None:
        sys.stdout.write(f"\r  {what}... {int(waited)} s (Ctrl-C stops)  ")
        sys.stdout.flush()

    return show


def end_progress() -> None:
    """The progress line cleared (a terminal), or ended (a log)."""
    sys.stdout.write("\r\x1b[K" if sys.stdout.isatty() else "\n")
    sys.stdout.flush()


def discover(
    home: HermesHome, outcome: Outcome, timeout: float, say: Callable[[str], None]
) -> None:
    """The owner of `outcome.platform`: who sends the bot the code shown here."""
    code = new_code()
    name = outcome.platform
    say(f"\nSend this code to your bot on {name} (a direct message): {code}")
    since = Clock().now() - SLACK
    found = wait_for(
        lambda: journal_event(home, name, since, text=code),
        timeout,
        progress_line(f"waiting for the code on {name}"),
    )
    end_progress()
    if found is None:
        say(f"  no message with {code} came on {name} within {timeout:g} s")
        return
    who = f" ({found.user_name})" if found.user_name else ""
    say(f"  {name}: the code came from user {found.user_id}{who}: you are its owner")
    outcome.owner = found.user_id
    outcome.target = found.target()


def greet(
    home: HermesHome,
    config: Config,
    outcomes: list[Outcome],
    timeout: float,
    say: Callable[[str], None],
) -> None:
    """A message to the owner on each platform through the outbox, then their answers
    waited for."""
    since = Clock().now() - SLACK
    keys = {}
    for outcome in outcomes:
        if outcome.target is None:
            continue
        target = outcome.target
        queued: Queued = perform(
            home,
            config,
            "outbox.send",
            SendArgs(target.platform, target.chat_id, GREETING, target.thread_id, target.scope_id),
        )
        keys[outcome.platform] = queued.key
    for outcome in outcomes:
        key = keys.get(outcome.platform)
        if key is None:
            continue
        wait_for(
            lambda key=key: _done(outbox_state(home, key)),
            timeout,
            progress_line(f"sending to you on {outcome.platform}"),
        )
        end_progress()
        outcome.sent = outbox_state(home, key) or "not queued"
    waiting = [o for o in outcomes if o.sent == SENT]
    if not waiting:
        return
    say(f"\nA message from hermes waits for you on {', '.join(o.platform for o in waiting)}.")
    say("Answer it there (anything will do).")
    for outcome in waiting:
        answer = wait_for(
            lambda o=outcome: journal_event(home, o.platform, since, user_id=o.owner),
            timeout,
            progress_line(f"waiting for your answer on {outcome.platform}"),
        )
        end_progress()
        outcome.answered = "received" if answer is not None else "no"


def _done(state: str | None) -> str | None:
    """Something (truthy) once the message's fate is known."""
    return state if state in (SENT, DEAD, UNKNOWN) else None


def table(outcomes: list[Outcome]) -> str:
    """What worked, a platform a line."""
    rows = [("platform", "token", "owner", "message", "answer")]
    rows += [(o.platform, o.token, o.owner or "not found", o.sent, o.answered) for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
