"""`hermes serve` as a real process with its Signal adapter against the fake signal-cli
daemon (tests/fakes/signal.py), keep-alives every second."""

from __future__ import annotations

from tests.adapters.serving import Serve
from tests.fakes.signal import ACCOUNT, ALICE

KEEPALIVE = 1.0  # the fake's and hermes's: three missed make the deadline


class SignalServe(Serve):
    """Serve with `platforms.signal` on the fake daemon; Alice may talk, in groups when
    she mentions hermes."""

    name = "signal"
    access = f"    allowed_users: ['{ALICE}']\n    owner: '{ALICE}'\n    group_policy: open\n"

    def settings(self) -> str:
        return (f"    rpc: '{self.platform.url}'\n    account: '{ACCOUNT}'\n"
                f"    keepalive: {KEEPALIVE}\n")  # fmt: skip
