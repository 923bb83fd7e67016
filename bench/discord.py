"""A Discord bot's latency: `hermes serve` against a bare Gateway echo client, one fake.

Run: python bench/discord.py   (from the repository root; takes about a minute)
- The fake Discord (tests/fakes/discord.py: the REST API v10 and the Gateway on one
  port) runs in its own process, a fresh one for each side, with a heartbeat interval
  of 1 s (the FakeDiscord class's default; its command line's is Discord's 41.25 s,
  which would see none in a run), so heartbeats go on under load (the longest gap
  between two is printed; over 1.5 intervals is reported). The bench drives it
  over HTTP: `POST {url}/_fake/message` injects a user's DM (a MESSAGE_CREATE with no
  guild_id, dispatched on the current Gateway session; it answers the message's id),
  `GET {url}/_fake/state` reads the messages created (`sent`), the dispatches written
  to the socket, the typing triggers, each with its `at` (the fake's time.monotonic():
  on Linux the same CLOCK_MONOTONIC as the bench's).
- bare (the baseline): an echo client written here (`echo_client`), trio +
  trio_websocket + httpx, as small as a real one gets: GET /gateway/bot with the bot
  token, the returned URL opened (`?v=10&encoding=json`), Hello awaited, a heartbeat
  task (op 1 every heartbeat_interval), Identify (op 2); for each MESSAGE_CREATE from
  a non-bot author a task posting `POST /channels/{id}/messages` ("You said: " +
  content, message_reference to the message), so posts run concurrently with the
  socket's reading. It runs in a process of its own (this file with `--echo-client
  URL`), as serve does: it shares no event loop with the injector, and its CPU is its
  own.
- hermes: `hermes serve` as a real process on a fresh HERMES_HOME, no `model:`
  section (the built-in offline model answers "You said: <text>" at once), its
  Discord adapter on the fake (`allow_all_users`). Everything it does per event
  counts: the journal commit, the session's turn, the typing trigger it posts for a
  DM, the reply's outbox row and its send (with message_reference).
- The same load on both sides, after the same warm-up: one DM from each of 50 users
  (author <1000+i> in channel <2000+i>; not measured: the socket, hermes's sessions
  created), answered before the timed phase starts. Timed: 1,000 DMs offered at
  50/s, round robin over the 50 users (one message a second each, so no session is
  ever busy), message n injected at start + n/50 s (`trio.sleep_until` on absolute
  times: a late wake-up does not push the rest; the achieved rate and the wake-ups'
  lateness are printed). Injections are made one at a time.
- Latency per message: the bench's time.monotonic() at its inject call -> the fake
  recording the reply's POST. A reply is matched to its message by its
  message_reference.message_id (the bare client's and hermes's alike), and checked:
  its channel, its text ("You said: <text>", each text carrying a unique marker
  `m<n>`), every message dispatched (not replayed) and answered exactly once on both
  sides, none lost; any that was not is reported. Throughput: messages answered /
  (last answer - first inject).
- At a fixed offered rate, a side that keeps up answers at that rate: when both do,
  the throughput ratio is about 1 by construction and says only that hermes did not
  fall behind; the latency is the telling figure. The `where` line splits it at the
  dispatch the fake records as written to the socket: inject -> dispatched (the
  fake's own work) and dispatched -> reply (the client: for hermes the admission, the
  turn, the outbox row, the pacing, the post). The fake stamps a dispatch after its
  socket write returns: a fast client's reply is sometimes recorded first (those are
  left out of it).
- CPU per message during the timed phase (from the first inject until the bench has
  seen every answer; it reads the fake's state then, ever less often: those reads
  count in the bench's and the fake's CPU): the bench (the injector), the fake, the
  echo client, and serve with its children (the state.db writer); other processes'
  CPU is printed and warned about.
- hermes's outbox paces its sends to Discord (hermes/delivery/outbox.py PACES: 50
  messages/s overall after a burst of 50, 1/s per chat after a burst of 3): 50/s over
  50 chats, one a second each, is right at that pace. The `pace` line replays
  hermes's posts (as the fake recorded them) through the same cell-rate rule and
  counts those that came within 5 ms of their earliest allowed time: those the pace
  most likely held (a warning if any).
`python bench/discord.py --rate 25` offers 25/s instead.
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
from tests.fakes.discord import TOKEN  # noqa: E402

TOKEN_ENV = "DISCORD_BOT_TOKEN"
HEARTBEAT = 1.0  # seconds, the fake's Hello (Discord: 41.25 s, none in a run)
INTENTS = 37376  # GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT
RATE = 50.0  # messages per second, offered
USERS = 50  # DMs, round robin: author 1000+i in channel 2000+i, i = 1 .. USERS
TOTAL = 1000  # timed messages per side: TOTAL / RATE seconds
WARM_LIMIT = 60.0  # seconds for the warm-up to be answered (serve connects meanwhile)
ANSWER_LIMIT = 30.0  # seconds after the last inject for every timed message to be answered
SETTLE = 0.5  # seconds waited after the last answer before the final count (repeats show)
BUSY_OTHERS = 0.1  # CPUs taken by other processes during a timed phase worth a warning
TARGET_VS_BARE = 0.5
TARGET_P99_MS = 100.0


# --- processes -------------------------------------------------------------------------------


class Fake(FakeProcess):
    """The fake Discord in its own process, driven over HTTP."""

    def __init__(self) -> None:
        super().__init__("discord", "--heartbeat-interval", str(HEARTBEAT))

    async def message(
        self, http: httpx.AsyncClient, content: str, author: str, channel: str
    ) -> str:
        """A user writes in their DM; the message's id."""
        kwargs = {"content": content, "author_id": author, "channel_id": channel}
        return str(await self.inject(http, "message", kwargs))


def platform(fake_url: str) -> str:
    """The platform's YAML under `platforms:` for serve, on the fake."""
    return (
        "  discord:\n"
        f"    token_env: {TOKEN_ENV}\n"
        f"    base_url: '{fake_url}'\n    allow_all_users: true\n"
    )


def start_serve(tmp: Path, fake_url: str) -> Serve:
    return Serve(tmp, platform(fake_url), {TOKEN_ENV: TOKEN})


# --- the baseline: a bare Gateway echo client ------------------------------------------------


async def echo_client(url: str) -> None:
    """GET /gateway/bot, the socket opened, Hello awaited, heartbeats from a task,
    Identify; each MESSAGE_CREATE from a non-bot author answered by a task of its own
    posting with a client of its own. Runs until cancelled."""
    headers = {"authorization": f"Bot {TOKEN}"}
    api = f"{url}/api/v10"
    async with (
        httpx.AsyncClient(timeout=30, headers=headers) as opener,
        httpx.AsyncClient(timeout=30, headers=headers) as poster,
        trio.open_nursery() as nursery,
    ):
        seq: list[int | None] = [None]

        async def answer(message: dict[str, Any]) -> None:
            body = {"content": "You said: " + message["content"],
                    "message_reference": {"message_id": message["id"]}}  # fmt: skip
            channel = message["channel_id"]
            response = await poster.post(f"{api}/channels/{channel}/messages", json=body)
            if response.status_code != 200:
                raise RuntimeError(f"create message refused: {response.text!r}")

        async def heartbeat(ws: Any, interval: float) -> None:
            while True:
                await trio.sleep(interval)
                await ws.send_message(json.dumps({"op": 1, "d": seq[0]}))

        response = await opener.get(f"{api}/gateway/bot")
        if response.status_code != 200:
            raise RuntimeError(f"gateway/bot refused: {response.text!r}")
        async with open_websocket_url(response.json()["url"] + "?v=10&encoding=json") as ws:
            hello = json.loads(await ws.get_message())
            if hello.get("op") != 10:
                raise RuntimeError(f"the socket began with {hello!r}")
            nursery.start_soon(heartbeat, ws, hello["d"]["heartbeat_interval"] / 1000)
            properties = {"os": "linux", "browser": "bench", "device": "bench"}
            identify = {"token": TOKEN, "intents": INTENTS, "properties": properties}
            await ws.send_message(json.dumps({"op": 2, "d": identify}))
            while True:
                frame = json.loads(await ws.get_message())
                if frame.get("s") is not None:
                    seq[0] = frame["s"]
                if frame.get("op") != 0 or frame.get("t") != "MESSAGE_CREATE":
                    continue  # READY, heartbeat acks
                message = frame["d"]
                if not message.get("author", {}).get("bot"):
                    nursery.start_soon(answer, message)


# --- one side --------------------------------------------------------------------------------


@attrs.define
class Injected:
    author: str
    channel: str
    text: str
    at: float  # the bench's time.monotonic() at the inject call
    message_id: str = ""


@attrs.define
class Side:
    name: str
    injected: list[Injected] = attrs.Factory(list)  # every injection, warm-up first, in order
    timed: list[Injected] = attrs.Factory(list)
    late: list[float] = attrs.Factory(list)  # the timed wake-ups after their scheduled times
    latencies: list[float] = attrs.Factory(list)  # inject -> reply recorded, timed messages
    seconds: float = 0.0  # first timed inject -> last timed answer
    answered: int = 0  # timed messages answered (exactly once or not)
    dispatched: int = 0  # MESSAGE_CREATEs written during the timed phase
    typing: int = 0  # typing triggers during the timed phase
    heartbeats: int = 0  # heartbeats, the whole run
    beat_gap: float = 0.0  # the longest gap between two heartbeats, seconds
    reads: int = 0  # the fake's state read while waiting for answers
    sends: list[dict[str, Any]] = attrs.Factory(list)  # every post, as the fake recorded it
    where: dict[str, list[float]] = attrs.Factory(lambda: {"dispatch": [], "reply": []})
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
    matched by message_reference; a post answering no injection is a problem (key -1)."""
    index = {injected.message_id: n for n, injected in enumerate(side.injected)}
    replies: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in state["sent"]:
        reference = str((s.get("message_reference") or {}).get("message_id"))
        replies[index.get(reference, -1)].append(s)
    return replies


def check(side: Side, state: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each injection dispatched and answered exactly once, in its channel, with its
    text; problems noted. The first reply of each injection answered."""
    replies = replies_of(state, side)
    dispatched = Counter(d["id"] for d in state["dispatches"]
                         if d["t"] == "MESSAGE_CREATE" and not d["replay"])  # fmt: skip
    firsts = {}
    unanswered, undispatched, wrong_text = [], [], []
    for n, injected in enumerate(side.injected):
        if dispatched[injected.message_id] != 1:
            undispatched.append((n, dispatched[injected.message_id]))
        got = replies.get(n, [])
        if not got:
            unanswered.append(n)
            continue
        if len(got) > 1:
            side.problems.append(f"message {n} ({injected.message_id}) answered {len(got)} times")
        reply = got[0]
        firsts[n] = reply
        if reply["channel_id"] != injected.channel:
            side.problems.append(f"message {n}: answered in {reply['channel_id']}, "
                                 f"not {injected.channel}")  # fmt: skip
        if reply.get("content") != "You said: " + injected.text:
            wrong_text.append((n, reply.get("content")))
    if unanswered:
        side.problems.append(f"{len(unanswered)} messages never answered, the first: "
                             f"{unanswered[:5]}")  # fmt: skip
    if undispatched:
        side.problems.append(f"{len(undispatched)} messages not dispatched exactly once "
                             f"(message, times): {undispatched[:5]}")  # fmt: skip
    if wrong_text:
        side.problems.append(f"{len(wrong_text)} replies with an unexpected text: "
                             f"{wrong_text[:2]!r:.300}")  # fmt: skip
    if replies.get(-1):
        side.problems.append(f"{len(replies[-1])} posts answering no injected message: "
                             f"{replies[-1][:2]!r:.300}")  # fmt: skip
    if state["refused"]:
        side.problems.append(f"{len(state['refused'])} calls refused by the fake: "
                             f"{state['refused'][:2]!r:.300}")  # fmt: skip
    if state["lost"]:
        side.problems.append(f"{len(state['lost'])} events lost (no valid session)")
    if state["identifies"] != 1 or state["resumes"] or state["connections"] != 1:
        side.problems.append(f"{state['identifies']} identifies, {state['resumes']} resumes, "
                             f"{state['connections']} connections (1, 0, 1 expected)")  # fmt: skip
    beats = [h["at"] for h in state["heartbeats"]]
    side.beat_gap = max((b - a for a, b in zip(beats, beats[1:], strict=False)), default=0.0)
    if side.beat_gap > 1.5 * HEARTBEAT:
        side.problems.append(f"heartbeats {side.beat_gap:.2f} s apart at most (every "
                             f"{HEARTBEAT:g} s expected): the client's loop stalled")  # fmt: skip
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
        injected = Injected(str(1000 + i), str(2000 + i), text, time.monotonic())
        side.injected.append(injected)
        injected.message_id = await fake.message(http, text, injected.author, injected.channel)


async def run_side(side: Side, fake: Fake, pids: list[int]) -> None:
    """Warm up, then the timed phase; measures and checks into `side`."""
    users = list(range(1, USERS + 1))
    warm = [(i, f"m{n} warm up from user {1000 + i}") for n, i in enumerate(users)]
    timed = [(users[n % USERS], f"m{len(warm) + n} hello from user {1000 + users[n % USERS]}")
             for n in range(TOTAL)]  # fmt: skip
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        with trio.fail_after(WARM_LIMIT):  # the client identifies: injections before are lost
            while True:
                if (await fake.state(http))["sessions"]:
                    break
                await trio.sleep(0.05)
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
        await trio.sleep(SETTLE)  # a repeated post would land meanwhile
        state = await fake.state(http)

    firsts = check(side, state)
    side.timed = side.injected[len(warm) :]
    side.sends = state["sent"]
    side.dispatched = sum(1 for d in state["dispatches"] if d["t"] == "MESSAGE_CREATE") - sum(
        1 for d in before["dispatches"] if d["t"] == "MESSAGE_CREATE"
    )
    side.typing = len(state["typing"]) - len(before["typing"])
    side.heartbeats = len(state["heartbeats"])
    written: dict[str, float] = {}
    for d in state["dispatches"]:
        if d["id"] is not None and d["at"] is not None:
            written.setdefault(d["id"], d["at"])
    answers = []
    for n, injected in enumerate(side.timed, start=len(warm)):
        reply = firsts.get(n)
        if reply is None:
            continue
        side.latencies.append(reply["at"] - injected.at)
        answers.append(reply["at"])
        at = written.get(injected.message_id)
        if at is not None and injected.at <= at <= reply["at"]:
            side.where["dispatch"].append(at - injected.at)
            side.where["reply"].append(reply["at"] - at)
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
        f"{side.dispatched} dispatches, {side.typing} typing triggers, {side.heartbeats} "
        f"heartbeats (at most {side.beat_gap:.2f} s apart); {side.reads} reads of the "
        "fake's state while waiting for the answers",
        f"        cpu per message: {cpu}; other processes {side.cpu.others:.2f} CPUs",
    ]
    if side.where["dispatch"]:
        parts = []
        for name, label in (("dispatch", "inject -> dispatch written (the fake)"),
                            ("reply", "dispatch -> reply (admission, turn, outbox, pace, "
                                      "post)")):  # fmt: skip
            values = side.where[name]
            mean = sum(values) / len(values) * 1000
            parts.append(f"{label} {mean:.2f}/{percentile(values, 50):.2f}/"
                         f"{percentile(values, 99):.2f}")  # fmt: skip
        lines.append(f"        where, mean/p50/p99 ms ({len(side.where['dispatch'])} "
                     f"messages): " + "; ".join(parts))  # fmt: skip
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
        if client.poll() is not None:
            notes.append(f"the echo client exited ({client.returncode}): "
                         f"{client_log.read_text()[-300:]!r}")  # fmt: skip
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

    pace = PACES.get("discord")
    print(f"fake       Discord (REST v10, Gateway; heartbeat {HEARTBEAT:g} s) in its own process, "
          f"a fresh one per side ({bare_url}, {hermes_url}); {TOTAL} DMs offered at {RATE:.0f}/s, "
          f"round robin over {USERS} users (each one a second apart), after a warm-up of one "
          "each")  # fmt: skip
    if pace is not None:
        print(f"pace       hermes's outbox posts to Discord at most {pace.per_second:g}/s overall "
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
        lines, paced = pace_lines("discord", hermes.sends, "channel_id")
        for line in lines:
            print(line)
    for line in serve_log_lines(serve_log):
        print(line)
    for line in comparison_lines(bare, hermes, TARGET_VS_BARE, TARGET_P99_MS):
        print(line)
    if pace is not None and RATE >= pace.per_second:
        print(f"NOTE: {RATE:.0f}/s offered is at (or above) hermes's Discord pace of "
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
        if sys.argv[1:2] == ["--rate"]:  # e.g. --rate 25: half Discord's 50/s pace
            RATE = float(sys.argv[2])
        main()
