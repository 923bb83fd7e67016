"""Long conversations: turn time and retained memory at 10 and 5,000 messages of
history, and serve's memory slope under a steady mixed load once every session is
at its context budget.

Run: python bench/long_session.py [--minutes 3]   (from the repository root)
- In this process, with the built-in offline model (its 8,000-token window) and
  a real state.db: one session grown to 5,000 messages, every tenth message a
  terminal command printing about 100 KB, and a second grown to 10. The median
  time of a turn (50 turns each, one on each session in turn, so the machine's
  noise falls on both alike: a turn is well under a millisecond) with 10 messages
  of history and with 5,000, and the long session's retained conversation (what a
  session actor holds).
- A real `hermes serve` on a fresh home (offline model), 100 sessions over its
  local endpoint, in two steps:
  - prefill: each session is sent its messages one after another (all sessions
    at once, as fast as serve answers) until state.db holds a compaction record
    for it: its conversation has reached the budget, and from then on it is
    compacted back whenever it reaches it again. The sessions whose number ends in
    9 get only the terminal command, the others only short messages (the load's
    mix: message n is the command when n % 10 == 9, and n goes round the
    sessions), so a short-message session needs about 200 turns to get there.
  - the window: 50 messages/s across the same sessions on an open-loop schedule
    for --minutes, serve's RSS (with its children) sampled every 5 s; the slope is
    fitted (least squares) to all the window's samples. Every session is bounded
    before the window starts, so the target means "no growth once bounded"; what
    the sessions grew by during the prefill is printed, not fitted.
Last line: RESULT turn_growth=<t5000/t10> session_kb_at_5000=<x> rss_slope_mb_per_hour=<y>
Targets: turn_growth <= 1.5, session_kb_at_5000 <= 2 x the budget in bytes,
rss_slope_mb_per_hour <= 20 (after the prefill).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import psutil
import trio
from trio_websocket import open_websocket_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.agent.chain import ProviderChain  # noqa: E402
from hermes.agent.loop import Agent  # noqa: E402
from hermes.agent.memory import Memory, MemoryStore  # noqa: E402
from hermes.agent.offline import OFFLINE_CONTEXT, OfflineProvider, tool_line  # noqa: E402
from hermes.agent.permissions import Caller  # noqa: E402
from hermes.agent.tools.base import ToolContext  # noqa: E402
from hermes.agent.tools.catalog import default_tools  # noqa: E402
from hermes.state.db import Db  # noqa: E402
from hermes.state.messages import messages_of  # noqa: E402
from hermes.state.registry import Registry  # noqa: E402
from hermes.terminal.session import TerminalSession  # noqa: E402

BIG = tool_line("terminal", command="head -c 100000 /dev/zero | tr '\\0' x")
TIMED_TURNS = 50
RATE = 50.0
SESSIONS = 100
SAMPLE_EVERY = 5.0
PREFILL_LIMIT = 900.0  # seconds for every session to reach its budget
WATCH_EVERY = 1.0  # how often the prefill looks for new compaction records


def message(n: int) -> str:
    return BIG if n % 10 == 9 else f"message {n}: how is the weather going to be tomorrow?"


async def grown(agent: Agent, ctx: ToolContext, count: int) -> Any:
    """`ctx`'s session grown by turns (the load's mix) until state.db holds `count` of
    its messages; its conversation as the session actor would keep it."""
    conversation, n = None, 0
    while True:
        for _ in range(1 if count <= 100 else 100):
            conversation = (
                await agent.run_turn(ctx, message(n), stream=False, conversation=conversation)
            ).conversation
            n += 1
        have = len(await ctx.db.read(messages_of, ctx.session_id, count))
        if count > 100:
            print(f"  history: {have} messages", file=sys.stderr)
        if have >= count:
            return conversation


async def one_session(root: Path) -> tuple[float, float, int]:
    """Median turn time with 10 and with 5,000 messages of history (two sessions in one
    state.db, timed turn about, so the machine's noise falls on both alike); the long
    conversation's size."""
    registry = Registry()
    agent = Agent(ProviderChain([OfflineProvider()]), default_tools())
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, root / "state.db") as db:

            def context(session_id: str) -> ToolContext:
                return ToolContext(session_id, db,
                                   TerminalSession(root, state_dir=root / f".t-{session_id}"),
                                   Memory(MemoryStore(root / "memories")),
                                   Caller("local", "", "owner"))  # fmt: skip

            long, short = context("long"), context("short")
            kept = {"long": await grown(agent, long, 5000), "short": await grown(agent, short, 10)}
            times: dict[str, list[float]] = {"long": [], "short": []}
            for n in range(TIMED_TURNS):
                for ctx in (short, long):
                    began = time.perf_counter()
                    kept[ctx.session_id] = (await agent.run_turn(
                        ctx, f"timed turn {n}", stream=False, conversation=kept[ctx.session_id]
                    )).conversation  # fmt: skip
                    times[ctx.session_id].append(time.perf_counter() - began)
            size = kept["long"].chars()
        registry.request_drain(trio.current_time() + 10)
    return statistics.median(times["short"]), statistics.median(times["long"]), size


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    xs, ys = [t for t, _ in samples], [m for _, m in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return (
        0.0
        if var == 0
        else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var * 3600
    )


def rss_mb(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


class Chat:
    """The bench's side of one WebSocket to serve: `ask` sends a message to a session
    and returns when its call is answered."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, trio.Event] = {}

    async def read(self) -> None:
        while True:
            msg = json.loads(await self.ws.get_message())
            if "id" in msg and msg["id"] in self.waiting:
                self.waiting.pop(msg["id"]).set()

    async def ask(self, session: int, text: str) -> None:
        request = next(self.ids)
        done = self.waiting[request] = trio.Event()
        params = {"text": text, "session": f"bench_{session}"}
        await self.ws.send_message(
            json.dumps({"jsonrpc": "2.0", "id": request, "method": "chat.send", "params": params})
        )
        await done.wait()


def compacted(state_db: Path) -> set[str]:
    """The sessions state.db holds a compaction record for (read-only, beside serve)."""
    conn = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True, timeout=10)
    try:
        return {row[0] for row in conn.execute("SELECT DISTINCT session_id FROM compactions")}
    except sqlite3.OperationalError:  # no table yet: serve has not migrated it
        return set()
    finally:
        conn.close()


async def prefill(chat: Chat, state_db: Path) -> list[int]:
    """Send each session its messages one after another until it has been compacted;
    how many each was sent."""
    done: set[str] = set()
    sent = [0] * SESSIONS

    async def grow(s: int) -> None:
        while f"bench_{s}" not in done:
            await chat.ask(s, message(s + SESSIONS * sent[s]))
            sent[s] += 1

    async def watch() -> None:
        while len(done) < SESSIONS:
            await trio.sleep(WATCH_EVERY)
            done.update(await trio.to_thread.run_sync(compacted, state_db))

    with trio.fail_after(PREFILL_LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            for s in range(SESSIONS):
                nursery.start_soon(grow, s)
    return sent


async def load(
    url: str, auth, seconds: float, pid: int, state_db: Path
) -> tuple[list[int], float, list[tuple[float, float]]]:
    """The prefill (its messages per session and seconds), then the window's RSS samples."""
    samples: list[tuple[float, float]] = []
    async with open_websocket_url(url, extra_headers=auth, max_message_size=2**24) as ws:
        chat = Chat(ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(chat.read)
            began = trio.current_time()
            sent = await prefill(chat, state_db)
            filled = trio.current_time() - began
            first = SESSIONS * max(sent)  # the load goes on with the same mix
            t0 = trio.current_time()
            next_sample = t0
            for i in itertools.count():
                at = t0 + i / RATE
                if at - t0 >= seconds:
                    break
                if at >= next_sample:
                    samples.append((at - t0, rss_mb(pid)))
                    next_sample += SAMPLE_EVERY
                await trio.sleep_until(at)
                nursery.start_soon(chat.ask, i % SESSIONS, message(first + i))
            samples.append((trio.current_time() - t0, rss_mb(pid)))
            nursery.cancel_scope.cancel()
    return sent, filled, samples


@attrs.frozen
class Slope:
    started_mb: float  # serve's RSS before the prefill
    sent: list[int]  # prefill messages per session
    filled: float  # seconds the prefill took
    samples: list[tuple[float, float]]  # (seconds into the window, RSS MB)
    per_hour: float  # fitted over the window
    by_minute: list[float]


def serve_slope(root: Path, minutes: float) -> Slope:
    home = root / "home"
    home.mkdir()
    (home / "config.yaml").write_text("gateway:\n  local:\n    port: 0\nops:\n  port: 0\n")
    env = {**os.environ, "HERMES_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "hermes.cli.main", "serve"], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)  # fmt: skip
    try:
        port = int(proc.stdout.readline().split("port=")[1])
        token = (home / "serve.token").read_text().strip()
        auth = [(b"authorization", f"Bearer {token}".encode())]
        started = rss_mb(proc.pid)
        sent, filled, samples = trio.run(
            load, f"ws://127.0.0.1:{port}/", auth, minutes * 60, proc.pid, home / "state.db"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    by_minute = [m for t, m in samples if t % 60 < SAMPLE_EVERY]
    return Slope(started, sent, filled, samples, slope_per_hour(samples), by_minute)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t10, t5000, size = trio.run(one_session, root)
        budget_bytes = int(OFFLINE_CONTEXT * 0.75 * 4)
        print(f"turn at 10 messages    {t10 * 1000:7.2f} ms (median of {TIMED_TURNS})")
        print(f"turn at 5,000 messages {t5000 * 1000:7.2f} ms (median of {TIMED_TURNS})")
        print(
            f"retained conversation at 5,000: {size / 1024:.1f} KB "
            f"(budget {budget_bytes / 1024:.1f} KB: 75% of {OFFLINE_CONTEXT} tokens x 4 bytes)"
        )
        slope = serve_slope(root, args.minutes)
        start, end = slope.samples[0][1], slope.samples[-1][1]
        print(
            f"prefill: {sum(slope.sent)} messages in {slope.filled:.0f} s until each of the "
            f"{SESSIONS} sessions was compacted once (per session {min(slope.sent)} to "
            f"{max(slope.sent)}); serve RSS {slope.started_mb:.1f} -> {start:.1f} MB"
        )
        print(
            f"serve RSS under {RATE:g} msg/s over {SESSIONS} sessions for {args.minutes:g} min "
            f"after the prefill: {start:.1f} -> {end:.1f} MB, slope {slope.per_hour:.1f} MB/h "
            f"(target <= 20)"
        )
        print("serve RSS at each minute (MB): " + " ".join(f"{m:.1f}" for m in slope.by_minute))
    print(
        f"RESULT turn_growth={t5000 / t10:.2f} session_kb_at_5000={size / 1024:.1f} "
        f"rss_slope_mb_per_hour={slope.per_hour:.1f}"
    )


if __name__ == "__main__":
    main()
