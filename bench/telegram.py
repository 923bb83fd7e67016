"""A Telegram bot's latency: `hermes serve` against a bare httpx echo bot, on the same fake Bot API.

Run: python bench/telegram.py   (from the repository root; takes about a minute)
- The fake Telegram Bot API (tests/fakes/telegram.py) runs in its own process,
  a fresh one for each side (one poller per token, and each side's message ids
  start from 1). The bench drives it over HTTP: `POST {url}/_fake/message`
  injects a user's message in a private chat, `GET {url}/_fake/state` reads the
  sends it took, each with its `at` (the fake's time.monotonic(): on Linux the
  same CLOCK_MONOTONIC as the bench's).
- bare (the baseline): an echo bot written here (`echo_bot`), trio + httpx, as
  small as a real one gets: a getUpdates long-poll loop (the offset one past the
  last update_id seen, which confirms the batch to Telegram with the next poll),
  and for each text message a task sending `sendMessage(chat_id, "You said:
  " + text)` replying to it (`reply_parameters.message_id`), on a client of its
  own, so sends run concurrently with the next poll. It runs in a process of
  its own (this file with `--echo-bot URL`), as serve does: it shares no event
  loop with the injector, and its CPU is its own.
- hermes: `hermes serve` as a real process on a fresh HERMES_HOME, no `model:`
  section (the built-in offline model answers "You said: <text>" at once), its
  Telegram adapter on the fake (`allow_all_users`). Everything it does per
  update counts: the journal and cursor commits, the typing indicator
  (sendChatAction), the session's turn, the reply's outbox row and its send
  (MarkdownV2, which the fake parses).
- The same load on both sides, after the same warm-up: one message from each
  of 50 users (not measured: the bot's first connections, hermes's sessions
  created), answered before the timed phase starts. Timed: 1,000 messages
  offered at 50/s, round robin over the 50 users (one message a second each,
  so no session is ever busy: hermes's busy handling is not what is measured),
  message n injected at start + n/50 s (`trio.sleep_until` on absolute times: a
  late wake-up does not push the rest; the achieved rate and the wake-ups'
  lateness are printed). Injections are made one at a time, in order.
- Latency per message: the bench's time.monotonic() at its inject call -> the
  fake recording the reply's arrival. A reply is matched to its message by
  `reply_parameters.message_id` (the fake numbers injected and sent messages
  from one counter, so the injected ids are those its sends did not take), and
  checked: its chat, its text, every message answered exactly once on both
  sides; any that was not is reported. Throughput: messages answered / (last
  answer - first inject).
- At a fixed offered rate, a side that keeps up answers at that rate: when both
  do, the throughput ratio is about 1 by construction and says only that
  hermes did not fall behind; the latency is the telling figure. (Here hermes's
  pace, below, makes it 30/50.) For hermes, the `where` line splits the latency
  at its typing action (sent right after an update is admitted): inject ->
  typing (the held poll answering, the journal commit) and typing -> reply (the
  turn, the outbox row, the pacing, the send).
- CPU per message during the timed phase (from the first inject until the
  bench has seen every answer; it reads the fake's state then, ever less often:
  those reads count in the bench's and the fake's CPU): the bench (the
  injector), the fake, the echo bot, and serve with its children (the state.db
  writer); other processes' CPU is printed and warned about.
- hermes's outbox paces its sends to Telegram's documented limits
  (hermes/delivery/outbox.py PACES: 30 messages/s overall after a burst of 30,
  1/s per chat after a burst of 3): the line `pace` prints them. The 50/s
  offered here is above the overall pace: the fake enforces no limit and the
  bare bot keeps none, but hermes sends 30/s, its backlog grows by 20/s and its
  latency with it, to seconds (warned; by design, not a stall).
`python bench/telegram.py --rate 25` offers 25/s instead (below the pace).
Last line: RESULT vs_bare=<hermes rate / bare rate> p99_ms=<hermes p99 latency>
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatbench import (  # noqa: E402
    FakeProcess,
    Serve,
    closing_lines,
    comparison_lines,
    kill,
    per_message,
    percentile,
    serve_log_lines,
    start_helper,
    until_answered,
)
from cpuwatch import CpuWatch  # noqa: E402

from hermes.delivery.outbox import PACES  # noqa: E402
from tests.fakes.telegram import parse_markdown_v2  # noqa: E402

TOKEN = "123456:BENCH-token"
TOKEN_ENV = "BENCH_TELEGRAM_TOKEN"
RATE = 50.0  # messages per second, offered
USERS = 50  # private chats, round robin
TOTAL = 1000  # timed messages per side: TOTAL / RATE seconds
FIRST_USER = 5001  # user (and private chat) ids FIRST_USER .. FIRST_USER + USERS - 1
POLL_TIMEOUT = 10  # seconds a getUpdates is held, both sides
WARM_LIMIT = 60.0  # seconds for the warm-up to be answered (serve connects meanwhile)
ANSWER_LIMIT = 30.0  # seconds after the last inject for every timed message to be answered
SETTLE = 0.5  # seconds waited after the last answer before the final count (repeats show)
BUSY_OTHERS = 0.1  # CPUs taken by other processes during a timed phase worth a warning
TARGET_VS_BARE = 0.5
TARGET_P99_MS = 100.0


# --- processes -------------------------------------------------------------------------------


class Fake(FakeProcess):
    """The fake Bot API in its own process, driven over HTTP."""

    def __init__(self) -> None:
        super().__init__("telegram", "--token", TOKEN)
        self.api = f"{self.url}/bot{TOKEN}"

    async def message(self, http: httpx.AsyncClient, text: str, user: int) -> int:
        """A user writes in their private chat; the update's id."""
        kwargs = {"text": text, "user_id": user, "username": f"user{user}",
                  "first_name": f"User{user}"}  # fmt: skip
        return int(await self.inject(http, "message", kwargs))


def platform(fake_url: str) -> str:
    """The platform's YAML under `platforms:` for serve, on the fake."""
    return (
        "  telegram:\n"
        f"    token_env: {TOKEN_ENV}\n    base_url: '{fake_url}'\n"
        f"    poll_timeout: {POLL_TIMEOUT}\n    allow_all_users: true\n"
    )


def start_serve(tmp: Path, fake_url: str) -> Serve:
    return Serve(tmp, platform(fake_url), {TOKEN_ENV: TOKEN})


# --- the baseline: a bare echo bot -----------------------------------------------------------


async def echo_bot(api: str) -> None:
    """getUpdates from an offset one past the last update seen; each text message
    answered by its own task on a client of its own, concurrently with the next poll.
    Runs until cancelled."""
    poll_timeout = httpx.Timeout(30, read=POLL_TIMEOUT + 15)
    async with (
        httpx.AsyncClient(timeout=poll_timeout) as poller,
        httpx.AsyncClient(timeout=30) as sender,
        trio.open_nursery() as nursery,
    ):

        async def answer(message: dict[str, Any]) -> None:
            params = {"chat_id": message["chat"]["id"], "text": "You said: " + message["text"],
                      "reply_parameters": {"message_id": message["message_id"]}}  # fmt: skip
            body = (await sender.post(f"{api}/sendMessage", json=params)).json()
            if not body.get("ok"):
                raise RuntimeError(f"sendMessage refused: {body!r}")

        offset = 0
        while True:
            params = {"offset": offset, "timeout": POLL_TIMEOUT, "allowed_updates": ["message"]}
            body = (await poller.post(f"{api}/getUpdates", json=params)).json()
            if not body.get("ok"):
                raise RuntimeError(f"getUpdates refused: {body!r}")
            for update in body["result"]:
                offset = max(offset, update["update_id"] + 1)
                message = update.get("message")
                if message and "text" in message:
                    nursery.start_soon(answer, message)


# --- one side --------------------------------------------------------------------------------


@attrs.define
class Injected:
    user: int
    text: str
    at: float  # the bench's time.monotonic() at the inject call
    update_id: int = 0


@attrs.define
class Side:
    name: str
    injected: list[Injected] = attrs.Factory(list)  # every injection, warm-up first, in order
    timed: list[Injected] = attrs.Factory(list)
    late: list[float] = attrs.Factory(list)  # the timed wake-ups after their scheduled times
    latencies: list[float] = attrs.Factory(list)  # inject -> reply recorded, timed messages
    seconds: float = 0.0  # first timed inject -> last timed answer
    answered: int = 0  # timed messages answered (exactly once or not)
    polls: int = 0  # getUpdates calls during the timed phase
    actions: int = 0  # sendChatAction calls during the timed phase
    reads: int = 0  # the fake's state read while waiting for answers
    where: dict[str, list[float]] = attrs.Factory(lambda: {"typing": [], "reply": []})
    problems: list[str] = attrs.Factory(list)
    cpu: CpuWatch | None = None

    @property
    def rate(self) -> float:
        return self.answered / self.seconds

    @property
    def offered(self) -> float:
        first, last = self.timed[0].at, self.timed[-1].at
        return (len(self.timed) - 1) / (last - first)

    def p(self, q: float) -> float:
        return percentile(self.latencies, q)


def replies_of(state: dict[str, Any], side: Side) -> dict[int, list[dict[str, Any]]]:
    """The fake's sends, by the injection they reply to (its index in side.injected);
    a send replying to no injection is a problem (key -1). Injected messages and sends
    take their ids from one counter: the injected ids are the ones no send took."""
    sent = state["sent"]
    taken = {s["message_id"] for s in sent}
    ids = [i for i in range(1, len(side.injected) + len(sent) + 1) if i not in taken]
    if len(ids) != len(side.injected):
        raise RuntimeError(f"{len(ids)} message ids for {len(side.injected)} injections")
    index = {message_id: n for n, message_id in enumerate(ids)}
    replies: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in sent:
        reply_to = (s.get("reply_parameters") or {}).get("message_id")
        replies[index.get(reply_to, -1)].append(s)
    return replies


def check(side: Side, state: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each injection answered exactly once, in its chat, with its text; problems noted.
    The first reply of each injection answered."""
    replies = replies_of(state, side)
    firsts = {}
    unanswered = []
    for n, injected in enumerate(side.injected):
        got = replies.get(n, [])
        if not got:
            unanswered.append(n)
            continue
        if len(got) > 1:
            side.problems.append(f"message {n} (update {injected.update_id}) answered "
                                 f"{len(got)} times")  # fmt: skip
        reply = got[0]
        firsts[n] = reply
        text = reply["text"]
        if reply.get("parse_mode") == "MarkdownV2":
            text = parse_markdown_v2(text)
        if reply["chat_id"] != injected.user or text != "You said: " + injected.text:
            side.problems.append(f"message {n}: answered {text!r} in chat {reply['chat_id']}")
    if unanswered:
        side.problems.append(f"{len(unanswered)} messages never answered, the first: "
                             f"{unanswered[:5]}")  # fmt: skip
    if replies.get(-1):
        side.problems.append(f"{len(replies[-1])} sends replying to no injected message: "
                             f"{replies[-1][:2]!r:.300}")  # fmt: skip
    if state["refused"]:
        side.problems.append(f"{len(state['refused'])} sends refused by the fake: "
                             f"{state['refused'][:2]!r:.300}")  # fmt: skip
    return firsts


async def offer(http: httpx.AsyncClient, fake: Fake, side: Side, texts: list[tuple[int, str]],
                late: list[float] | None) -> None:  # fmt: skip
    """Inject `texts` (user, text) at RATE on absolute times, one at a time, in order."""
    start = trio.current_time()
    for n, (user, text) in enumerate(texts):
        due = start + n / RATE
        await trio.sleep_until(due)
        if late is not None:
            late.append(trio.current_time() - due)
        injected = Injected(user, text, time.monotonic())
        side.injected.append(injected)
        injected.update_id = await fake.message(http, text, user)


async def run_side(side: Side, fake: Fake, pids: list[int]) -> None:
    """Warm up, then the timed phase; measures and checks into `side`."""
    users = [FIRST_USER + u for u in range(USERS)]
    warm = [(user, f"warm up from user {user}") for user in users]
    timed = [(users[n % USERS], f"hello from user {users[n % USERS]} number {n}")
             for n in range(TOTAL)]  # fmt: skip
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        await offer(http, fake, side, warm, None)
        await until_answered(http, fake, side, range(len(warm)), WARM_LIMIT, replies_of)
        if side.problems:
            raise RuntimeError(f"{side.name}: the warm-up failed: {side.problems}")
        before = await fake.state(http)
        side.reads = 0
        side.cpu = CpuWatch(pids)
        await offer(http, fake, side, timed, side.late)
        await until_answered(http, fake, side, range(len(side.injected)), ANSWER_LIMIT, replies_of)
        side.cpu.stop()
        await trio.sleep(SETTLE)  # a repeated send would land meanwhile
        state = await fake.state(http)

    firsts = check(side, state)
    side.timed = side.injected[len(warm) :]
    side.polls = state["polls"] - before["polls"]
    actions: dict[int, list[float]] = defaultdict(list)
    for action in state["actions"][len(before["actions"]) :]:
        actions[action["chat_id"]].append(action["at"])
    side.actions = sum(len(v) for v in actions.values())
    answers = []
    for n, injected in enumerate(side.timed, start=len(warm)):
        reply = firsts.get(n)
        if reply is None:
            continue
        side.latencies.append(reply["at"] - injected.at)
        answers.append(reply["at"])
        typing = [at for at in actions[injected.user] if injected.at <= at <= reply["at"]]
        if typing:
            side.where["typing"].append(typing[0] - injected.at)
            side.where["reply"].append(reply["at"] - typing[0])
    side.answered = len(answers)
    side.seconds = max(answers) - side.timed[0].at


# --- the run ---------------------------------------------------------------------------------


def side_lines(side: Side, what: str, cpu: str) -> list[str]:
    lines = [
        f"{side.name:<7} {side.rate:6.1f} msgs/s  ({side.answered} of {len(side.timed)} answered "
        f"in {side.seconds:.2f} s)  latency p50 {side.p(50):6.2f} ms  p99 {side.p(99):6.2f} ms  "
        f"max {side.p(100):6.2f} ms  ({what})",
        f"        offered {RATE:.0f}/s: achieved {side.offered:.1f}/s, wake-ups late p50 "
        f"{percentile(side.late, 50):.2f} ms, p99 {percentile(side.late, 99):.2f} ms; "
        f"{side.polls} getUpdates ({len(side.timed) / max(side.polls, 1):.2f} messages per "
        f"poll), {side.actions} sendChatAction; {side.reads} reads of the fake's state "
        "while waiting for the answers",
        f"        cpu per message: {cpu}; other processes {side.cpu.others:.2f} CPUs",
    ]
    if side.where["typing"]:
        parts = []
        for name, label in (("typing", "inject -> typing sent (poll, admission)"),
                            ("reply", "typing -> reply (turn, outbox, pace, send)")):  # fmt: skip
            values = side.where[name]
            mean = sum(values) / len(values) * 1000
            parts.append(f"{label} {mean:.2f}/{percentile(values, 50):.2f}/"
                         f"{percentile(values, 99):.2f}")  # fmt: skip
        lines.append(f"        where, mean/p50/p99 ms ({len(side.where['typing'])} with a "
                     f"typing action): " + "; ".join(parts))  # fmt: skip
    lines.extend(f"        PROBLEM: {problem}" for problem in side.problems)
    return lines


def main() -> None:
    bare, hermes = Side("bare"), Side("hermes")
    notes: list[str] = []
    serve_log = ""
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp, contextlib.ExitStack() as st:
        fake = Fake()
        st.callback(kill, fake.proc)
        bare_url = fake.url
        bot_log = Path(tmp) / "echo-bot.stderr"
        bot = start_helper(__file__, "--echo-bot", fake.api, bot_log)
        st.callback(kill, bot)
        try:
            trio.run(run_side, bare, fake, [os.getpid(), fake.proc.pid, bot.pid])
        except BaseException:
            print(f"the echo bot's stderr:\n{bot_log.read_text()[-3000:]}", file=sys.stderr)
            raise
        kill(bot)
        kill(fake.proc)

        fake = Fake()
        st.callback(kill, fake.proc)
        serve = start_serve(Path(tmp), fake.url)
        st.callback(kill, serve.proc)
        try:
            trio.run(run_side, hermes, fake, [os.getpid(), fake.proc.pid, serve.proc.pid])
        except BaseException:
            print(f"serve's log:\n{serve.log()[-5000:]}", file=sys.stderr)
            raise
        finally:
            stopped = serve.stop()
            serve_log = serve.log()
            if stopped:
                notes.append(stopped)
        hermes_url = fake.url

    pace = PACES.get("telegram")
    print(f"fake       Telegram Bot API in its own process, a fresh one per side ({bare_url}, "
          f"{hermes_url}); {TOTAL} messages offered at {RATE:.0f}/s, round robin over {USERS} "
          f"private chats (each one a second apart), after a warm-up of one each")  # fmt: skip
    if pace is not None:
        print(f"pace       hermes's outbox sends to Telegram at most {pace.per_second:g}/s "
              f"overall, {pace.per_chat_per_second:g}/s per chat (hermes/delivery/outbox.py "
              "PACES); the fake enforces no limit, the bare bot keeps none")  # fmt: skip
    n = len(bare.timed)
    bench, fake_cpu, bot_cpu = bare.cpu.used
    cpu = (
        f"echo bot {per_message(bot_cpu, n)}, bench (injector) {per_message(bench, n)}, "
        f"fake {per_message(fake_cpu, n)}"
    )
    for line in side_lines(bare, "inject -> reply recorded; trio + httpx echo bot", cpu):
        print(line)
    n = len(hermes.timed)
    bench, fake_cpu, serve_cpu = hermes.cpu.used
    cpu = (
        f"serve (its writer included) {per_message(serve_cpu, n)} "
        f"({serve_cpu / hermes.seconds:.2f} CPUs), bench (injector) {per_message(bench, n)}, "
        f"fake {per_message(fake_cpu, n)}"
    )
    for line in side_lines(hermes, "inject -> reply recorded; hermes serve, offline model", cpu):
        print(line)
    for line in serve_log_lines(serve_log):
        print(line)
    for line in comparison_lines(bare, hermes, TARGET_VS_BARE, TARGET_P99_MS):
        print(line)
    if pace is not None and RATE > pace.per_second:
        print(f"WARNING: {RATE:.0f}/s offered is above hermes's Telegram pace of "
              f"{pace.per_second:g}/s: hermes answers at its pace, its backlog grows by "
              f"{RATE - pace.per_second:g}/s and its latency with it (by design, not a "
              "stall)")  # fmt: skip
    for line in closing_lines(bare, hermes, RATE, BUSY_OTHERS, notes):
        print(line)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--echo-bot"]:
        trio.run(echo_bot, sys.argv[2])
    else:
        if sys.argv[1:2] == ["--rate"]:  # e.g. --rate 25: below Telegram's 30/s pace
            RATE = float(sys.argv[2])
        main()
