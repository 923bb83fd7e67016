"""A Slack app's latency: `hermes serve` against a bare Socket Mode echo client, one fake.

Run: python bench/slack.py   (from the repository root; takes about a minute)
- The fake Slack (tests/fakes/slack.py: the Web API and Socket Mode on one port)
  runs in its own process, a fresh one for each side. The bench drives it over
  HTTP: `POST {url}/_fake/message` injects a user's message in a DM (an
  events_api envelope, delivered on an open socket), `GET {url}/_fake/state`
  reads the chat.postMessage calls it took, the envelopes it delivered and the
  acknowledgements it got, each with its `at` (the fake's time.monotonic(): on
  Linux the same CLOCK_MONOTONIC as the bench's).
- bare (the baseline): an echo client written here (`echo_client`), trio +
  trio_websocket + httpx, as small as a real one gets: apps.connections.open
  with the app token, the socket URL opened, `hello` awaited; each envelope
  acknowledged at once (`{"envelope_id": ...}`), and for a `message` event a
  task posting `chat.postMessage(channel, "You said: " + text)` with the bot
  token, so posts run concurrently with the socket's reading. It runs in a
  process of its own (this file with `--echo-client URL`), as serve does: it
  shares no event loop with the injector, and its CPU is its own.
- hermes: `hermes serve` as a real process on a fresh HERMES_HOME, no `model:`
  section (the built-in offline model answers "You said: <text>" at once), its
  Slack adapter on the fake (`allow_all_users`). Everything it does per event
  counts: the journal commit before the acknowledgement, the session's turn,
  the reply's outbox row and its send (text escaped for mrkdwn: &, <, > only;
  the bench's texts have none).
- The same load on both sides, after the same warm-up: one DM from each of 50
  users (user U<i> in channel D<i>; not measured: the socket, hermes's sessions
  created), answered before the timed phase starts. Timed: 1,000 DMs offered at
  50/s, round robin over the 50 users (one message a second each, so no session
  is ever busy), message n injected at start + n/50 s (`trio.sleep_until` on
  absolute times: a late wake-up does not push the rest; the achieved rate and
  the wake-ups' lateness are printed). Injections are made one at a time.
- Latency per message: the bench's time.monotonic() at its inject call -> the
  fake recording the reply's chat.postMessage. Each message's text carries a
  unique marker (`m<n>`), so a reply is matched to its message by its text
  ("You said: <text>"), and checked: its channel, every message acknowledged
  and answered exactly once on both sides, no envelope redelivered (a retry
  means an acknowledgement later than the fake's 3 s); any that was not is
  reported. Throughput: messages answered / (last answer - first inject).
- At a fixed offered rate, a side that keeps up answers at that rate: when both
  do, the throughput ratio is about 1 by construction and says only that
  hermes did not fall behind; the latency is the telling figure. The `where`
  line splits it at the acknowledgement the fake records: inject -> ack (the
  envelope's delivery, and for hermes the journal commit) and ack -> reply
  (the turn, the outbox row, the pacing, the post). The fake records acks on
  its socket's thread and posts on an HTTP one: the bare client's post, sent
  just after its ack, is sometimes recorded first (those are left out of it).
- CPU per message during the timed phase (from the first inject until the
  bench has seen every answer; it reads the fake's state then, ever less often:
  those reads count in the bench's and the fake's CPU): the bench (the
  injector), the fake, the echo client, and serve with its children (the
  state.db writer); other processes' CPU is printed and warned about.
- hermes's outbox paces its sends to Slack (hermes/delivery/outbox.py PACES: 50
  messages/s overall after a burst of 50, 1/s per chat after a burst of 3): 50/s
  over 50 chats, one a second each, is right at that pace. The `pace` line
  replays hermes's posts (as the fake recorded them) through the same cell-rate
  rule and counts those that came within 5 ms of their earliest allowed time:
  those the pace most likely held (a warning if any).
`python bench/slack.py --rate 25` offers 25/s instead.
Last line: RESULT vs_bare=<hermes rate / bare rate> p99_ms=<hermes p99 latency>
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from trio_websocket import open_websocket_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatbench import (  # noqa: E402
    FakeProcess,
    Serve,
    closing_lines,
    comparison_lines,
    kill,
    pace_lines,
    per_message,
    percentile,
    serve_log_lines,
    start_helper,
    until_answered,
)
from cpuwatch import CpuWatch  # noqa: E402

from hermes.delivery.outbox import PACES  # noqa: E402
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN  # noqa: E402

BOT_ENV, APP_ENV = "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"
RATE = 50.0  # messages per second, offered
USERS = 50  # DMs, round robin: user U<i> in channel D<i>, i = 1 .. USERS
TOTAL = 1000  # timed messages per side: TOTAL / RATE seconds
WARM_LIMIT = 60.0  # seconds for the warm-up to be answered (serve connects meanwhile)
ANSWER_LIMIT = 30.0  # seconds after the last inject for every timed message to be answered
SETTLE = 0.5  # seconds waited after the last answer before the final count (repeats show)
BUSY_OTHERS = 0.1  # CPUs taken by other processes during a timed phase worth a warning
TARGET_VS_BARE = 0.5
TARGET_P99_MS = 100.0


# --- processes -------------------------------------------------------------------------------


class Fake(FakeProcess):
    """The fake Slack in its own process, driven over HTTP."""

    def __init__(self) -> None:
        super().__init__("slack")

    async def message(self, http: httpx.AsyncClient, text: str, user: str, channel: str) -> str:
        """A user writes in their DM; the event's id."""
        kwargs = {"text": text, "user": user, "channel": channel, "channel_type": "im"}
        return str(await self.inject(http, "message", kwargs))


def platform(fake_url: str) -> str:
    """The platform's YAML under `platforms:` for serve, on the fake."""
    return (
        "  slack:\n"
        f"    token_env: {BOT_ENV}\n    app_token_env: {APP_ENV}\n"
        f"    base_url: '{fake_url}'\n    allow_all_users: true\n"
    )


def start_serve(tmp: Path, fake_url: str) -> Serve:
    return Serve(tmp, platform(fake_url), {BOT_ENV: BOT_TOKEN, APP_ENV: APP_TOKEN})


# --- the baseline: a bare Socket Mode echo client --------------------------------------------


async def echo_client(url: str) -> None:
    """apps.connections.open, the socket opened, hello awaited; each envelope acknowledged
    at once, each message event answered by a task of its own posting on a client of
    its own. Runs until cancelled."""
    async with (
        httpx.AsyncClient(timeout=30) as opener,
        httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {BOT_TOKEN}"}) as poster,
        trio.open_nursery() as nursery,
    ):

        async def answer(event: dict[str, Any]) -> None:
            params = {"channel": event["channel"], "text": "You said: " + event["text"]}
            body = (await poster.post(f"{url}/api/chat.postMessage", json=params)).json()
            if not body.get("ok"):
                raise RuntimeError(f"chat.postMessage refused: {body!r}")

        headers = {"authorization": f"Bearer {APP_TOKEN}"}
        body = (await opener.post(f"{url}/api/apps.connections.open", headers=headers)).json()
        if not body.get("ok"):
            raise RuntimeError(f"apps.connections.open refused: {body!r}")
        async with open_websocket_url(body["url"]) as ws:
            hello = json.loads(await ws.get_message())
            if hello.get("type") != "hello":
                raise RuntimeError(f"the socket began with {hello!r}")
            while True:
                frame = json.loads(await ws.get_message())
                if "envelope_id" not in frame:
                    continue  # a disconnect: not expected here
                await ws.send_message(json.dumps({"envelope_id": frame["envelope_id"]}))
                if frame.get("type") != "events_api":
                    continue
                event = frame["payload"]["event"]
                if event.get("type") == "message" and "bot_id" not in event and "text" in event:
                    nursery.start_soon(answer, event)


# --- one side --------------------------------------------------------------------------------


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


@attrs.define
class Injected:
    user: str
    channel: str
    text: str
    at: float  # the bench's time.monotonic() at the inject call
    event_id: str = ""


@attrs.define
class Side:
    name: str
    injected: list[Injected] = attrs.Factory(list)  # every injection, warm-up first, in order
    timed: list[Injected] = attrs.Factory(list)
    late: list[float] = attrs.Factory(list)  # the timed wake-ups after their scheduled times
    latencies: list[float] = attrs.Factory(list)  # inject -> reply recorded, timed messages
    seconds: float = 0.0  # first timed inject -> last timed answer
    answered: int = 0  # timed messages answered (exactly once or not)
    envelopes: int = 0  # envelopes delivered during the timed phase
    acks: int = 0  # acknowledgements during the timed phase
    retries: int = 0  # envelopes redelivered (retry_attempt > 0), the whole run
    reads: int = 0  # the fake's state read while waiting for answers
    sends: list[dict[str, Any]] = attrs.Factory(list)  # every post, as the fake recorded it
    where: dict[str, list[float]] = attrs.Factory(lambda: {"ack": [], "reply": []})
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
    """The fake's posts, by the injection they answer (its index in side.injected),
    matched by text; a post answering no injection is a problem (key -1)."""
    index = {"You said: " + injected.text: n for n, injected in enumerate(side.injected)}
    replies: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in state["sent"]:
        replies[index.get(unescape(str(s.get("text", ""))), -1)].append(s)
    return replies


def check(side: Side, state: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each injection acknowledged and answered exactly once, in its channel; problems
    noted. The first reply of each injection answered."""
    replies = replies_of(state, side)
    acked = Counter(state["acked"])
    firsts = {}
    unanswered, unacked = [], []
    for n, injected in enumerate(side.injected):
        if acked[injected.event_id] != 1:
            unacked.append((n, acked[injected.event_id]))
        got = replies.get(n, [])
        if not got:
            unanswered.append(n)
            continue
        if len(got) > 1:
            side.problems.append(f"message {n} ({injected.event_id}) answered {len(got)} times")
        reply = got[0]
        firsts[n] = reply
        if reply["channel"] != injected.channel:
            side.problems.append(f"message {n}: answered in {reply['channel']}, "
                                 f"not {injected.channel}")  # fmt: skip
    if unanswered:
        side.problems.append(f"{len(unanswered)} messages never answered, the first: "
                             f"{unanswered[:5]}")  # fmt: skip
    if unacked:
        side.problems.append(f"{len(unacked)} events not acknowledged exactly once "
                             f"(message, times): {unacked[:5]}")  # fmt: skip
    if replies.get(-1):
        side.problems.append(f"{len(replies[-1])} posts answering no injected message: "
                             f"{replies[-1][:2]!r:.300}")  # fmt: skip
    if state["refused"]:
        side.problems.append(f"{len(state['refused'])} calls refused by the fake: "
                             f"{state['refused'][:2]!r:.300}")  # fmt: skip
    side.retries = sum(1 for d in state["deliveries"] if d["retry_attempt"] > 0)
    if side.retries:
        side.problems.append(f"{side.retries} envelopes redelivered (an ack later than the "
                             "fake's 3 s)")  # fmt: skip
    if state["dropped"]:
        side.problems.append(f"{len(state['dropped'])} events dropped unacknowledged")
    if state["internal_errors"]:
        side.problems.append(f"the fake's internal errors: {state['internal_errors'][:1]!r:.300}")
    return firsts


async def offer(http: httpx.AsyncClient, fake: Fake, side: Side, texts: list[tuple[int, str]],
                late: list[float] | None) -> None:  # fmt: skip
    """Inject `texts` (user number, text) at RATE on absolute times, one at a time, in order."""
    start = trio.current_time()
    for n, (i, text) in enumerate(texts):
        due = start + n / RATE
        await trio.sleep_until(due)
        if late is not None:
            late.append(trio.current_time() - due)
        injected = Injected(f"U{i}", f"D{i}", text, time.monotonic())
        side.injected.append(injected)
        injected.event_id = await fake.message(http, text, injected.user, injected.channel)


async def run_side(side: Side, fake: Fake, pids: list[int]) -> None:
    """Warm up, then the timed phase; measures and checks into `side`."""
    users = list(range(1, USERS + 1))
    warm = [(i, f"m{n} warm up from user U{i}") for n, i in enumerate(users)]
    timed = [(users[n % USERS], f"m{len(warm) + n} hello from user U{users[n % USERS]}")
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
        await trio.sleep(SETTLE)  # a repeated post (or a redelivery) would land meanwhile
        state = await fake.state(http)

    firsts = check(side, state)
    side.timed = side.injected[len(warm) :]
    side.sends = state["sent"]
    side.envelopes = len(state["deliveries"]) - len(before["deliveries"])
    side.acks = len(state["acks"]) - len(before["acks"])
    ack_at: dict[str, float] = {}
    for ack in state["acks"]:
        if ack["event_id"] is not None:
            ack_at.setdefault(ack["event_id"], ack["at"])
    answers = []
    for n, injected in enumerate(side.timed, start=len(warm)):
        reply = firsts.get(n)
        if reply is None:
            continue
        side.latencies.append(reply["at"] - injected.at)
        answers.append(reply["at"])
        acked = ack_at.get(injected.event_id)
        if acked is not None and injected.at <= acked <= reply["at"]:
            side.where["ack"].append(acked - injected.at)
            side.where["reply"].append(reply["at"] - acked)
    side.answered = len(answers)
    side.seconds = max(answers) - side.timed[0].at


# --- the pace ----------------------------------------------------------------------------------


# --- the run ---------------------------------------------------------------------------------


def side_lines(side: Side, what: str, cpu: str) -> list[str]:
    lines = [
        f"{side.name:<7} {side.rate:6.1f} msgs/s  ({side.answered} of {len(side.timed)} answered "
        f"in {side.seconds:.2f} s)  latency p50 {side.p(50):6.2f} ms  p99 {side.p(99):6.2f} ms  "
        f"max {side.p(100):6.2f} ms  ({what})",
        f"        offered {RATE:.0f}/s: achieved {side.offered:.1f}/s, wake-ups late p50 "
        f"{percentile(side.late, 50):.2f} ms, p99 {percentile(side.late, 99):.2f} ms; "
        f"{side.envelopes} envelopes, {side.acks} acks, {side.retries} redelivered; "
        f"{side.reads} reads of the fake's state while waiting for the answers",
        f"        cpu per message: {cpu}; other processes {side.cpu.others:.2f} CPUs",
    ]
    if side.where["ack"]:
        parts = []
        for name, label in (("ack", "inject -> ack recorded (delivery, admission)"),
                            ("reply", "ack -> reply (turn, outbox, pace, post)")):  # fmt: skip
            values = side.where[name]
            mean = sum(values) / len(values) * 1000
            parts.append(f"{label} {mean:.2f}/{percentile(values, 50):.2f}/"
                         f"{percentile(values, 99):.2f}")  # fmt: skip
        lines.append(f"        where, mean/p50/p99 ms ({len(side.where['ack'])} acked before "
                     f"their reply): " + "; ".join(parts))  # fmt: skip
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
        client_log = Path(tmp) / "echo-client.stderr"
        client = start_helper(__file__, "--echo-client", fake.url, client_log)
        st.callback(kill, client)
        try:
            trio.run(run_side, bare, fake, [os.getpid(), fake.proc.pid, client.pid])
        except BaseException:
            print(f"the echo client's stderr:\n{client_log.read_text()[-3000:]}", file=sys.stderr)
            raise
        kill(client)
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

    pace = PACES.get("slack")
    print(f"fake       Slack (Web API, Socket Mode) in its own process, a fresh one per side "
          f"({bare_url}, {hermes_url}); {TOTAL} DMs offered at {RATE:.0f}/s, round robin over "
          f"{USERS} users (each one a second apart), after a warm-up of one each")  # fmt: skip
    if pace is not None:
        print(f"pace       hermes's outbox posts to Slack at most {pace.per_second:g}/s overall "
              f"(burst {pace.burst}), {pace.per_chat_per_second:g}/s per chat (burst "
              f"{pace.chat_burst}) (hermes/delivery/outbox.py PACES); the fake enforces no "
              "limit, the bare client keeps none")  # fmt: skip
    n = len(bare.timed)
    bench, fake_cpu, client_cpu = bare.cpu.used
    cpu = (
        f"echo client {per_message(client_cpu, n)}, bench (injector) {per_message(bench, n)}, "
        f"fake {per_message(fake_cpu, n)}"
    )
    what = "inject -> reply recorded; trio + trio_websocket + httpx echo client"
    for line in side_lines(bare, what, cpu):
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
    paced = 0
    if pace is not None:
        lines, paced = pace_lines("slack", hermes.sends, "channel")
        for line in lines:
            print(line)
    for line in serve_log_lines(serve_log):
        print(line)
    for line in comparison_lines(bare, hermes, TARGET_VS_BARE, TARGET_P99_MS):
        print(line)
    if pace is not None and RATE >= pace.per_second:
        print(f"NOTE: {RATE:.0f}/s offered is at (or above) hermes's Slack pace of "
              f"{pace.per_second:g}/s overall: a burst of late wake-ups or slow turns can "
              "empty its bucket and hold posts")  # fmt: skip
    if paced:
        print(f"WARNING: the pace bound: {paced} of hermes's posts came at their earliest "
              "allowed time (the pace most likely held them; by design, not a stall)")  # fmt: skip
    for line in closing_lines(bare, hermes, RATE, BUSY_OTHERS, notes):
        print(line)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--echo-client"]:
        trio.run(echo_client, sys.argv[2])
    else:
        if sys.argv[1:2] == ["--rate"]:  # e.g. --rate 25: half Slack's 50/s pace
            RATE = float(sys.argv[2])
        main()
