"""What the chat-platform benches (telegram.py, slack.py, discord.py) share: the fake
in its own process, `hermes serve` on a fresh home with the offline model, and the
small figures they print. Each bench keeps what is its platform's own: how a user
writes, the bare echo client, the checks."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.gateway.serve import READY_LINE  # noqa: E402


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


class FakeProcess:
    """A fake platform (`python -m tests.fakes.<name> ...`) in its own process, driven
    over its `_fake/` HTTP surface."""

    def __init__(self, name: str, *args: str) -> None:
        argv = [sys.executable, "-m", f"tests.fakes.{name}", *args]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            kill(self.proc)
            raise SystemExit(f"the fake {name} did not start")

    async def inject(self, http: httpx.AsyncClient, what: str, kwargs: dict[str, Any]) -> Any:
        """`_fake/<what>` with `kwargs`; its result (an update's, event's or message's id)."""
        body = (await http.post(f"{self.url}/_fake/{what}", json=kwargs)).json()
        if not body.get("ok"):
            raise RuntimeError(f"the fake refused an injection: {body!r}")
        return body["result"]

    async def state(self, http: httpx.AsyncClient) -> dict[str, Any]:
        body = (await http.get(f"{self.url}/_fake/state")).json()
        if not body.get("ok"):
            raise RuntimeError(f"the fake's state: {body!r}")
        return body["result"]


class Serve:
    """`hermes serve` on a fresh home under `tmp` with the offline model (no `model:`
    section) and one platform (`platform`: its YAML under `platforms:`), its tokens in
    the environment; started and ready."""

    def __init__(self, tmp: Path, platform: str, tokens: dict[str, str]) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        (self.home / "config.yaml").write_text(
            "gateway:\n  local:\n    port: 0\nops:\n  port: 0\nplatforms:\n" + platform
        )
        env = {**os.environ, "HERMES_HOME": str(self.home), **tokens}
        self.log_path = tmp / "serve.stderr"
        with open(self.log_path, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hermes.cli.main", "serve"],
                env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
            )  # fmt: skip
        ready = ""
        for line in self.proc.stdout:
            if line.startswith(READY_LINE):
                ready = line
                break
        if not ready:
            self.proc.wait()
            raise SystemExit(f"hermes serve exited ({self.proc.returncode}) before ready:\n"
                             f"{self.log()[-3000:]}")  # fmt: skip
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # never blocks it

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> str:
        """SIGTERM: drain and exit; a warning if it did not exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill(self.proc)
                return "serve did not drain within 30 s; killed"
        if self.proc.returncode != 0:
            return f"serve exited {self.proc.returncode} after SIGTERM"
        return ""


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] * 1000


def per_message(seconds: float, count: int) -> str:
    return f"{seconds * 1000 / count:.3f} ms"
