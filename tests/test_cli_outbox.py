"""`hermes outbox` as an operator runs it: list, dead letters, retry, purge."""

from __future__ import annotations

import time

import apsw

from hermes.adapters.contract import Target
from hermes.delivery.outbox_store import enqueue, mark_dead, mark_sending
from tests.processes import hermes
from tests.seed import writing


def _states(home) -> list[tuple[int, str]]:
    conn = apsw.Connection(str(home.state_db))
    try:
        return conn.execute("SELECT id, state FROM outbox ORDER BY id").fetchall()
    finally:
        conn.close()


def test_outbox_list_retry_and_purge(home):
    empty = hermes("outbox")
    assert (empty.returncode, empty.stdout.strip()) == (0, "the outbox is empty")
    assert not home.state_db.exists()

    now = time.time()
    with writing(home.state_db) as conn:
        enqueue(conn, Target("telegram", "42"), ["hello there"], "reply", "k1", now)
        enqueue(conn, Target("telegram", "43"), ["to a blocked chat"], "reply", "k2", now)
        mark_sending(conn, 2, now)
        mark_dead(conn, 2, "403: bot was blocked by the user", now)

    listed = hermes("outbox")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert "pending" in lines[1] and "telegram:42" in lines[1] and "hello there" in lines[1]
    assert "dead" in lines[2] and "[403: bot was blocked by the user]" in lines[2]
    dead = hermes("outbox", "--dead").stdout.splitlines()
    assert len(dead) == 2 and "dead" in dead[1]

    assert hermes("outbox", "retry", "1").returncode == 1  # pending: nothing to retry
    again = hermes("outbox", "retry", "2")
    assert again.returncode == 0, again.stderr
    assert _states(home) == [(1, "pending"), (2, "pending")]

    with writing(home.state_db) as conn:
        mark_dead(conn, 2, "400: chat not found", now)
    purged = hermes("outbox", "purge", "--dead")
    assert purged.stdout.strip() == "deleted 1 dead row"
    assert _states(home) == [(1, "pending")]
