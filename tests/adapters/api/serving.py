"""`hermes serve` as a real process with `platforms.api` on a free port, and the official
`openai` client pointed at it: the API's users are the tests (no fake platform)."""

from __future__ import annotations

import subprocess

import openai

from tests.adapters.serving import Serve

KEYS = {
    "ALICE_KEY": "sk-alice-0123456789",
    "BOB_KEY": "sk-bob-0123456789",
    "CAROL_KEY": "sk-carol-0123456789",
}
USERS = {"ALICE_KEY": "alice", "BOB_KEY": "bob", "CAROL_KEY": "carol"}
ALICE, BOB, CAROL = KEYS["ALICE_KEY"], KEYS["BOB_KEY"], KEYS["CAROL_KEY"]  # alice owns hermes
CLIENT = "the openai client"  # no fake: the tests are the platform's users


class ApiServe(Serve):
    """Serve with the API on a free port (HERMES_HOME/api.port), alice its owner."""

    name = "api"
    access = "    owner: alice\n"
    api_port = 0

    def tokens(self) -> dict[str, str]:
        return dict(KEYS)

    def settings(self) -> str:
        keys = ", ".join(f"{var}: {user}" for var, user in USERS.items())
        return f"    port: 0\n    keys: {{{keys}}}\n"

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = super().start(*args)
        self.api_port = int(self.home.listener_port("api").read_text())
        return proc

    def client(self, key: str = ALICE) -> openai.OpenAI:
        """The official client as a user configures it; it retries nothing by itself (a
        test says when a request is sent again)."""
        return openai.OpenAI(
            base_url=f"http://127.0.0.1:{self.api_port}/v1",
            api_key=key,
            max_retries=0,
            timeout=60,
        )
