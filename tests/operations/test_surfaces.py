"""One operator action, three surfaces: the CLI, JSON-RPC and the dashboard answer the
same bad input with the same typed error, because they run the same function; and a
change made from the CLI reaches the running serve at once, not at a poll."""

from __future__ import annotations

import os
import signal

import apsw
import httpx
import pytest
import trio

from tests.adapters.serving import rpc
from tests.ops.surfaces import bearer, ops_url
from tests.processes import hermes, wait_ready

WRONG_CODE = (
    "no pending request with that code on telegram (wrong, expired or already used;"
    " `hermes pairing list` shows the pending ones)"
)
NO_JOB = "no cron job with id or name 'nope'"


async def cli(*args: str):
    return await trio.to_thread.run_sync(lambda: hermes(*args))


@pytest.mark.timeout(120)
async def test_the_same_bad_input_is_the_same_error_on_every_surface(home, spawn):
    # With no serve, the CLI runs the action on state.db itself: the same error.
    alone = await cli("pairing", "approve", "telegram", "WRONGCDE")
    assert (alone.returncode, alone.stderr) == (1, f"hermes: {WRONG_CODE}\n")

    port = wait_ready(spawn())
    for cli_args, method, params, path, message, kind in [
        (("pairing", "approve", "telegram", "WRONGCDE"), "pairing.approve",
         {"platform": "telegram", "code": "WRONGCDE"}, "/api/pairing/telegram/approve",
         WRONG_CODE, "PairingRefused"),
        (("cron", "run", "nope"), "cron.run", {"job": "nope"}, "/api/cron/nope/run", NO_JOB,
         "JobNotFound"),
    ]:  # fmt: skip
        through_serve = await cli(*cli_args)  # a change: sent to the running serve
        assert (through_serve.returncode, through_serve.stderr) == (1, f"hermes: {message}\n")

        answer = await rpc(home, port, method, params)
        assert answer["error"] == {
            "code": -32602,
            "message": message,
            "data": {"family": "not_found", "type": kind},
        }

        async with httpx.AsyncClient(base_url=ops_url(home), headers=bearer(home)) as http:
            http.headers["X-CSRF-Token"] = (await http.get("/api/session")).json()["csrf"]
            body = {"code": params["code"]} if "code" in params else None
            page = await http.post(path, json=body)
        assert page.status_code == 404
        assert page.json() == {"error": message, "family": "not_found", "type": kind}

    # Each wrong code counted once toward the lockout, whichever surface it came through.
    conn = apsw.Connection(str(home.state_db))
    assert conn.execute("SELECT count(*) FROM pairing_failures").get == 4
    conn.close()


@pytest.mark.timeout(60)
def test_a_job_added_from_the_cli_fires_on_time_without_a_poll(home, spawn):
    fifo = home.root / "fired"
    os.mkfifo(fifo)
    (home.scripts / "tick.sh").write_text(f"echo tick > {fifo}\n")
    reader = os.open(fifo, os.O_RDWR)  # held open: the script's write never blocks
    serve = spawn()
    try:
        wait_ready(serve)
        added = hermes("cron", "add", "in 2s", "--script", "tick.sh", "--no-agent")
        assert added.returncode == 0, added.stderr
        assert os.read(reader, 64) == b"tick\n"  # blocks until the fire (timeout: pytest's)
        serve.send_signal(signal.SIGTERM)  # its stop ends the fire's script too, if it still
        serve.wait(timeout=30)  # runs: the fixture's kill would leave it behind
    finally:
        os.close(reader)
    conn = apsw.Connection(str(home.state_db))
    [(created, started)] = conn.execute(
        "SELECT j.created_at, r.started_at FROM cron_jobs j JOIN cron_runs r ON r.job_id = j.id"
    )
    conn.close()
    assert 2.0 <= started - created <= 2.5, started - created
