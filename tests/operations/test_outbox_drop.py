"""`hermes outbox drop ID` as an operator runs it: only a dead or unknown row is forgotten.
A row still waiting to go, or one sent, is refused (exit status 1, the row named) and
stays as it was; nothing else is touched."""

from __future__ import annotations

import time

from hermes.adapters.contract import Target
from hermes.delivery.outbox_store import enqueue, mark_dead, mark_sending, mark_sent, mark_unknown
from tests.processes import hermes
from tests.seed import rows, writing


def test_only_a_dead_or_unknown_row_is_dropped(home):
    now = time.time()
    with writing(home.state_db) as conn:
        for chat in ("41", "42", "43", "44"):
            enqueue(conn, Target("telegram", chat), [f"to {chat}"], "reply", f"k{chat}", now)
        for row in (2, 3, 4):
            mark_sending(conn, row, now)
        mark_sent(conn, 2, "m-2", now)
        mark_dead(conn, 3, "403: bot was blocked by the user", now)
        mark_unknown(conn, 4, "no answer came", now)
    states = "SELECT id, chat_id, state FROM outbox ORDER BY id"
    before = [(1, "41", "pending"), (2, "42", "sent"), (3, "43", "dead"), (4, "44", "unknown")]
    assert rows(home.state_db, states) == before

    for row in (1, 2):  # waiting to go, and sent
        refused = hermes("outbox", "drop", str(row))
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == f"hermes: no dead or unknown outbox row {row}\n"
    for row in (3, 4):
        dropped = hermes("outbox", "drop", str(row))
        assert (dropped.returncode, dropped.stdout) == (0, f"row {row} dropped\n"), dropped.stderr
    assert rows(home.state_db, states) == [(1, "41", "pending"), (2, "42", "sent")]
