"""One fire lifecycle wherever a fire runs: `hermes cron run` and serve's scheduler
record and deliver alike; a cancel reaches a CLI-run fire; a SIGKILLed serve's tree
and run are cleaned up by the next serve. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
import trio
from trio_websocket import open_websocket_url

from hermes.cron.lifecycle import EXPIRED
from hermes.terminal.tree import ProcessId
from tests import seed
from tests.processes import HERMES, hermes, wait_ready

CONFIG = (
    "gateway:\n  local:\n    port: 0\nops:\n  port: 0\n"
    "cron:\n  lease_seconds: 2\n  heartbeat_seconds: 0.5\n"
)

# The script looks at its own job's lease twice, a heartbeat apart, from state.db.
LEASE_SCRIPT = """\
import sqlite3
from time import sleep as run_for  # the script runs a heartbeat's length, it waits on nothing
db = {db!r}
def lease():
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT lease_expires_at FROM cron_jobs").fetchone()[0]
    finally:
        conn.close()
first = lease()
run_for(1.2)
print(f"lease {{first}} then {{lease()}}")
"""

# A tree that ignores SIGTERM, with a member that escaped into its own session.
STUBBORN = """\
trap '' TERM
setsid bash -c 'trap "" TERM; echo $$ > {dir}/escaped.pid; exec sleep 300' &
echo $$ > {dir}/leader.pid
while [ ! -s {dir}/escaped.pid ]; do sleep 0.05; done
echo up > {dir}/up
sleep 300
"""


def rows(home, sql: str) -> list[tuple]:
    return seed.rows(home.state_db, sql)


def pids(directory, *names) -> list[ProcessId]:
    return [ProcessId.of(int((directory / name).read_text())) for name in names]


async def rpc(port: int, token: str, method: str, params: dict) -> dict:
    headers = [(b"authorization", f"Bearer {token}".encode())]
    async with open_websocket_url(f"ws://127.0.0.1:{port}/", extra_headers=headers) as ws:
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                          "params": params}))  # fmt: skip
        return json.loads(await ws.get_message())


@pytest.mark.timeout(120)
def test_cron_run_and_the_scheduler_fire_through_one_lifecycle(home, spawn):
    home.config_path.write_text(CONFIG)
    (home.scripts / "lease.py").write_text(LEASE_SCRIPT.format(db=str(home.state_db)))
    added = hermes("cron", "add", "every 1h", "--name", "both", "--script", "lease.py",
                   "--no-agent", "--deliver", "telegram:42,local")  # fmt: skip
    assert added.returncode == 0, added.stderr
    job_id = added.stdout.split()[1]

    ran = hermes("cron", "run", "both")  # way 1: in this process, no serve
    assert ran.returncode == 0, ran.stderr

    serve = spawn()  # way 2: serve's scheduler, asked to fire now
    port = wait_ready(serve)
    token = home.serve_token.read_text().strip()
    answer = trio.run(rpc, port, token, "cron.run", {"job": "both"})
    assert answer["result"]["job"] == job_id
    serve.send_signal(signal.SIGTERM)  # the drain lets the fire in flight finish
    assert serve.wait(timeout=60) == 0

    runs = rows(home, "SELECT fence, owner, status, delivery_error, output_path FROM cron_runs"
                      " ORDER BY fence")  # fmt: skip
    assert [r[0] for r in runs] == [1, 2]
    assert runs[0][1].startswith("cli:") and not runs[1][1].startswith("cli:")
    for fence, _, status, delivery_error, output_path in runs:
        assert status == "ok", (fence, status)
        assert delivery_error == "telegram:42: no telegram adapter is configured"
        first, then = map(float, open(output_path).read().split("lease ")[1].split()[::2])
        assert then > first  # the lease was renewed while the fire ran: it heartbeats
    deliveries = rows(home, "SELECT fence, platform, chat_id, status, error FROM cron_deliveries"
                            " ORDER BY id")  # fmt: skip
    assert [d[1:] for d in deliveries] == [
        ("telegram", "42", "failed", "telegram:42: no telegram adapter is configured")
    ] * 2
    assert [d[0] for d in deliveries] == [1, 2]


@pytest.mark.timeout(60)
def test_a_cancel_reaches_a_fire_that_cron_run_runs_elsewhere(home):
    home.config_path.write_text(CONFIG)
    (home.scripts / "stubborn.sh").write_text(STUBBORN.format(dir=home.root))
    os.mkfifo(home.root / "up")
    added = hermes("cron", "add", "every 1h", "--name", "stubborn", "--script", "stubborn.sh",
                   "--no-agent")  # fmt: skip
    assert added.returncode == 0, added.stderr
    fire = subprocess.Popen([*HERMES, "cron", "run", "stubborn"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert (home.root / "up").read_text() == "up\n"  # blocks until the tree is up
        tree = pids(home.root, "leader.pid", "escaped.pid")
        assert all(p is not None and p.alive() for p in tree)
        cancelled = hermes("cron", "cancel", "stubborn")
        assert cancelled.returncode == 0, cancelled.stderr
        began = time.monotonic()
        fire.wait(timeout=30)  # the fire ends once its tree is killed
        took = time.monotonic() - began
    finally:
        if fire.poll() is None:
            fire.kill()
            fire.wait()
    assert not any(p.alive() for p in tree)  # SIGKILL after the grace, escaped member too
    # grace (2 s), then the kill: far from the 300 s the tree would run, even when busy
    assert took < 2.0 + 20.0, took
    assert fire.returncode == 1
    ((status, error),) = rows(home, "SELECT status, error FROM cron_runs")
    assert (status, error) == ("cancelled", None)  # the late result did not win
    ((last_status,),) = rows(home, "SELECT last_status FROM cron_jobs")
    assert last_status == "cancelled"


@pytest.mark.timeout(90)
def test_a_sigkilled_serves_tree_and_run_are_cleaned_up_by_the_next_serve(home, spawn):
    home.config_path.write_text(CONFIG)
    (home.scripts / "stubborn.sh").write_text(STUBBORN.format(dir=home.root))
    os.mkfifo(home.root / "up")
    added = hermes("cron", "add", "every 1h", "--name", "stubborn", "--script", "stubborn.sh",
                   "--no-agent")  # fmt: skip
    job_id = added.stdout.split()[1]

    first = spawn()
    port = wait_ready(first)
    token = home.serve_token.read_text().strip()
    trio.run(rpc, port, token, "cron.run", {"job": "stubborn"})
    assert (home.root / "up").read_text() == "up\n"
    tree = pids(home.root, "leader.pid", "escaped.pid")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert all(p.alive() for p in tree)  # orphaned, still running: what the next serve finds

    second = spawn()
    wait_ready(second)  # it kills what the killed serve left before it starts anything
    assert not any(p.alive() for p in tree)
    for line in second.stderr:  # the lease runs out and the scheduler notices at once
        if f"cron {job_id} run 1: lease expired" in line:
            break
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0
    ((status, error),) = rows(home, "SELECT status, error FROM cron_runs")
    assert (status, error) == ("interrupted", EXPIRED)
