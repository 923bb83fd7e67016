"""`hermes serve` as a real process with its Discord adapter (built in) against the fake
Discord (tests/fakes/discord.py) and the fake model."""

from __future__ import annotations

import os
import subprocess

from tests.adapters.serving import Serve
from tests.fakes.discord import TOKEN
from tests.processes import HERMES

TOKEN_VAR = "DISCORD_BOT_TOKEN"


class DiscordServe(Serve):
    """Serve with `platforms.discord` pointed at the fake."""

    def configure(
        self,
        drain: float = 10,
        resume_window: float = 600,
        platform: str = "",
        top: str = "",
        access: str = "    allow_all_users: true\n    group_policy: open\n",
    ) -> None:
        self.home.config_path.write_text(
            f"model: {{provider: fake, model: m, base_url: '{self.model.url}'}}\n"
            f"gateway:\n  drain_timeout: {drain}\n  resume_window: {resume_window}\n"
            "  local:\n    port: 0\n"
            "platforms:\n"
            f"  discord:\n    token_env: {TOKEN_VAR}\n    base_url: '{self.platform.url}'\n"
            + access
            + platform
            + top
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        env = {**os.environ, TOKEN_VAR: TOKEN}
        proc = subprocess.Popen([*HERMES, "serve", *args], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.procs.append(proc)
        return proc
