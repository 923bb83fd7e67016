"""The outbox table: one row per chunk, its state, and the queries the Outbox actor runs.

States: pending -> sending -> sent | retry (with not-before) | dead (with reason)
| unknown (the send started and its answer was lost in a crash, on a platform
that does not deduplicate). Per chat, a row is due only when every earlier
row of that chat is done: chunk 2 never goes before chunk 1.

A `live` row is a message that shows a turn as it goes (write_live): its text
may change until it is final, and a sent one whose text is not what the
platform shows (`shown`) is pending again, as an edit of its message
(`message_id`). A new text replaces a pending one: the latest wins, never a
backlog of states.

Functions of an apsw connection, run through the Db handle (or in the CLI
inside `schema.immediate`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import apsw
import attrs

from hermes.actors.errors import Unavailable
from hermes.adapters.contract import Button, OutFile, Target
from hermes.delivery.mirror import Mirror, write_mirror
from hermes.delivery.session_keys import PER_USER, Keying

log = logging.getLogger(__name__)

PENDING, SENDING, SENT, RETRY, DEAD, UNKNOWN = (
    "pending",
    "sending",
    "sent",
    "retry",
    "dead",
    "unknown",
)
OPEN = (PENDING, RETRY, SENDING)  # not finished: later chunks of the chat wait
_OPEN_SQL = "state IN ('pending', 'retry', 'sending')"  # literal: the partial index's own
KINDS = ("reply", "cron", "send", "notice")


@attrs.frozen
class OutboxRow:
    id: int
    target: Target
    text: str
    reply_to: str | None
    kind: str
    origin: str | None
    idempotency_key: str
    state: str
    attempts: int
    not_before: float | None
    created_at: float
    last_error: str | None
    message_id: str | None
    plain: bool
    buttons: tuple[Button, ...] = ()
    live: bool = False  # its text may still change (a turn in progress)
    shown: str | None = None  # the text the platform shows now (None: not sent)
    file: OutFile | None = None  # a file to send, `text` its caption

    @property
    def edit_of(self) -> str | None:
        """The message this row edits: a sent one whose text changed since."""
        return self.message_id if self.shown is not None else None

    @property
    def chat(self) -> tuple[str, str]:
        return (self.target.platform, self.target.chat_id)


_COLUMNS = (
    "id, platform, chat_id, thread_id, scope_id, text, reply_to, kind, origin,"
    " idempotency_key, state, attempts, not_before, created_at, last_error, message_id, plain,"
    " buttons, live, shown, file"
)


def _row(values: tuple) -> OutboxRow:
    # The columns from text to message_id are the record's fields in the same order.
    id_, platform, chat, thread, scope, *same, plain, buttons, live, shown, file = values
    pressed = tuple(Button(*b) for b in json.loads(buttons)) if buttons else ()
    return OutboxRow(
        id_,
        Target(platform, chat, thread, scope),
        *same,
        bool(plain),
        pressed,
        bool(live),
        shown,
        OutFile.from_json(file) if file else None,
    )


def enqueue(
    conn: apsw.Connection,
    target: Target,
    chunks: Sequence[str],
    kind: str,
    key: str,
    now: float,
    reply_to: str | None = None,
    origin: str | None = None,
    mirror: Mirror | None = None,
    buttons: Sequence[Button] = (),
    after: float = 0.0,
    file: OutFile | None = None,
    hold: float = 0.0,
) -> list[int]:
    """Queue the chunks of one message; chunk i's idempotency key is `key:i`. Queuing a
    key again (a retried write, a replayed event, a resumed turn's answer that split
    differently) adds nothing, but where the key holds a live message (a turn's progress,
    write_live): `chunks` are its final text. A mirror rides on the first chunk: it is
    written when that chunk is sent; `buttons` ride on the last. Returns the ids of the
    rows that wait to go (`after`: as write_live's). `file` rides on the last chunk (its
    caption; one chunk is the usual). `hold`: the rows go no sooner than this many seconds
    from now (a text that waits for its voice note), and hold the chat's later rows."""
    if kind not in KINDS:
        raise ValueError(f"outbox kind must be one of {', '.join(KINDS)}, got {kind!r}")
    found = conn.execute("SELECT live FROM outbox WHERE idempotency_key = ?", (f"{key}:0",))
    first = found.fetchone()
    if first is not None:
        if first[0]:  # whatever the progress mode is now (it may have changed in a restart)
            return write_live(conn, target, chunks, key, now, reply_to, final=True, after=after)
        return []  # queued before: never a second version of it (a resumed turn's)
    shown = json.dumps([[b.label, b.command] for b in buttons]) if buttons else None
    ids = []
    for i, chunk in enumerate(chunks):
        conn.execute(
            "INSERT INTO outbox (platform, chat_id, thread_id, scope_id, text, reply_to, kind,"
            " origin, idempotency_key, created_at, mirror, buttons, file, not_before)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (idempotency_key) DO NOTHING",
            (
                target.platform,
                target.chat_id,
                target.thread_id,
                target.scope_id,
                chunk,
                reply_to if i == 0 else None,
                kind,
                origin,
                f"{key}:{i}",
                now,
                mirror.to_json() if mirror is not None and i == 0 else None,
                shown if i == len(chunks) - 1 else None,
                file.to_json() if file is not None and i == len(chunks) - 1 else None,
                now + hold if hold > 0 else None,
            ),
        )
        if conn.changes():
            ids.append(conn.last_insert_rowid())
    return ids


def write_live(
    conn: apsw.Connection,
    target: Target,
    chunks: Sequence[str],
    key: str,
    now: float,
    reply_to: str | None = None,
    final: bool = False,
    after: float = 0.0,
) -> list[int]:
    """A message that shows a turn as it goes: chunk i is row `key:i`, added, or given
    its new text while it is live (a pending one is replaced: the latest wins). One the
    platform shows already goes again as an edit of its message, `after` seconds after
    its last send at the soonest. A live text goes plain (a half-written fence or entity
    never gets an edit refused); `final`: the text is the answer, formatted, and never
    changes again. Returns the ids of the rows that now wait to go."""
    if not final:
        head = conn.execute("SELECT live FROM outbox WHERE idempotency_key = ?", (f"{key}:0",))
        first = head.fetchone()
        if first is not None and not first[0]:
            return []  # the answer is in: a state still on its way is too late
    waiting = []
    for i, chunk in enumerate(chunks):
        found = conn.execute(
            "SELECT id, state, shown, live, plain, updated_at FROM outbox"
            " WHERE idempotency_key = ?",
            (f"{key}:{i}",),
        ).fetchone()
        if found is None:
            conn.execute(
                "INSERT INTO outbox (platform, chat_id, thread_id, scope_id, text, reply_to,"
                " kind, idempotency_key, created_at, live, plain) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    target.platform,
                    target.chat_id,
                    target.thread_id,
                    target.scope_id,
                    chunk,
                    reply_to if i == 0 else None,
                    "reply",
                    f"{key}:{i}",
                    now,
                    int(not final),
                    int(not final),
                ),
            )
            waiting.append(conn.last_insert_rowid())
            continue
        row_id, state, shown, live, plain, updated = found
        if not live:
            continue  # final already: never a second version (a resumed turn's)
        conn.execute(
            "UPDATE outbox SET text = ?, live = ?, plain = ? WHERE id = ?",
            (chunk, int(not final), int(not final), row_id),
        )
        if state == SENT and (chunk != shown or (final and plain)):
            conn.execute(
                "UPDATE outbox SET state = ?, not_before = ?, attempts = 0 WHERE id = ?",
                (PENDING, max(now, (updated or now) + after), row_id),
            )
            waiting.append(row_id)
        elif state in (UNKNOWN, DEAD) and final:
            # A state refused, or a first send lost in a crash (its id unknown): the answer
            # still goes, an edit where the platform shows something, else its own message.
            conn.execute(
                "UPDATE outbox SET state = ?, attempts = 0, not_before = NULL WHERE id = ?",
                (PENDING, row_id),
            )
            waiting.append(row_id)
        elif state in OPEN:
            waiting.append(row_id)
    if final:  # the answer needs fewer messages than its progress did
        waiting += _finish_extra(conn, key, len(chunks), now, after)
    return waiting


LEFT_OVER = "(the answer is above)"


def _finish_extra(
    conn: apsw.Connection, key: str, count: int, now: float, after: float
) -> list[int]:
    """A live message's rows past the answer's `count` chunks: dropped where they have not
    gone, else edited to say where the answer is."""
    extra = conn.execute(
        "SELECT id, idempotency_key, shown, updated_at FROM outbox WHERE idempotency_key > ?"
        " AND idempotency_key < ? AND live = 1",
        (f"{key}:", f"{key}:~"),
    ).fetchall()
    waiting = []
    for row_id, index, shown, updated in extra:
        suffix = index[len(key) + 1 :]
        if not suffix.isdigit() or int(suffix) < count:
            continue
        if shown is None:
            conn.execute("DELETE FROM outbox WHERE id = ?", (row_id,))
            continue
        conn.execute(
            "UPDATE outbox SET text = ?, live = 0, plain = 1, state = ?, not_before = ?,"
            " attempts = 0 WHERE id = ?",
            (LEFT_OVER, PENDING, max(now, (updated or now) + after), row_id),
        )
        waiting.append(row_id)
    return waiting


def due(conn: apsw.Connection, now: float, limit: int = 500) -> list[OutboxRow]:
    """The first unfinished row of each chat, if it may go now (pending, or a retry whose
    not-before has passed)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE id IN (SELECT min(id) FROM outbox"
        f" WHERE {_OPEN_SQL} GROUP BY platform, chat_id)"
        " AND state IN (?,?) AND (not_before IS NULL OR not_before <= ?) ORDER BY id LIMIT ?",
        (PENDING, RETRY, now, limit),
    )
    return [_row(r) for r in rows]


def next_in_chat(
    conn: apsw.Connection, platform: str, chat_id: str, now: float
) -> OutboxRow | None:
    """The chat's first unfinished row, if it may go now (a chat's sender goes on with
    it without a look at every chat)."""
    found = conn.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE platform = ? AND chat_id = ? AND {_OPEN_SQL}"
        " ORDER BY id LIMIT 1",
        (platform, chat_id),
    ).fetchone()
    if found is None:
        return None
    row = _row(found)
    if row.state == SENDING or (row.not_before is not None and row.not_before > now):
        return None
    return row


def next_not_before(conn: apsw.Connection, now: float) -> float | None:
    """When the earliest row still waiting after `now` may go (a retry, or an edit of a
    live message that waits for its interval)."""
    found = conn.execute(
        "SELECT min(not_before) FROM outbox WHERE state IN (?,?) AND not_before > ?",
        (RETRY, PENDING, now),
    )
    return found.fetchone()[0]


def mark_sending(conn: apsw.Connection, row_id: int, now: float) -> bool:
    """Take a due row for its send; False if it was taken already (a second serve)."""
    conn.execute(
        "UPDATE outbox SET state = ?, attempts = attempts + 1, updated_at = ?"
        " WHERE id = ? AND state IN (?,?)",
        (SENDING, now, row_id, PENDING, RETRY),
    )
    return conn.changes() == 1


def mark_unknown(conn: apsw.Connection, row_id: int, reason: str, now: float) -> None:
    """The send may have gone out and no answer came: never sent twice blindly."""
    conn.execute(
        "UPDATE outbox SET state = ?, last_error = ?, updated_at = ? WHERE id = ?",
        (UNKNOWN, reason, now, row_id),
    )


def mark_sent(
    conn: apsw.Connection,
    row_id: int,
    message_id: str | None,
    now: float,
    keying: Keying = PER_USER,
    sent: str | None = None,
    after: float = 0.0,
    sent_plain: bool = False,
) -> list[str]:
    """The row is sent; a mirror it carries is written in the same transaction (a
    failing mirror is its own outcome on the row, logged, and never unsends the row).
    `sent`: the text that went (what the platform shows now); a live row's text that
    changed meanwhile (its text, or from a plain state to the formatted answer) goes as an
    edit, `after` seconds from now. Returns the sessions the mirror wrote to."""
    conn.execute(
        "UPDATE outbox SET state = ?, message_id = coalesce(?, message_id), shown = ?,"
        " last_error = NULL, updated_at = ? WHERE id = ?",
        (SENT, message_id, sent, now, row_id),
    )
    conn.execute(
        "UPDATE outbox SET state = ?, not_before = ?, attempts = 0"
        " WHERE id = ? AND shown IS NOT NULL AND (text != shown OR plain != ?)",
        (PENDING, now + after, row_id, int(sent_plain)),
    )
    found = conn.execute(
        "SELECT platform, chat_id, thread_id, scope_id, mirror FROM outbox WHERE id = ?",
        (row_id,),
    ).fetchone()
    if found is None or found[4] is None:
        return []
    target = Target(*found[:4])
    seeded: list[str] = []
    try:
        with conn:  # a savepoint: a failed seed leaves the sent mark standing
            seeded = write_mirror(conn, Mirror.from_json(found[4]), target, message_id, keying, now)
        outcome = "seeded " + ", ".join(seeded)
    except Exception as exc:  # a bad mirror record (cattrs raises a group) or the write
        log.warning(
            "outbox row %d to %s: the brief was sent but not mirrored: %s", row_id, target, exc
        )
        outcome = f"not mirrored: {exc}"
    conn.execute("UPDATE outbox SET mirror_outcome = ? WHERE id = ?", (outcome, row_id))
    return seeded


def mark_retry(
    conn: apsw.Connection, row_id: int, not_before: float, error: str, now: float
) -> None:
    conn.execute(
        "UPDATE outbox SET state = ?, not_before = ?, last_error = ?, updated_at = ? WHERE id = ?",
        (RETRY, not_before, error, now, row_id),
    )


def mark_plain(conn: apsw.Connection, row_id: int, error: str, now: float) -> None:
    """The platform rejected the chunk's formatting: it goes once more, as plain text."""
    conn.execute(
        "UPDATE outbox SET state = ?, plain = 1, not_before = NULL, last_error = ?,"
        " updated_at = ? WHERE id = ?",
        (PENDING, error, now, row_id),
    )


GONE_NOTE = "(the message I was writing this into is gone, so here it is again) "


def mark_missing(conn: apsw.Connection, row_id: int, reason: str, now: float) -> None:
    """The message an edit was for is gone, or too old to edit. A live state is let go
    (the next one tries again); a final one goes once as a new message, with a note."""
    conn.execute(
        "UPDATE outbox SET state = ?, shown = text, last_error = ?, updated_at = ?"
        " WHERE id = ? AND live = 1",
        (SENT, reason, now, row_id),
    )
    conn.execute(
        "UPDATE outbox SET state = ?, message_id = NULL, shown = NULL,"
        " text = ? || text, not_before = NULL, last_error = ?, updated_at = ?"
        " WHERE id = ? AND live = 0",
        (PENDING, GONE_NOTE, reason, now, row_id),
    )


def mark_dead(conn: apsw.Connection, row_id: int, reason: str, now: float) -> None:
    conn.execute(
        "UPDATE outbox SET state = ?, last_error = ?, updated_at = ? WHERE id = ?",
        (DEAD, reason, now, row_id),
    )


class SendNotRecorded(Unavailable):
    """A report of a message id no row holds yet, while a send of that platform is in
    flight: it may be that send's, whose answer is not recorded yet; the platform is to
    report it again (a webhook answered with an error is delivered again)."""


def mark_undelivered(
    conn: apsw.Connection, platform: str, message_id: str, reason: str, now: float
) -> int:
    """A sent row the platform later reported undelivered (by its message id) is dead with
    `reason`; how many rows that was (0: not one of ours, or already dead). A report
    that can be of a send still in flight (the platform reported before hermes recorded
    its answer): SendNotRecorded, nothing changed."""
    conn.execute(
        "UPDATE outbox SET state = ?, last_error = ?, updated_at = ?"
        " WHERE platform = ? AND message_id = ? AND state = ?",
        (DEAD, reason, now, platform, message_id, SENT),
    )
    changed = conn.changes()
    if changed:
        return changed
    known = conn.execute(
        "SELECT 1 FROM outbox WHERE platform = ? AND message_id = ?", (platform, message_id)
    ).fetchone()
    in_flight = conn.execute(
        "SELECT 1 FROM outbox WHERE platform = ? AND state = ?", (platform, SENDING)
    ).fetchone()
    if known is None and in_flight is not None:
        raise SendNotRecorded(f"{platform} reported {message_id} while a send is in flight")
    return 0


def recover(
    conn: apsw.Connection, deduplicating: frozenset[str], now: float, freshness: float
) -> dict[str, int]:
    """After a restart: a send that started and has no answer recorded goes again only on
    a platform that deduplicates by the idempotency key, else it is `unknown` (never sent
    twice); what is older than `freshness` is dead. Returns counts by what was done."""
    marks = ",".join("?" * len(deduplicating)) or "NULL"
    conn.execute(
        f"UPDATE outbox SET state = ?, updated_at = ? WHERE state = ? AND (platform IN ({marks})"
        " OR shown IS NOT NULL)",  # an edit that may have arrived is the same edit again
        (PENDING, now, SENDING, *deduplicating),
    )
    resent = conn.changes()
    conn.execute(
        "UPDATE outbox SET state = ?, last_error = ?, updated_at = ? WHERE state = ?",
        (UNKNOWN, "the send started before a restart and its answer was lost", now, SENDING),
    )
    unknown = conn.changes()
    conn.execute(
        "UPDATE outbox SET state = ?, last_error = ?, updated_at = ?"
        " WHERE state IN (?,?) AND created_at < ?",
        (DEAD, f"older than {freshness:g} s: not sent", now, PENDING, RETRY, now - freshness),
    )
    return {"resent": resent, "unknown": unknown, "expired": conn.changes()}


def listing(
    conn: apsw.Connection, dead_only: bool = False, limit: int | None = None
) -> list[OutboxRow]:
    """Rows an operator looks at: dead and unknown with --dead, else everything unsent;
    the oldest `limit` of them (None: all)."""
    states = (DEAD, UNKNOWN) if dead_only else (PENDING, RETRY, SENDING, DEAD, UNKNOWN)
    marks = ",".join("?" * len(states))
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE state IN ({marks}) ORDER BY id LIMIT ?",
        (*states, -1 if limit is None else limit),
    )
    return [_row(r) for r in rows]


def depth(conn: apsw.Connection) -> tuple[int, float | None]:
    """How many rows wait to be sent, and when the oldest of them was created."""
    count, oldest = conn.execute(
        "SELECT count(*), min(created_at) FROM outbox WHERE state IN (?,?,?)", OPEN
    ).fetchone()
    return count, oldest


def state_counts(conn: apsw.Connection) -> dict[str, int]:
    """Rows by state (sent rows stay until pruned), for the operator's metrics."""
    return dict(conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall())


def retry_row(conn: apsw.Connection, row_id: int, now: float) -> bool:
    """A dead or unknown row goes out again (an operator's decision; its freshness counts
    from now); False if there is no such row in those states."""
    conn.execute(
        "UPDATE outbox SET state = ?, not_before = NULL, created_at = ?, updated_at = ?"
        " WHERE id = ? AND state IN (?,?)",
        (PENDING, now, now, row_id, DEAD, UNKNOWN),
    )
    return conn.changes() == 1


def drop_unsent(conn: apsw.Connection, key: str) -> int:
    """Take back the message queued under `key` where it has not gone yet (a prompt
    whose question has ended); how many rows."""
    conn.execute(
        "DELETE FROM outbox WHERE idempotency_key > ? AND idempotency_key < ? AND state IN (?,?)",
        (f"{key}:", f"{key}:~", PENDING, RETRY),
    )
    return conn.changes()


def purge_dead(conn: apsw.Connection) -> int:
    conn.execute("DELETE FROM outbox WHERE state = ?", (DEAD,))
    return conn.changes()


def prune_sent(conn: apsw.Connection, before: float) -> int:
    """Forget rows sent before `before` (their keys have done their job); unsent, dead
    and unknown rows stay (an operator acts on the last two)."""
    conn.execute("DELETE FROM outbox WHERE state = ? AND updated_at < ?", (SENT, before))
    return conn.changes()


def message_state(conn: apsw.Connection, key: str) -> tuple[str, str | None, str | None] | None:
    """How the message queued under `key` fared, over all its chunks: dead or unknown
    if any chunk is, sent when all are, else the first unfinished chunk's state; with
    the last error and the mirror's outcome. None: no row left (sent rows are pruned
    after `retention.outbox_sent_days`; `outbox purge --dead` removes dead ones)."""
    rows = [
        row[1:]
        for row in conn.execute(
            "SELECT idempotency_key, state, last_error, mirror_outcome FROM outbox"
            " WHERE idempotency_key > ? AND idempotency_key < ? ORDER BY id",
            (f"{key}:", f"{key}:~"),
        )
        if row[0][len(key) + 1 :].isdigit()
    ]  # not a longer key's (a thread of the chat)
    if not rows:
        return None
    mirrored = rows[0][2]
    for worst in (DEAD, UNKNOWN):
        for state, error, _ in rows:
            if state == worst:
                return state, error, mirrored
    for state, error, _ in rows:
        if state != SENT:
            return state, error, mirrored
    return SENT, None, mirrored
