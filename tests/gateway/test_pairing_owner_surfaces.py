"""Approving as an owner where config names owners: the CLI, JSON-RPC and the dashboard
take the same argument and answer the same error, from a real serve."""

from __future__ import annotations

import time

import httpx
import pytest
import trio

from hermes.state.pairing import request_code
from tests.adapters.serving import rpc
from tests.ops.surfaces import bearer, ops_url
from tests.processes import hermes, wait_ready
from tests.seed import rows, writing

REFUSED = (
    "gateway.owners names the owners of telegram, so pairing makes none there: approve them"
    " as a user, or name them an owner in config.yaml"
)


@pytest.mark.timeout(120)
async def test_owner_is_refused_alike_on_every_surface_and_uses_up_nothing(home, spawn):
    home.config_path.write_text(
        "gateway:\n  owners: ['slack:U1']\n  local:\n    port: 0\nops:\n  port: 0\n"
    )
    port = wait_ready(spawn())
    with writing(home.state_db) as conn:
        code = request_code(conn, "telegram", "4242", "Zed", time.time(), chat_id="4242").code

    cli = await trio.to_thread.run_sync(
        lambda: hermes("pairing", "approve", "telegram", code, "--owner")
    )
    assert (cli.returncode, cli.stderr) == (2, f"hermes: {REFUSED}\n")

    params = {"platform": "telegram", "code": code, "owner": True}
    answer = await rpc(home, port, "pairing.approve", params)
    assert answer["error"] == {
        "code": -32602,
        "message": REFUSED,
        "data": {"family": "invalid", "type": "OwnerInConfig"},
    }

    async with httpx.AsyncClient(base_url=ops_url(home), headers=bearer(home)) as http:
        http.headers["X-CSRF-Token"] = (await http.get("/api/session")).json()["csrf"]
        path = "/api/pairing/telegram/approve"
        page = await http.post(path, json={"code": code, "owner": True})
        assert page.status_code == 400
        assert page.json() == {"error": REFUSED, "family": "invalid", "type": "OwnerInConfig"}
        assert (await http.post(path, json={"code": code, "owner": "yes"})).status_code == 400
        assert rows(home.state_db, "SELECT * FROM pairing_failures") == []  # no code tried
        # The code still works, as a user's.
        done = await http.post(path, json={"code": code})
        assert done.status_code == 200, done.text
        assert (done.json()["user_id"], done.json()["owner"]) == ("4242", False)
    assert rows(home.state_db, "SELECT user_id, owner FROM pairing_approved") == [("4242", 0)]
