"""Live rows in the outbox: a message written as a turn goes, sent once and then edited,
the latest state winning, at most one edit an interval, the final state always
delivered, a gone message answered once with a note, and edits giving way to other
chats' first messages. On the mock clock, against the scripted adapter of
tests/delivery/test_outbox.py."""

from __future__ import annotations

import trio
import trio.testing

from hermes.adapters.contract import Permanent, SendRequest, SendResult, Sent, Target
from hermes.adapters.platform import Pace
from hermes.delivery.outbox import Enqueued
from hermes.delivery.outbox_store import (
    GONE_NOTE,
    LEFT_OVER,
    SENDING,
    enqueue,
    mark_dead,
    mark_sending,
    mark_sent,
    recover,
    write_live,
)
from hermes.state.db import Db
from tests.delivery.test_outbox import MOCK, PLATFORM, ScriptedPlatform, queue, running, sent_ok
from tests.seed import writing

INTERVAL = 1.5  # the outbox's default gateway.progress_interval


async def live(db, outbox, chat: str, text: str, final: bool = False, key: str = "turn") -> None:
    await db.write(write_live, Target(PLATFORM, chat), [text], f"{key}-{chat}", MOCK.now(),
                   None, final, INTERVAL)  # fmt: skip
    outbox.cast_nowait(Enqueued())


def seen(platform: ScriptedPlatform, chat: str) -> list[tuple[str, str | None, bool]]:
    """(text, the message it edits, plain) of each request to `chat`."""
    return [(r.text, r.edit_of, r.plain) for _, r in platform.taken if r.target.chat_id == chat]


async def test_a_live_message_is_sent_then_edited_and_the_latest_state_wins(
    registry, home, io_clock
):
    platform = ScriptedPlatform(lambda r: Sent(r.edit_of or f"m-{r.idempotency_key}"))
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            start = trio.current_time()
            await live(db, outbox, "a", "Let me")
            await platform.until(lambda: len(platform.taken) == 1)
            for text in ("Let me look", "Let me look at", "Let me look at it"):
                await live(db, outbox, "a", text)  # three states while the first waits
            await platform.until(lambda: len(platform.taken) == 2)
            await live(db, outbox, "a", "It is *done*.", final=True)
            await platform.until(lambda: len(platform.taken) == 3)
            await live(db, outbox, "a", "a late state changes nothing")
            at = [t - start for t, _ in platform.taken]
        platform.request_drain(trio.current_time())
    assert seen(platform, "a") == [
        ("Let me", None, True),
        ("Let me look at it", "m-turn-a:0", True),  # the latest; the two before never went
        ("It is *done*.", "m-turn-a:0", False),  # the answer, formatted
    ]
    assert at[0] < 0.5 and INTERVAL <= at[1] < INTERVAL + 0.5 and at[2] - at[1] >= INTERVAL


async def test_a_final_state_whose_message_is_gone_is_sent_once_with_a_note(
    registry, home, io_clock
):
    def answer(request: SendRequest) -> SendResult:
        if request.edit_of is not None:
            return Permanent("400: message to edit not found", missing=True)
        return Sent(f"m{len(platform.taken)}")

    platform = ScriptedPlatform(answer)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            await live(db, outbox, "a", "half an ans")
            await platform.until(lambda: len(platform.taken) == 1)
            await live(db, outbox, "a", "half an answer, still", final=False)
            await live(db, outbox, "a", "The whole answer.", final=True)
            await platform.until(lambda: len(platform.taken) == 2)
        platform.request_drain(trio.current_time())
    async with Db(registry, home.state_db) as db:  # the outbox has stopped: all recorded
        states = await db.read(
            lambda c: c.execute("SELECT state, live, shown FROM outbox").fetchall()
        )
    assert seen(platform, "a") == [
        ("half an ans", None, True),
        (GONE_NOTE + "The whole answer.", None, False),  # one new message: never two
    ]
    assert states == [("sent", 0, None)]


async def test_edits_give_way_to_other_chats_first_messages(registry, home, io_clock):
    """Ten chats stream on a platform of two sends a second: a new chat's first message
    takes the next slot, ahead of the edits waiting for one."""
    platform = ScriptedPlatform(lambda r: Sent(r.edit_of or f"m-{r.idempotency_key}"))
    paces = {PLATFORM: Pace(2.0, 1.0, burst=10, chat_burst=1)}
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter, paces=paces) as (box, outbox, db):
            for n in range(10):
                await live(db, outbox, f"s{n}", "first words")
            await platform.until(lambda: len(platform.taken) == 10)  # the burst
            for n in range(10):
                await live(db, outbox, f"s{n}", "first words and more")
            await trio.sleep(INTERVAL)  # the edits are due now, and the slots are few
            asked = trio.current_time()
            await queue(db, outbox, "new", "hello")
            await platform.until(lambda: platform.texts("new") == ["hello"])
            waited = trio.current_time() - asked
            # Every edit went (one whose answer came after its deadline, as the virtual
            # clock may jump past it while the writer's thread works, goes again: it is
            # the same edit).
            await platform.until(
                lambda: all(
                    seen(platform, f"s{n}")[-1][0] == "first words and more" for n in range(10)
                )
            )
        platform.request_drain(trio.current_time())
    assert waited <= 1 / 2.0 + 0.1  # one slot of the platform's pace, at most


async def test_an_edit_in_flight_at_a_crash_goes_again(registry, home, io_clock):
    """An edit is the same edit again: after a restart it is pending, never unknown."""
    platform = ScriptedPlatform(sent_ok)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            await live(db, outbox, "a", "one")
            await platform.until(lambda: len(platform.taken) == 1)
        platform.request_drain(trio.current_time())
    async with running(registry, home, None) as (box, outbox, db):
        await db.write(write_live, Target(PLATFORM, "a"), ["one two"], "turn-a", MOCK.now(),
                       None, True, 0.0)  # fmt: skip
        await db.write(lambda c, now: c.execute("UPDATE outbox SET state = ?", (SENDING,)),
                       MOCK.now())  # fmt: skip
        done = await db.write(recover, frozenset(), MOCK.now(), 3600.0)
        states = await db.read(lambda c: c.execute("SELECT state FROM outbox").fetchall())
    assert done["resent"] == 1 and states == [("pending",)]


async def test_an_answer_whose_first_state_was_lost_in_a_crash_still_goes(registry, home):
    """A live row's first send cut by a crash is unknown (it may have arrived, under an
    id nobody kept): its final state goes as a message of its own, never nowhere."""
    target = Target(PLATFORM, "a")
    async with Db(registry, home.state_db) as db:
        await db.write(write_live, target, ["half"], "turn-a", MOCK.now(), None, False, 0.0)
        await db.write(lambda c, now: c.execute("UPDATE outbox SET state = ?", (SENDING,)),
                       MOCK.now())  # fmt: skip
        await db.write(recover, frozenset(), MOCK.now(), 3600.0)  # the restart: unknown
        waiting = await db.write(write_live, target, ["The answer."], "turn-a", MOCK.now(),
                                 None, True, 0.0)  # fmt: skip
        row = await db.read(lambda c: c.execute("SELECT state, text, live FROM outbox").fetchall())
    assert waiting and row == [("pending", "The answer.", 0)]


# -- the store, state by state -----------------------------------------------------------


def live_rows(conn) -> list[tuple]:
    return conn.execute(
        "SELECT idempotency_key, text, state, live, plain, shown FROM outbox ORDER BY id"
    ).fetchall()


def sent_as_is(conn, key: str, message_id: str) -> None:
    """What the outbox records when the platform took a row as it stood."""
    row_id, text, plain = conn.execute(
        "SELECT id, text, plain FROM outbox WHERE idempotency_key = ?", (key,)
    ).fetchone()
    mark_sending(conn, row_id, 0.0)
    mark_sent(conn, row_id, message_id, 0.0, sent=text, sent_plain=bool(plain))


def test_an_answer_shorter_than_its_progress_finishes_the_extra_messages(home):
    target = Target(PLATFORM, "a")
    with writing(home.state_db) as conn:
        write_live(conn, target, ["part one", "part two", "⏳ terminal"], "k", 0.0)
        for i in range(2):
            sent_as_is(conn, f"k:{i}", f"m{i}")  # the third never went
        waiting = write_live(conn, target, ["The answer."], "k", 1.0, final=True)
        late = write_live(conn, target, ["a state still on its way"], "k", 2.0)
        rows = live_rows(conn)
    assert late == [] and len(waiting) == 2
    assert rows == [
        ("k:0", "The answer.", "pending", 0, 0, "part one"),  # an edit to the answer
        ("k:1", LEFT_OVER, "pending", 0, 1, "part two"),  # an edit pointing to it
    ]  # the third, never sent, is gone


def test_a_final_text_sent_plain_goes_once_more_formatted(home):
    """The last partial state (plain) was in flight with the answer's very text when the
    answer came: the platform shows it unformatted, so it is edited once more."""
    target = Target(PLATFORM, "a")
    with writing(home.state_db) as conn:
        write_live(conn, target, ["**The** answer."], "k", 0.0)
        row_id = conn.execute("SELECT id FROM outbox").get
        mark_sending(conn, row_id, 0.0)
        write_live(conn, target, ["**The** answer."], "k", 0.5, final=True)  # meanwhile
        mark_sent(conn, row_id, "m0", 1.0, sent="**The** answer.", sent_plain=True)
        assert live_rows(conn)[0][2:5] == ("pending", 0, 0)


def test_a_refused_state_and_a_changed_mode_still_end_with_the_answer(home):
    """A partial edit refused for good (dead), and an answer queued the `off` way after a
    restart changed the mode: the live message under the key is finished all the same."""
    target = Target(PLATFORM, "a")
    with writing(home.state_db) as conn:
        write_live(conn, target, ["half"], "k", 0.0)
        sent_as_is(conn, "k:0", "m0")
        write_live(conn, target, ["half and more"], "k", 1.0)
        mark_dead(conn, conn.execute("SELECT id FROM outbox").get, "400: too long", 1.0)
        waiting = enqueue(conn, target, ["The answer."], "reply", "k", 2.0)
        assert waiting and live_rows(conn)[0][1:4] == ("The answer.", "pending", 0)


async def test_edits_keep_the_platforms_pace_for_edits(registry, home, io_clock):
    """Slack's chat.update has a stricter rate than its posts: edits of every chat share
    it (two a second here), while first messages keep theirs."""
    platform = ScriptedPlatform(lambda r: Sent(r.edit_of or f"m-{r.idempotency_key}"))
    paces = {PLATFORM: Pace(100.0, 100.0, burst=100, chat_burst=100, edits_per_second=2.0,
                            edit_burst=1)}  # fmt: skip
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter, paces=paces) as (box, outbox, db):
            for n in range(4):
                await live(db, outbox, f"s{n}", "first")
            await platform.until(lambda: len(platform.taken) == 4)
            for n in range(4):
                await live(db, outbox, f"s{n}", "first and more")
            await platform.until(lambda: len(platform.taken) == 8)
        platform.request_drain(trio.current_time())
    sends = [t for t, r in platform.taken if r.edit_of is None]
    edits = sorted(t for t, r in platform.taken if r.edit_of is not None)
    assert max(sends) - min(sends) < 0.1  # first messages at their own pace
    assert all(b - a >= 0.5 - 1e-6 for a, b in zip(edits, edits[1:], strict=False))


class HeldPlatform(ScriptedPlatform):
    """Sends are answered only when the test lets them (`release`)."""

    def __init__(self) -> None:
        super().__init__(lambda r: Sent(r.edit_of or f"m-{r.idempotency_key}"))
        self.release = trio.Event()

    async def handle(self, msg) -> None:
        self.taken.append((trio.current_time(), msg.request))
        self.changed.set()
        self.changed = trio.Event()
        await self.release.wait()
        msg.reply.set(self.answer(msg.request))


async def test_a_state_written_while_its_message_is_being_sent_still_goes(registry, home, io_clock):
    """The answer comes while the progress message's send is still out: the send's mark
    leaves it pending an interval on, and the outbox wakes for it (it once slept for ever,
    the answer stuck behind the row)."""
    platform = HeldPlatform()
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            await live(db, outbox, "a", "✓ terminal")
            await platform.until(lambda: len(platform.taken) == 1)  # its send is out
            await live(db, outbox, "a", "both checked", final=True)
            await trio.testing.wait_all_tasks_blocked()  # the outbox looked, and waits
            platform.release.set()
            await platform.until(lambda: len(platform.taken) == 2)
        platform.request_drain(trio.current_time())
    assert [text for text, _, _ in seen(platform, "a")] == ["✓ terminal", "both checked"]
