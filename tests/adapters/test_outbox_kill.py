"""A SIGKILLed serve with outbox rows in every state, then a restart: a pending row is
sent once, a `sending` one is marked unknown, nothing is sent twice to a platform that
does not deduplicate, and a permanent error is dead at once and never retried.

One serve queues cron briefs to four chats of the test platform, which does not
deduplicate: `dead` meets a 403 (dead at once), `ok` is sent, `later` meets a
429 asking for an hour (a retry row), and `cut` is two chunks, the first held by
the platform in flight (`sending`) and the second pending behind it. The serve is
SIGKILLed; the platform then takes the held chunk (its answer is lost with the
process). The next serve marks the chunk `unknown` and does not send it again,
sends the pending chunk once, after it, and leaves alone the sent, the dead (never
retried) and the waiting retry; `hermes outbox --dead` shows the unknown and the
dead row.
"""

from __future__ import annotations

import apsw
import attrs
import pytest
import trio

from tests.adapters.serving import in_thread
from tests.processes import hermes

CHATS = ("dead", "ok", "later", "cut")
LONG = "\n".join(f"line {i:03}: " + "x" * 50 for i in range(100))  # ~6100 chars: 2 chunks
SCRIPT = "print({text!r})\n"


@attrs.frozen
class Row:
    id: int
    chat: str
    state: str
    attempts: int
    key: str
    text: str


def outbox(home) -> list[Row]:
    """The outbox's rows, in order, read from state.db read-only."""
    conn = apsw.Connection(str(home.state_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = conn.execute(
            "SELECT id, chat_id, state, attempts, idempotency_key, text FROM outbox ORDER BY id"
        )
        return [Row(*r) for r in found]
    finally:
        conn.close()


def states(home) -> dict[str, list[str]]:
    """Each chat's row states, in order."""
    by_chat: dict[str, list[str]] = {}
    for row in outbox(home):
        by_chat.setdefault(row.chat, []).append(row.state)
    return by_chat


async def until_states(home, chat: str, want: list[str], timeout: float = 10.0) -> None:
    """Poll state.db (the outbox writes its outcome after the platform answered, and
    tells nobody) until `chat`'s rows are in the states `want`."""
    deadline = trio.current_time() + timeout
    while (got := states(home).get(chat)) != want:
        assert trio.current_time() < deadline, f"{chat}: {got}, not {want}"
        await trio.sleep(0.02)


def add_job(home, chat: str, text: str) -> None:
    """A job whose script prints `text`, delivered to the test platform's `chat`."""
    (home.scripts / f"{chat}.py").write_text(SCRIPT.format(text=text))
    added = hermes("cron", "add", "every 1h", "--name", chat, "--script", f"{chat}.py",
                   "--no-agent", "--deliver", f"testplatform:{chat}")  # fmt: skip
    assert added.returncode == 0, added.stderr


async def fire(serve, chat: str) -> None:
    answer = await serve.rpc("cron.run", {"job": chat})
    assert "result" in answer, answer


def sent_to(platform, chat: str) -> list[dict]:
    return [s for s in platform.sent if s["chat_id"] == chat]


@pytest.mark.timeout(120)
async def test_a_sigkill_with_rows_in_every_state_sends_nothing_twice(serve):
    platform, home = serve.platform, serve.home
    for chat in CHATS:
        add_job(home, chat, LONG if chat == "cut" else f"the brief for {chat}")
    serve.start()

    platform.fail_sends(403)
    await fire(serve, "dead")
    await in_thread(platform.wait_refused, 1)
    await until_states(home, "dead", ["dead"])

    await fire(serve, "ok")
    await in_thread(platform.wait_sent, 1)
    await until_states(home, "ok", ["sent"])

    platform.fail_sends(429, retry_after=3600)
    await fire(serve, "later")
    await in_thread(platform.wait_refused, 2)
    await until_states(home, "later", ["retry"])

    platform.hold_sends()
    await fire(serve, "cut")
    await in_thread(platform.wait_held, 1)  # chunk 0 in flight: marked sending before it
    serve.kill()  # well within the adapter's 10 s send timeout: still `sending`

    before = outbox(home)
    assert states(home) == {
        "dead": ["dead"], "ok": ["sent"], "later": ["retry"], "cut": ["sending", "pending"]
    }  # fmt: skip
    cut = [r for r in before if r.chat == "cut"]
    (dead,) = [r for r in before if r.chat == "dead"]
    assert [r.key.rsplit(":", 1)[1] for r in cut] == ["0", "1"]
    refused = platform.refused

    platform.release_sends()  # the platform takes chunk 0; nobody reads its answer
    await in_thread(platform.wait_sent, 2)
    serve.start()
    await in_thread(platform.wait_sent, 3, 30.0)  # chunk 1, by the second serve
    serve.stop()  # the drain sends whatever else was due: a resend would be seen below

    assert [s["text"] for s in sent_to(platform, "cut")] == [r.text for r in cut]
    assert [s["idempotency_key"] for s in sent_to(platform, "cut")] == [r.key for r in cut]
    assert [s["text"] for s in sent_to(platform, "ok")] == ["the brief for ok\n"]
    assert len(platform.sent) == 3  # nothing to `dead` or `later`, nothing twice
    assert platform.refused == refused  # `dead` was not tried again, nor `later`

    after = {r.id: r for r in outbox(home)}
    assert [after[r.id].state for r in cut] == ["unknown", "sent"]
    assert [after[r.id].attempts for r in cut] == [1, 1]
    for row in before:
        if row.chat != "cut":
            assert (after[row.id].state, after[row.id].attempts) == (row.state, 1), row.chat

    listed = hermes("outbox", "--dead")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()[1:]  # under the header
    assert [line.split()[:3] for line in lines] == [
        [str(r.id), state, f"testplatform:{r.chat}"]
        for r, state in ((dead, "dead"), (cut[0], "unknown"))
    ]
