"""A chat platform's latency: `hermes serve` against a bare echo client, on the same fake.

Run: python bench/chat.py PLATFORM [--rate R]   (from the repository root; about a minute)
PLATFORM names a file bench/chat_<PLATFORM>.py (telegram, slack, discord, whatsapp,
matrix, signal, teams, mattermost, imessage), which holds what is that platform's own:
its fake's surface, the bare echo client, how a reply is matched to its message and
checked, where its latency is split (its docstring says).
Everything else is here, the same for all; a platform added later gets its bench by
adding such a file.
- The platform's fake (tests/fakes/<PLATFORM>.py) runs in its own process, a fresh
  one for each side. The bench drives it over HTTP: `POST {url}/_fake/message`
  injects a user's message in a private chat, `GET {url}/_fake/state` reads what it
  took, each with its `at` (the fake's time.monotonic(): on Linux the same
  CLOCK_MONOTONIC as the bench's).
- bare (the baseline): the platform's echo client, trio + httpx (and trio_websocket
  where the platform pushes over a socket), as small as a real one gets: each user
  message answered with "You said: <text>" by a task of its own, so sends run
  concurrently with the reading. It runs in a process of its own (this file with
  `PLATFORM --echo-client URL`), as serve does: it shares no event loop with the
  injector, and its CPU is its own.
- hermes: `hermes serve` as a real process on a fresh HERMES_HOME, no `model:`
  section (the built-in offline model answers "You said: <text>" at once), no
  per-user rate limit (`gateway.rate_limit: 0`: the offered load is the measure), no
  merge window (`gateway.merge_window: 0`: the bare bot merges nothing; with the
  default 1.5 s a lone message waits exactly that long before its turn), its adapter
  on the fake (`allow_all_users`). Everything it does per message counts: the
  journal commit, the session's turn, the reply's outbox row, the
  pacing and the send.
- The same load on both sides, after the same warm-up: one message from each of 50
  users (not measured: the connections, hermes's sessions created), answered before
  the timed phase starts. Timed: 1,000 messages (a platform may set fewer: WhatsApp,
  Mattermost and iMessage 500)
  offered at the rate (by default the platform's: Telegram 25/s, below its 30/s pace;
  Slack and Discord 50/s, at theirs; WhatsApp 5/s, each user under its pair rate;
  Teams 20/s; Mattermost 8/s, under its server's default 10 requests/s per user;
  iMessage 8/s, under hermes's 10/s pace for it),
  round robin over the 50 users (at 50/s one message a second each, so no session
  is ever busy: hermes's busy handling is not what is measured), message n injected
  at start + n/rate s (`trio.sleep_until` on absolute times: a late wake-up does not
  push the rest; the achieved rate and the wake-ups' lateness are printed).
  Injections are made one at a time, in order; each text carries a unique marker
  (`m<n>`).
- Latency per message: the bench's time.monotonic() at its inject call -> the fake
  recording the reply. A reply is matched to its message the platform's way and
  checked: its chat, its text, every message answered exactly once on both sides,
  and the platform's own checks; any that was not is reported. Throughput:
  messages answered / (last answer - first inject).
- At a fixed offered rate, a side that keeps up answers at that rate: when both do,
  the throughput ratio is about 1 by construction and says only that hermes did not
  fall behind; the latency is the telling figure. The `where` line splits it at a
  point the fake records between the two (the platform's file says which).
- CPU per message during the timed phase (from the first inject until the bench has
  seen every answer; it reads the fake's state then, ever less often: those reads
  count in the bench's and the fake's CPU): the bench (the injector), the fake, the
  echo client, and serve with its children (the state.db writer); other processes'
  CPU is printed and warned about.
- hermes's outbox paces its sends to the platform's documented limits
  (hermes/delivery/outbox.py PACES); the fake enforces none, the bare client keeps
  none. The `pace` line replays hermes's posts (as the fake recorded them) through
  the same cell-rate rule and counts those that came within 5 ms of their earliest
  allowed time: those the pace most likely held (a warning if any). Offered above
  the overall pace, hermes answers at its pace, its backlog grows and its latency
  with it, to seconds (warned; by design, not a stall).
Targets (issue 26), at the default rates: vs_bare >= 0.9, p99 <= 100 ms.
Last line: RESULT vs_bare=<hermes rate / bare rate> p99_ms=<hermes p99 latency>
cpu_ms_per_msg=<serve's CPU per answered message> bare_cpu_ms_per_msg=<the echo client's>
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from hypercorn.config import Config as HttpConfig
from hypercorn.trio import serve as hypercorn_serve

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import CpuWatch, kill, percentile, start_fake  # noqa: E402

from hermes.delivery.outbox import PACES  # noqa: E402
from hermes.gateway.serve import READY_LINE  # noqa: E402

USERS = 50  # private chats, round robin: user i = 1 .. USERS in chat i (the platform's ids)
TOTAL = 1000  # timed messages per side: TOTAL / rate seconds
WARM_LIMIT = 60.0  # seconds for the warm-up to be answered (serve connects meanwhile)
ANSWER_LIMIT = 30.0  # seconds after the last inject for every timed message to be answered
SETTLE = 0.5  # seconds waited after the last answer before the final count (repeats show)
BUSY_OTHERS = 0.1  # CPUs taken by other processes during a timed phase worth a warning
HELD = 0.005  # a post this close to its earliest allowed time was probably held by the pace
LEVELS = ("WARNING", "ERROR", "CRITICAL")
TARGET_VS_BARE = 0.9
TARGET_P99_MS = 100.0


# --- what a platform's file provides ---------------------------------------------------------


class Platform:
    """What one platform's bench has of its own. A file bench/chat_<name>.py holds one,
    as PLATFORM; `python bench/chat.py <name>` finds it."""

    name = ""  # hermes's platform (its `platforms:` key, its PACES), and its fake's module
    fake = ""  # the fake, as the first line names it
    fake_module = ""  # tests/fakes/<this>.py, where the fake is not named as the platform
    fake_args: tuple[str, ...] = ()  # the fake's command line
    rate = 50.0  # messages offered per second, by default
    client = ""  # the bare echo client, as its line names it
    chat_field = ""  # a post's chat, as the fake records it
    split = ("", "", "")  # the `where` line: which messages, the parts before and after
    count = TOTAL  # timed messages per side
    gateway = ""  # lines under `gateway:` in serve's config (a webhook platform's listener)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        """The platform's YAML under `platforms:` for serve on the fake, and its tokens
        (serve's environment)."""
        raise NotImplementedError

    def serving(self, fake_url: str, home: Path) -> None:
        """Once serve is ready on `home`: what the platform needs then (a webhook platform
        points the fake's deliveries at serve's listener)."""

    def client_url(self, fake_url: str) -> str:
        """What the echo client is given."""
        return fake_url

    async def echo_client(self, url: str) -> None:
        """The bare echo client on the fake at `url`; runs until cancelled."""
        raise NotImplementedError

    def who(self, i: int) -> tuple[Any, Any]:
        """User i's id and the id of their private chat."""
        raise NotImplementedError

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        """Until an injection will reach the client (before, it would be lost)."""

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> Any:
        """`injected`'s user writes its text in its chat; what the fake answers (the id
        of an update, event or message)."""
        raise NotImplementedError

    def index(self, state: dict[str, Any], side: Side) -> dict[Any, int]:
        """Each injection's number in side.injected, by what answers() gives for its reply."""
        return {injected.id: n for n, injected in enumerate(side.injected)}

    def answers(self, post: dict[str, Any]) -> Any:
        """What a post the fake recorded says it answers."""
        raise NotImplementedError

    def text(self, post: dict[str, Any]) -> str:
        """A post's text, as a user reads it."""
        raise NotImplementedError

    def check(self, side: Side, state: dict[str, Any]) -> None:
        """The platform's own checks of the final state, into side.problems."""

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        """What the timed phase took on the wire besides the messages, for the side's line."""
        raise NotImplementedError

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """The times of the point that splits a reply's latency, by mark_key()."""
        raise NotImplementedError

    def mark_key(self, injected: Injected) -> Any:
        return injected.id


def first_times(records: list[dict[str, Any]], key: str) -> dict[Any, list[float]]:
    """The first `at` of each `key` in `records` (none for a key of None)."""
    first: dict[Any, list[float]] = {}
    for record in records:
        if record[key] is not None and record["at"] is not None:
            first.setdefault(record[key], [record["at"]])
    return first


Answer = tuple[int, list[tuple[bytes, bytes]], bytes]  # a webhook's status, headers, body


def point_fake(fake_url: str, webhook: str) -> None:
    """The fake delivers to `webhook` from now on."""
    body = httpx.post(f"{fake_url}/_fake/configure", json={"webhook_url": webhook}).json()
    if not body.get("ok"):
        raise RuntimeError(f"the fake took no webhook URL: {body!r}")


async def serve_webhook(
    nursery: trio.Nursery,
    fake_url: str,
    path: str,
    handle: Callable[[dict[bytes, bytes], bytes, bytes], Answer],
) -> None:
    """A pushed platform's echo client's webhook server: hypercorn's Trio worker on a free
    port, each request's body read whole and handed with its headers and query to `handle`
    (which starts any answer in `nursery`), the fake pointed at `path` on it."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            event = await receive()
            body, more = body + event.get("body", b""), event.get("more_body", False)
        status, headers, out = handle(dict(scope["headers"]), scope["query_string"], body)
        headers = [*headers, (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    config = HttpConfig()
    config.bind = ["127.0.0.1:0"]
    bound = await nursery.start(hypercorn_serve, app, config)
    webhook = f"http://{bound[0].removeprefix('http://')}{path}"
    await trio.to_thread.run_sync(point_fake, fake_url, webhook)


def not_2xx(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Deliveries answered other than 2xx (or not at all): the fake tries them again."""
    return [d for d in state["deliveries"] if not 200 <= (d.get("status_code") or 0) < 300]


class Pushed(Platform):
    """A platform that pushes to a webhook (WhatsApp, Teams, SMS, iMessage): serve's
    listener on a free port, the fake pointed at it once serve is ready; a delivery not
    answered 2xx is a problem; a reply's latency split where its delivery was answered."""

    gateway = "  webhooks:\n    port: 0\n"
    hook_query = ""  # what serve's webhook URL carries after its path (iMessage's token)
    delivery_id = "id"  # a delivery's message id, as the fake records it

    def serving(self, fake_url: str, home: Path) -> None:
        """The fake delivers to serve's webhook listener."""
        port = int((home / "webhooks.port").read_text())
        point_fake(fake_url, f"http://127.0.0.1:{port}/webhooks/{self.name}{self.hook_query}")

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        while True:  # the echo client gives the fake its webhook URL once it listens
            if (await fake.state(http))["webhook_url"]:
                return
            await trio.sleep(0.05)

    def check(self, side: Side, state: dict[str, Any]) -> None:
        if bad := not_2xx(state):
            side.problems.append(f"{len(bad)} delivery attempts not answered 2xx "
                                 f"(so retried): {bad[:2]!r:.300}")  # fmt: skip

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """Each message's delivery answered 2xx, by its id."""
        done = [d for d in state["deliveries"] if 200 <= (d.get("status_code") or 0) < 300]
        return first_times(done, self.delivery_id)


# --- processes -------------------------------------------------------------------------------


class Fake:
    """A platform's fake (`python -m tests.fakes.<name> ...`) in its own process, driven
    over its `_fake/` HTTP surface."""

    def __init__(self, platform: Platform) -> None:
        self.proc, self.url = start_fake(platform.fake_module or platform.name, *platform.fake_args)

    async def inject(self, http: httpx.AsyncClient, what: str, kwargs: dict[str, Any]) -> Any:
        """`_fake/<what>` with `kwargs`; its result (an update's, event's or message's id)."""
        body = (await http.post(f"{self.url}/_fake/{what}", json=kwargs)).json()
        if not body.get("ok"):
            raise RuntimeError(f"the fake refused an injection: {body!r}")
        return body["result"]

    async def state(self, http: httpx.AsyncClient) -> dict[str, Any]:
        body = (await http.get(f"{self.url}/_fake/state")).json()
        if not body.get("ok"):
            raise RuntimeError(f"the fake's state: {body!r}")
        return body["result"]


class Serve:
    """`hermes serve` on a fresh home under `tmp` with the offline model (no `model:`
    section) and one platform (its YAML under `platforms:`), its tokens in the
    environment; started and ready."""

    def __init__(self, tmp: Path, platform: str, tokens: dict[str, str], gateway: str) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        (self.home / "config.yaml").write_text(
            # No per-user limit: the offered load is the measure (users write 1 a second).
            # No merge window: the bare bot has none (a lone message would wait it out).
            f"gateway:\n  rate_limit: 0\n  merge_window: 0\n  local:\n    port: 0\n{gateway}"
            f"ops:\n  port: 0\nplatforms:\n{platform}"
        )
        env = {**os.environ, "HERMES_HOME": str(self.home), **tokens}
        self.log_path = tmp / "serve.stderr"
        with open(self.log_path, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hermes.cli.main", "serve"],
                env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
            )  # fmt: skip
        ready = ""
        for line in self.proc.stdout:
            if line.startswith(READY_LINE):
                ready = line
                break
        if not ready:
            self.proc.wait()
            raise SystemExit(f"hermes serve exited ({self.proc.returncode}) before ready:\n"
                             f"{self.log()[-3000:]}")  # fmt: skip
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # never blocks it

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> str:
        """SIGTERM: drain and exit; a warning if it did not exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill(self.proc)
                return "serve did not drain within 30 s; killed"
        if self.proc.returncode != 0:
            return f"serve exited {self.proc.returncode} after SIGTERM"
        return ""


def start_client(platform: Platform, fake: Fake, log_path: Path) -> subprocess.Popen:
    """The platform's bare echo client in its own process (this file again), on `fake`,
    its stderr to `log_path`."""
    argv = [sys.executable, __file__, platform.name, "--echo-client", platform.client_url(fake.url)]
    with open(log_path, "w") as stderr:
        return subprocess.Popen(argv, cwd=ROOT, stderr=stderr)


# --- one side --------------------------------------------------------------------------------


@attrs.define
class Injected:
    user: Any  # the platform's ids
    chat: Any
    text: str
    at: float  # the bench's time.monotonic() at the inject call
    id: Any = None  # what the fake answered: the update's, event's or message's id


@attrs.define
class Side:
    name: str
    injected: list[Injected] = attrs.Factory(list)  # every injection, warm-up first, in order
    timed: list[Injected] = attrs.Factory(list)
    late: list[float] = attrs.Factory(list)  # the timed wake-ups after their scheduled times
    latencies: list[float] = attrs.Factory(list)  # inject -> reply recorded, timed messages
    seconds: float = math.nan  # first timed inject -> last timed answer
    answered: int = 0  # timed messages answered (exactly once or not)
    reads: int = 0  # the fake's state read while waiting for answers
    tally: str = ""  # what the timed phase took on the wire (Platform.tally)
    sends: list[dict[str, Any]] = attrs.Factory(list)  # every post, as the fake recorded it
    split: list[tuple[float, float]] = attrs.Factory(list)  # inject -> mark, mark -> reply
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


@attrs.define
class Bench:
    platform: Platform
    rate: float

    def replies_of(self, state: dict[str, Any], side: Side) -> dict[int, list[dict[str, Any]]]:
        """The fake's posts, by the injection they answer (its index in side.injected); a
        post answering no injection is a problem (key -1)."""
        index = self.platform.index(state, side)
        replies: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for post in state["sent"]:
            replies[index.get(self.platform.answers(post), -1)].append(post)
        return replies

    def check(self, side: Side, state: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """Each injection answered exactly once, in its chat, with its text, and the
        platform's own checks; problems noted. The first reply of each injection answered."""
        replies = self.replies_of(state, side)
        firsts = {}
        unanswered, wrong = [], []
        for n, injected in enumerate(side.injected):
            got = replies.get(n, [])
            if not got:
                unanswered.append(n)
                continue
            if len(got) > 1:
                side.problems.append(f"message {n} ({injected.id}) answered {len(got)} times")
            reply = firsts[n] = got[0]
            chat, text = reply[self.platform.chat_field], self.platform.text(reply)
            if chat != injected.chat or text != "You said: " + injected.text:
                wrong.append((n, chat, text))
        if unanswered:
            side.problems.append(f"{len(unanswered)} messages never answered, the first: "
                                 f"{unanswered[:5]}")  # fmt: skip
        if wrong:
            side.problems.append(f"{len(wrong)} replies in another chat or with another text "
                                 f"(message, chat, text): {wrong[:2]!r:.300}")  # fmt: skip
        if replies.get(-1):
            side.problems.append(f"{len(replies[-1])} posts answering no injected message: "
                                 f"{replies[-1][:2]!r:.300}")  # fmt: skip
        if state["refused"]:
            side.problems.append(f"{len(state['refused'])} calls refused by the fake: "
                                 f"{state['refused'][:2]!r:.300}")  # fmt: skip
        if state.get("internal_errors"):
            side.problems.append(f"the fake's internal errors: "
                                 f"{state['internal_errors'][:1]!r:.300}")  # fmt: skip
        self.platform.check(side, state)
        return firsts

    async def until_answered(
        self, http: httpx.AsyncClient, fake: Fake, side: Side, wanted: range, limit: float
    ) -> None:
        """Read the fake's state until each injection in `wanted` has a reply."""
        wait = 0.05
        with trio.move_on_after(limit):
            while True:
                replies = self.replies_of(await fake.state(http), side)
                side.reads += 1
                if all(replies.get(n) for n in wanted):
                    return
                await trio.sleep(wait)
                wait = min(wait * 1.5, 0.5)  # a backlog is not read over and over
        replies = self.replies_of(await fake.state(http), side)
        missing = sum(not replies.get(n) for n in wanted)
        side.problems.append(f"{missing} of {len(wanted)} not answered within {limit:.0f} s")

    async def offer(
        self,
        http: httpx.AsyncClient,
        fake: Fake,
        side: Side,
        texts: list[tuple[Any, Any, str]],
        late: list[float] | None,
    ) -> None:
        """Inject `texts` (user, chat, text) at the rate on absolute times, one at a time,
        in order."""
        start = trio.current_time()
        for n, (user, chat, text) in enumerate(texts):
            due = start + n / self.rate
            await trio.sleep_until(due)
            if late is not None:
                late.append(trio.current_time() - due)
            injected = Injected(user, chat, text, time.monotonic())
            side.injected.append(injected)
            injected.id = await self.platform.inject(http, fake, injected)

    async def run_side(self, side: Side, fake: Fake, pids: list[int]) -> None:
        """Warm up, then the timed phase; measures and checks into `side`."""
        users = [self.platform.who(i) for i in range(1, USERS + 1)]
        warm = [(user, chat, f"m{n} warm up from user {user}")
                for n, (user, chat) in enumerate(users)]  # fmt: skip
        timed = []
        for n in range(self.platform.count):
            user, chat = users[n % USERS]
            timed.append((user, chat, f"m{len(warm) + n} hello from user {user}"))
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            with trio.fail_after(WARM_LIMIT):
                await self.platform.ready(http, fake)
            await self.offer(http, fake, side, warm, None)
            await self.until_answered(http, fake, side, range(len(warm)), WARM_LIMIT)
            if side.problems:
                raise RuntimeError(f"{side.name}: the warm-up failed: {side.problems}")
            before = await fake.state(http)
            side.reads = 0
            side.cpu = CpuWatch(pids)
            await self.offer(http, fake, side, timed, side.late)
            await self.until_answered(http, fake, side, range(len(side.injected)), ANSWER_LIMIT)
            side.cpu.stop()
            await trio.sleep(SETTLE)  # a repeated post (or a redelivery) would land meanwhile
            state = await fake.state(http)

        firsts = self.check(side, state)
        side.timed = side.injected[len(warm) :]
        side.sends = state["sent"]
        side.tally = self.platform.tally(side, before, state)
        marks = self.platform.marks(state, before)
        answers = []
        for n, injected in enumerate(side.timed, start=len(warm)):
            reply = firsts.get(n)
            if reply is None:
                continue
            side.latencies.append(reply["at"] - injected.at)
            answers.append(reply["at"])
            between = [at for at in marks.get(self.platform.mark_key(injected), ())
                       if injected.at <= at <= reply["at"]]  # fmt: skip
            if between:
                side.split.append((between[0] - injected.at, reply["at"] - between[0]))
        side.answered = len(answers)
        if answers:
            side.seconds = max(answers) - side.timed[0].at

    # --- the run -----------------------------------------------------------------------------

    def measure(self) -> tuple[Side, Side, list[str], str, str]:
        """Both sides, each on a fresh fake: the sides, the warnings to print, serve's log,
        and the first line to print (the fakes' addresses)."""
        bare, hermes = Side("bare"), Side("hermes")
        notes: list[str] = []
        with (
            tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp,
            contextlib.ExitStack() as st,
        ):
            fake = Fake(self.platform)
            st.callback(kill, fake.proc)
            bare_url = fake.url
            client_log = Path(tmp) / "echo-client.stderr"
            client = start_client(self.platform, fake, client_log)
            st.callback(kill, client)
            try:
                trio.run(self.run_side, bare, fake, [os.getpid(), fake.proc.pid, client.pid])
            except BaseException:
                print(f"the echo client's stderr:\n{client_log.read_text()[-3000:]}",
                      file=sys.stderr)  # fmt: skip
                raise
            if client.poll() is not None:
                notes.append(f"the echo client exited ({client.returncode}): "
                             f"{client_log.read_text()[-300:]!r}")  # fmt: skip
            kill(client)
            kill(fake.proc)

            fake = Fake(self.platform)
            st.callback(kill, fake.proc)
            serve = Serve(Path(tmp), *self.platform.serve(fake.url), self.platform.gateway)
            st.callback(kill, serve.proc)
            self.platform.serving(fake.url, serve.home)
            try:
                trio.run(self.run_side, hermes, fake, [os.getpid(), fake.proc.pid, serve.proc.pid])
            except BaseException:
                print(f"serve's log:\n{serve.log()[-5000:]}", file=sys.stderr)
                raise
            finally:
                stopped = serve.stop()
                serve_log = serve.log()
                if stopped:
                    notes.append(stopped)
            first = (
                f"fake       {self.platform.fake} in its own process, a fresh one per side "
                f"({bare_url}, {fake.url}); {self.platform.count} messages offered at "
                f"{self.rate:g}/s, round robin over {USERS} users in private chats (each "
                f"writing every {USERS / self.rate:g} s), after a warm-up of one each"
            )
        return bare, hermes, notes, serve_log, first

    def side_lines(self, side: Side, what: str, cpu: str) -> list[str]:
        lines = [
            f"{side.name:<7} {side.rate:6.1f} msgs/s  ({side.answered} of {len(side.timed)} "
            f"answered in {side.seconds:.2f} s)  latency p50 {side.p(50):6.2f} ms  p99 "
            f"{side.p(99):6.2f} ms  max {side.p(100):6.2f} ms  ({what})",
            f"        offered {self.rate:g}/s: achieved {side.offered:.1f}/s, wake-ups late p50 "
            f"{percentile(side.late, 50):.2f} ms, p99 {percentile(side.late, 99):.2f} ms; "
            f"{side.tally}; {side.reads} reads of the fake's state while waiting for the answers",
            f"        cpu per message: {cpu}; other processes {side.cpu.others:.2f} CPUs",
        ]
        if side.split:
            which, before, after = self.platform.split
            parts = []
            for label, values in zip((before, after), zip(*side.split, strict=True), strict=True):
                mean = sum(values) / len(values) * 1000
                parts.append(f"{label} {mean:.2f}/{percentile(values, 50):.2f}/"
                             f"{percentile(values, 99):.2f}")  # fmt: skip
            lines.append(f"        where, mean/p50/p99 ms ({len(side.split)} {which}): "
                         + "; ".join(parts))  # fmt: skip
        lines.extend(f"        PROBLEM: {problem}" for problem in side.problems)
        return lines

    def report(
        self, bare: Side, hermes: Side, notes: list[str], serve_log: str, first: str
    ) -> list[str]:
        """The lines to print, the RESULT line last."""
        title = self.platform.name.title()
        pace = PACES.get(self.platform.name)
        out = [first]
        if pace is not None:
            out.append(f"pace       hermes's outbox posts to {title} at most {pace.per_second:g}/s "
                       f"overall (burst {pace.burst}), {pace.per_chat_per_second:g}/s per chat "
                       f"(burst {pace.chat_burst}) (hermes/delivery/outbox.py PACES); the fake "
                       "enforces no limit, the bare client keeps none")  # fmt: skip
        n = len(bare.timed)
        bench, fake_cpu, client_cpu = bare.cpu.used
        cpu = (f"echo client {per_message(client_cpu, n)}, bench (injector) "
               f"{per_message(bench, n)}, fake {per_message(fake_cpu, n)}")  # fmt: skip
        out += self.side_lines(bare, f"inject -> reply recorded; {self.platform.client}", cpu)
        n = len(hermes.timed)
        bench, fake_cpu, serve_cpu = hermes.cpu.used
        cpu = (f"serve (its writer included) {per_message(serve_cpu, n)} "
               f"({serve_cpu / hermes.seconds:.2f} CPUs), bench (injector) "
               f"{per_message(bench, n)}, fake {per_message(fake_cpu, n)}")  # fmt: skip
        out += self.side_lines(hermes, "inject -> reply recorded; hermes serve, offline model", cpu)
        paced = 0
        if pace is not None:
            lines, paced = pace_lines(pace, hermes.sends, self.platform.chat_field)
            out += lines
        out += serve_log_lines(serve_log)
        out += [
            f"hermes/bare  rate {hermes.rate / bare.rate:.2f} (target >= {TARGET_VS_BARE}), "
            f"hermes p99 {hermes.p(99):.1f} ms (target <= {TARGET_P99_MS:.0f}; bare p99 "
            f"{bare.p(99):.1f} ms; p50 hermes {hermes.p(50):.1f}, bare {bare.p(50):.1f} ms)",
            "        at a fixed offered rate both sides keep up if they can, and the rate ratio "
            "is then about 1 by construction; the latency is the telling figure",
        ]
        if pace is not None and self.rate > pace.per_second:
            out.append(f"WARNING: {self.rate:g}/s offered is above hermes's {title} pace of "
                       f"{pace.per_second:g}/s: hermes answers at its pace, its backlog grows "
                       f"by {self.rate - pace.per_second:g}/s and its latency with it (by "
                       "design, not a stall)")  # fmt: skip
        elif pace is not None and self.rate == pace.per_second:
            out.append(f"NOTE: {self.rate:g}/s offered is at hermes's {title} pace of "
                       f"{pace.per_second:g}/s overall: a burst of late wake-ups or slow turns "
                       "can empty its bucket and hold posts")  # fmt: skip
        if paced:
            out.append(f"WARNING: the pace bound: {paced} of hermes's posts came at their "
                       "earliest allowed time (the pace most likely held them; by design, not "
                       "a stall)")  # fmt: skip
        for side in (bare, hermes):
            if side.cpu.others > BUSY_OTHERS:
                out.append(f"WARNING: other processes took {side.cpu.others:.2f} CPUs during "
                           f"the {side.name} phase: the figures are not this code's "
                           "alone")  # fmt: skip
            if side.offered < 0.95 * self.rate:
                out.append(f"WARNING: {side.name}'s messages went in at {side.offered:.1f}/s, "
                           f"below the {self.rate:g}/s offered: the injector is a "
                           "bottleneck")  # fmt: skip
            if side.problems:
                out.append(f"WARNING: {side.name}: {len(side.problems)} problems (above)")
        out.extend(f"WARNING: {note}" for note in notes)
        serve_ms = serve_cpu / len(hermes.timed) * 1000  # over the timed phase
        bare_ms = client_cpu / len(bare.timed) * 1000
        out.append(f"RESULT vs_bare={hermes.rate / bare.rate:.2f} p99_ms={hermes.p(99):.1f}"
                   f" cpu_ms_per_msg={serve_ms:.2f} bare_cpu_ms_per_msg={bare_ms:.2f}")  # fmt: skip
        return out


# --- figures ---------------------------------------------------------------------------------


def per_message(seconds: float, count: int) -> str:
    return f"{seconds * 1000 / count:.3f} ms"


def held(times: list[float], rate: float, burst: int) -> tuple[int, float]:
    """The posts at `times` replayed through the outbox's cell-rate rule (a send may start
    at its key's theoretical next time less burst - 1 intervals): how many came within
    HELD of their earliest allowed time, and the least margin seen (seconds)."""
    near, least, tat = 0, math.inf, None
    for t in sorted(times):
        if tat is not None:
            margin = t - (tat - (burst - 1) / rate)
            least = min(least, margin)
            near += margin < HELD
        tat = max(tat if tat is not None else t, t) + 1.0 / rate
    return near, least


def pace_lines(pace: Any, sends: list[dict[str, Any]], chat: str) -> tuple[list[str], int]:
    """How close hermes's posts (`sends`, each with `at` and its chat under `chat`) came to
    the platform's pace: the lines to print and how many were probably held."""
    times = [s["at"] for s in sends]
    overall, least = held(times, pace.per_second, pace.burst)
    by_chat: dict[Any, list[float]] = defaultdict(list)
    for s in sends:
        where = s[chat]  # a list of recipients (Signal's) is one chat
        by_chat[tuple(where) if isinstance(where, list) else where].append(s["at"])
    per_chat = [held(v, pace.per_chat_per_second, pace.chat_burst) for v in by_chat.values()]
    chat_near = sum(near for near, _ in per_chat)
    chat_least = min((least for _, least in per_chat), default=math.inf)
    return [
        f"        pace: of {len(times)} posts (warm-up included), {overall} came within "
        f"{HELD * 1000:.0f} ms of the overall pace's limit (least margin {least * 1000:.1f} ms), "
        f"{chat_near} of a chat's (least margin {chat_least * 1000:.1f} ms)"
    ], overall + chat_near


def serve_log_lines(serve_log: str) -> list[str]:
    """How much serve logged, and each warning or error it logged."""
    lines = serve_log.splitlines()
    logged = Counter(level for line in lines for level in LEVELS if f" {level} " in line)
    return [
        f"        serve logged {len(lines)} lines"
        + "".join(f", {count} {level}" for level, count in logged.items()),
        *(f"        serve: {line[:300]}" for line in lines
          if any(f" {level} " in line for level in LEVELS)),
    ]  # fmt: skip


# --- the command -----------------------------------------------------------------------------


def platforms() -> list[str]:
    return sorted(p.stem.removeprefix("chat_") for p in Path(__file__).parent.glob("chat_*.py"))


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python bench/chat.py",
        description="hermes serve against a bare echo client on a chat platform's fake",
    )
    parser.add_argument("platform", choices=platforms())
    parser.add_argument("--rate", type=float, help="messages offered per second "
                        "(default: the platform's; telegram 25, slack and discord 50, "
                        "whatsapp 5, matrix 8, signal 4)")  # fmt: skip
    parser.add_argument("--echo-client", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    platform: Platform = importlib.import_module(f"chat_{args.platform}").PLATFORM
    if args.echo_client:
        trio.run(platform.echo_client, args.echo_client)
        return
    bench = Bench(platform, args.rate or platform.rate)
    for line in bench.report(*bench.measure()):
        print(line)


if __name__ == "__main__":
    import chat  # this file again, as the module the platform files import from

    chat.main()
