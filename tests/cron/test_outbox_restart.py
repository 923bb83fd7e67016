"""The cron outbox across a real serve restart: a drain cuts a fire's delivery short;
the next serve sends what never started and marks what was in flight unknown."""

from __future__ import annotations

import json
import signal

import apsw
import pytest
import trio
from trio_websocket import open_websocket_url

from tests.processes import hermes, wait_ready

TARGETS = 200  # each brief is ~50 KB: far more than the socket buffers hold
BRIEF = "python3 -c \"print('x' * 49_000)\""


def rows(home) -> list[tuple[str, str | None]]:
    conn = apsw.Connection(str(home.state_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute("SELECT status, error FROM cron_deliveries ORDER BY id"))
    finally:
        conn.close()


@pytest.mark.timeout(120)
async def test_a_delivery_cut_by_a_drain_resumes_in_the_next_serve(home, spawn):
    home.config_path.write_text("gateway:\n  drain_timeout: 1\n  local:\n    port: 0\n")
    (home.scripts / "brief.sh").write_text(BRIEF + "\n")
    targets = ",".join(f"local:reader:{n}" for n in range(TARGETS))
    added = hermes("cron", "add", "every 1h", "--name", "brief", "--script", "brief.sh",
                   "--no-agent", "--deliver", targets)  # fmt: skip
    assert added.returncode == 0, added.stderr

    first = spawn()
    port = await trio.to_thread.run_sync(wait_ready, first)
    token = home.serve_token.read_text().strip()
    auth = [(b"authorization", f"Bearer {token}".encode())]
    async with open_websocket_url(f"ws://127.0.0.1:{port}/", extra_headers=auth,
                                  max_message_size=2**20, message_queue_size=0) as ws:  # fmt: skip

        async def call(request_id: int, method: str, params: dict) -> None:
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                              "method": method, "params": params}))  # fmt: skip
            while json.loads(await ws.get_message()).get("id") != request_id:
                pass

        await call(1, "cron.add", {"schedule": "every 1h", "prompt": "follow", "session": "reader"})
        await call(2, "cron.run", {"job": "brief"})
        note = json.loads(await ws.get_message())  # the first brief reached this reader...
        assert note["method"] == "cron.brief"
        first.send_signal(signal.SIGTERM)  # ...which now reads no more: the sends back up
        assert await trio.to_thread.run_sync(first.wait, 60) == 0
    before = rows(home)
    assert ("pending", None) in before and any(s == "attempted" for s, _ in before)

    second = spawn()
    await trio.to_thread.run_sync(wait_ready, second)
    pending = sum(status == "pending" for status, _ in before)
    await trio.to_thread.run_sync(_until_resumed, second, pending)  # as its scheduler starts
    second.send_signal(signal.SIGTERM)
    assert await trio.to_thread.run_sync(second.wait, 60) == 0
    after = rows(home)
    for (was, _), (now, error) in zip(before, after, strict=True):
        if was == "sent":
            assert now == "sent"  # never sent twice
        elif was == "attempted":
            assert now == "unknown"  # in flight when serve stopped: not sent again
        else:  # never started: the next serve sent it (no reader is connected now)
            assert (now, error.split(": ", 1)[1]) == (
                "failed",
                "no client of session reader is connected",
            ), (was, now, error)


def _until_resumed(proc, count: int) -> None:
    """Until serve has logged the outcome of `count` deliveries left from before."""
    for line in proc.stderr:
        if "left from before the restart" in line:
            count -= 1
            if count == 0:
                return
