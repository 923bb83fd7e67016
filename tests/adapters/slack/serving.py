"""`hermes serve` as a real process with its Slack adapter (built in) against the fake
Slack (tests/fakes/slack.py) and the fake model."""

from __future__ import annotations

import os
import subprocess

from tests.adapters.serving import Serve
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN
from tests.processes import HERMES

BOT_VAR, APP_VAR = "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"


class SlackServe(Serve):
    """Serve with `platforms.slack` pointed at the fake (a socket idle 3 s is dead)."""

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
            f"  slack:\n    token_env: {BOT_VAR}\n    app_token_env: {APP_VAR}\n"
            f"    base_url: '{self.platform.url}'\n    idle_timeout: 3\n" + access + platform + top
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        env = {**os.environ, BOT_VAR: BOT_TOKEN, APP_VAR: APP_TOKEN}
        proc = subprocess.Popen([*HERMES, "serve", *args], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.procs.append(proc)
        return proc
