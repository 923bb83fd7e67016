"""A SIGKILLed serve with outbox rows in every state, then a restart: a pending row is
sent once, a `sending` one is marked unknown, nothing is sent twice to a platform that
does not deduplicate, and a permanent error is dead at once and never retried.

One serve queues cron briefs to four Telegram chats (Telegram does not deduplicate):
`dead` meets a 403 (dead at once), `ok` is sent, `later` meets a 429 asking for an
hour (a retry row), and `cut` is two chunks, the first held in flight on its way to
the platform (`sending`; tests/adapters/relay.py holds it) and the second pending
behind it. The serve is SIGKILLed; the platform then takes the held chunk (its answer
is lost with the process). The next serve marks the chunk `unknown` and does not send
it again, sends the pending chunk once, after it, and leaves alone the sent, the dead
(never retried) and the waiting retry; `hermes outbox --dead` shows the unknown and
the dead row.
"""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import attrs
import pytest
import trio

from tests.adapters.relay import HeldRelay
from tests.adapters.serving import in_thread, serving
from tests.adapters.telegram.serving import TelegramServe
from tests.fakes.telegram import parse_markdown_v2
from tests.processes import hermes

CHATS = {"dead": "501", "ok": "502", "later": "503", "cut": "504"}  # name: Telegram chat id
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
    """The outbox's rows, in order, read from state.db read-only (`chat` by its name)."""
    conn = apsw.Connection(str(home.state_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = conn.execute(
            "SELECT id, chat_id, state, attempts, idempotency_key, text FROM outbox ORDER BY id"
        )
        names = {chat_id: name for name, chat_id in CHATS.items()}
        return [Row(r[0], names[r[1]], *r[2:]) for r in found]
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
    """A job whose script prints `text`, delivered to the Telegram chat `chat`."""
    (home.scripts / f"{chat}.py").write_text(SCRIPT.format(text=text))
    added = hermes("cron", "add", "every 1h", "--name", chat, "--script", f"{chat}.py",
                   "--no-agent", "--deliver", f"telegram:{CHATS[chat]}")  # fmt: skip
    assert added.returncode == 0, added.stderr


async def fire(serve, chat: str) -> None:
    answer = await serve.rpc("cron.run", {"job": chat})
    assert "result" in answer, answer


def sent_to(tg, chat: str) -> list[str]:
    """The texts sent to `chat`, as its user reads them."""
    return [parse_markdown_v2(s["text"]) for s in tg.sent_to(CHATS[chat])]


@pytest.fixture
def relay(tg) -> Iterator[HeldRelay]:
    with HeldRelay(tg.url) as held:
        yield held


@pytest.fixture
def serve(home, model, relay) -> Iterator[TelegramServe]:
    """Serve on the fake Telegram, through the relay."""
    with serving(TelegramServe, relay, home, model) as running:
        yield running


@pytest.mark.timeout(120)
async def test_a_sigkill_with_rows_in_every_state_sends_nothing_twice(serve, relay, tg):
    home = serve.home
    for chat in CHATS:
        add_job(home, chat, LONG if chat == "cut" else f"the brief for {chat}")
    serve.start()

    tg.fail("sendMessage", 403, chat_id=CHATS["dead"])
    await fire(serve, "dead")
    await in_thread(tg.wait_refused, 1)
    await until_states(home, "dead", ["dead"])

    await fire(serve, "ok")
    await in_thread(tg.wait_sent, 1)
    await until_states(home, "ok", ["sent"])

    tg.fail("sendMessage", 429, retry_after=3600, chat_id=CHATS["later"])
    await fire(serve, "later")
    await in_thread(tg.wait_refused, 2)
    await until_states(home, "later", ["retry"])

    relay.hold(b"/sendMessage")
    await fire(serve, "cut")
    await in_thread(relay.wait_held, 1)  # chunk 0 in flight: marked sending before it
    serve.kill()  # well within the adapter's 30 s send timeout: still `sending`

    before = outbox(home)
    assert states(home) == {
        "dead": ["dead"], "ok": ["sent"], "later": ["retry"], "cut": ["sending", "pending"]
    }  # fmt: skip
    cut = [r for r in before if r.chat == "cut"]
    (dead,) = [r for r in before if r.chat == "dead"]
    assert [r.key.rsplit(":", 1)[1] for r in cut] == ["0", "1"]
    refused = len(tg.refused)

    relay.release()  # the platform takes chunk 0; nobody reads its answer
    await in_thread(tg.wait_sent, 2)
    serve.start()
    await in_thread(tg.wait_sent, 3, 30.0)  # chunk 1, by the second serve
    serve.stop()  # the drain sends whatever else was due: a resend would be seen below

    assert sent_to(tg, "cut") == [r.text for r in cut]
    assert sent_to(tg, "ok") == ["the brief for ok\n"]
    assert len(tg.sent) == 3  # nothing to `dead` or `later`, nothing twice
    assert len(tg.refused) == refused  # `dead` was not tried again, nor `later`

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
        [str(r.id), state, f"telegram:{CHATS[r.chat]}"]
        for r, state in ((dead, "dead"), (cut[0], "unknown"))
    ]
