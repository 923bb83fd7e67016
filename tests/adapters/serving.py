"""What the adapter tests share: `hermes serve` as a real process on the test's home
(restartable), with the fake model and, in a platform's harness, that platform's fake."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import attrs
import trio
from trio_websocket import open_websocket_url

from hermes.actors.snapshot import Snapshot
from hermes.home import HermesHome
from tests.fakes.openai import FakeOpenAI
from tests.processes import HERMES, wait_ready
from tests.seed import rows


def in_thread(fn, *args):
    return trio.to_thread.run_sync(fn, *args)


def until_line(proc: subprocess.Popen[str], text: str) -> None:
    """Read serve's log until a line says `text` (blocks; pytest-timeout guards)."""
    for line in proc.stderr:
        if text in line:
            return
    raise AssertionError(f"serve ended without logging {text!r}")


@attrs.define
class Serve:
    """`hermes serve` on the test's home, restartable. This one has no chat platform (its
    local endpoint only); a platform's harness (tests/adapters/<name>/serving.py) names the
    platform, its settings, its tokens and who may talk, and `platform` is its fake."""

    home: Any
    platform: Any  # the platform's fake (None: no chat platform)
    model: FakeOpenAI
    procs: list[subprocess.Popen[str]] = attrs.Factory(list)
    port: int = 0

    name = "local"
    command = (*HERMES, "serve")
    access = ""  # a platform's `allowed_users` and `owner`, unless a test says otherwise

    def tokens(self) -> dict[str, str]:
        """The environment variables holding the platform's tokens."""
        return {}

    def settings(self) -> str:
        """The platform's YAML lines under `platforms.<name>`, access aside."""
        return ""

    def configure(
        self,
        drain: float = 10,
        resume_window: float = 600,
        platform: str = "",
        top: str = "",
        access: str | None = None,
        rate_limit: int = 0,
        model: str | None = None,
        gateway: str = "",
        merge_window: float = 0,
        ops: bool = False,
    ) -> None:
        """config.yaml: `platform` adds YAML lines under the platform (indented four
        spaces), `top` adds top-level sections, `access` replaces who may talk ("" for
        pairing), `rate_limit` is gateway.rate_limit (off unless a test is about it: bursts
        from one user are how many tests load serve), `model` the model section ("" for the
        built-in offline model; default the fake), `gateway` more lines of the gateway
        section (indented two spaces), `merge_window` gateway.merge_window (off unless a
        test is about bursts, as the rate limit), `ops` the operator surfaces (off unless
        a test reads them: serve starts lighter without)."""
        if model is None:
            model = f"model: {{provider: fake, model: m, base_url: '{self.model.url}'}}\n"
        platforms = ""
        if self.platform is not None:
            platforms = (
                f"platforms:\n  {self.name}:\n"
                + self.settings()
                + (self.access if access is None else access)
                + platform
            )
        self.home.config_path.write_text(
            model + f"gateway:\n  drain_timeout: {drain}\n  resume_window: {resume_window}\n"
            f"  rate_limit: {rate_limit}\n  merge_window: {merge_window}\n"
            + gateway
            + "  local:\n    port: 0\n"
            + ("ops:\n  port: 0\n" if ops else "ops:\n  enabled: false\n")
            + platforms
            + top
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        """Start serve on this harness's home without waiting for it to be ready (the
        home is named in serve's environment: a serve shared by a module outlives the
        test whose `home` fixture exported it)."""
        env = {**os.environ, **self.tokens(), "HERMES_HOME": str(self.home.root)}
        proc = subprocess.Popen(
            [*self.command, *args], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start serve and wait for its ready line."""
        proc = self.spawn(*args)
        self.port = wait_ready(proc)
        return proc

    def close(self) -> None:
        """Kill what still runs (a test that failed half-way) and close the pipes."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)
            for stream in (proc.stdout, proc.stderr):
                stream.close()

    def kill(self) -> None:
        proc = self.procs[-1]
        proc.kill()
        proc.wait(30)

    def stop(self, proc: subprocess.Popen[str] | None = None) -> str:
        """SIGTERM: drain and exit 0; its log."""
        proc = proc or self.procs[-1]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)  # what until_line did not read
        assert proc.returncode == 0, err[-3000:]
        return err

    def journal(self) -> list[tuple[str, str, str]]:
        sql = "SELECT platform, event_id, state FROM inbound_journal ORDER BY received_at"
        return rows(self.home.state_db, sql)

    def assistant_replies(self) -> list[str]:
        found = rows(self.home.state_db, "SELECT content FROM messages WHERE role = 'assistant'")
        return [r[0] for r in found]

    async def until_mirrored(self, text: str, timeout: float = 10.0) -> None:
        """Until a brief `text` is in state.db twice: the fire's own record and its mirror.
        The mirror commits with the row's outcome, after the platform answered the send,
        and serve tells nobody outside: polled, as the outbox tests poll its rows."""
        deadline = trio.current_time() + timeout
        while (await in_thread(self.assistant_replies)).count(text) < 2:
            assert trio.current_time() < deadline, f"{text!r} was never mirrored"
            await trio.sleep(0.02)

    def outbox(self) -> list[tuple[str, str, str | None, str | None]]:
        """Each outbox row, oldest first: (chat, state, last error, the platform's id)."""
        sql = "SELECT chat_id, state, last_error, message_id FROM outbox ORDER BY id"
        return rows(self.home.state_db, sql)

    async def until_outbox(
        self, state: str, count: int = 1, timeout: float = 20.0, chat: str | None = None
    ) -> None:
        """Until `count` outbox rows (of `chat`, if named) are in `state`: polled, as
        `until_mirrored` polls."""
        deadline = trio.current_time() + timeout
        while (
            sum(r[1] == state and chat in (None, r[0]) for r in await in_thread(self.outbox))
            < count
        ):
            assert trio.current_time() < deadline, f"no {count} {state} row(s): {self.outbox()}"
            await trio.sleep(0.05)

    async def until_journal(
        self, state: str, count: int, timeout: float = 30.0, event: str | None = None
    ) -> None:
        """Until `count` journal rows (of the event `event`, if named) are in `state` (an
        answer that goes nowhere shows only there): polled, as `until_outbox` polls."""
        deadline = trio.current_time() + timeout
        while (
            sum(r[2] == state and event in (None, r[1]) for r in await in_thread(self.journal))
            < count
        ):
            assert trio.current_time() < deadline, f"no {count} {state}: {self.journal()}"
            await trio.sleep(0.05)

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await rpc(self.home, self.port, method, params)

    async def status(self) -> dict[str, Snapshot]:
        tree = Snapshot.from_dict((await self.rpc("status", {}))["result"])
        adapters = next(c for c in tree.children if c.name == "adapters")
        return {c.name: c for c in adapters.children}


@contextlib.contextmanager
def serving(harness: type[Serve], fake: Any, home: Any, model: FakeOpenAI) -> Iterator[Serve]:
    """`harness` on the test's home with the (running) `fake` (None: no chat platform),
    configured; whatever still runs is killed at the end."""
    serve = harness(home, fake, model)
    serve.configure()
    try:
        yield serve
    finally:
        serve.close()


async def rpc(home: HermesHome, port: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call to the local endpoint of the serve of `home`; its whole answer."""
    token = home.serve_token.read_text().strip()
    headers = [(b"authorization", f"Bearer {token}".encode())]
    async with open_websocket_url(f"ws://127.0.0.1:{port}/", extra_headers=headers) as ws:
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                          "params": params}))  # fmt: skip
        while True:
            msg = json.loads(await ws.get_message())
            if msg.get("id") == 1:
                return msg
