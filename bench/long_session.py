"""Long conversations: turn time and retained memory at 10 and 5,000 messages of
history, and serve's memory slope under a steady mixed load.

Run: python bench/long_session.py [--minutes 3]   (from the repository root)
- In this process, with the built-in offline model (its 8,000-token window) and
  a real state.db: one session grown to 5,000 messages, every tenth message a
  terminal command printing about 100 KB. The median time of a turn (20 turns)
  is measured at 10 messages of history and again at 5,000, and the session's
  retained conversation (what a session actor holds) at 5,000.
- A real `hermes serve` on a fresh home (offline model): 50 messages/s across
  100 sessions on an open-loop schedule, every tenth message a command
  printing about 100 KB, for --minutes; serve's RSS sampled every 5 s; the
  slope is fitted (least squares) to the samples after the first minute.
Last line: RESULT turn_growth=<t5000/t10> session_kb_at_5000=<x> rss_slope_mb_per_hour=<y>
Targets: turn_growth <= 1.5, session_kb_at_5000 <= 2 x the budget in bytes,
rss_slope_mb_per_hour <= 20.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
TIMED_TURNS = 20
RATE = 50.0
SESSIONS = 100
SAMPLE_EVERY = 5.0


def message(n: int) -> str:
    return BIG if n % 10 == 9 else f"message {n}: how is the weather going to be tomorrow?"


async def timed(agent: Agent, ctx: ToolContext, conversation, start: int):
    times = []
    for n in range(start, start + TIMED_TURNS):
        began = time.perf_counter()
        conversation = (await agent.run_turn(ctx, f"timed turn {n}", stream=False,
                                             conversation=conversation)).conversation  # fmt: skip
        times.append(time.perf_counter() - began)
    return statistics.median(times), conversation


async def one_session(root: Path) -> tuple[float, float, int]:
    """Median turn time at 10 and at 5,000 messages; the conversation's size at 5,000."""
    registry = Registry()
    agent = Agent(ProviderChain([OfflineProvider()]), default_tools())
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, root / "state.db") as db:
            ctx = ToolContext("long", db, TerminalSession(root, state_dir=root / ".t"),
                              Memory(MemoryStore(root / "memories")),
                              Caller("local", "", "owner"))  # fmt: skip
            conversation = None
            n = 0
            while len(await db.read(messages_of, "long", 20)) < 10:
                conversation = (
                    await agent.run_turn(ctx, message(n), stream=False, conversation=conversation)
                ).conversation
                n += 1
            at_10, conversation = await timed(agent, ctx, conversation, 0)
            while True:
                for _ in range(100):
                    conversation = (
                        await agent.run_turn(
                            ctx, message(n), stream=False, conversation=conversation
                        )
                    ).conversation
                    n += 1
                count = await db.read(lambda c: c.execute("SELECT count(*) FROM messages").get)
                print(f"  history: {count} messages", file=sys.stderr)
                if count >= 5000:
                    break
            at_5000, conversation = await timed(agent, ctx, conversation, 10_000)
            size = conversation.chars()
        registry.request_drain(trio.current_time() + 10)
    return at_10, at_5000, size


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


async def load(url: str, auth, seconds: float, pid: int) -> list[tuple[float, float]]:
    samples: list[tuple[float, float]] = []
    ids = itertools.count(1)
    sessions: dict[int, str] = {}
    async with open_websocket_url(url, extra_headers=auth, max_message_size=2**24) as ws:
        waiting: dict[int, trio.Event] = {}

        async def reader() -> None:
            while True:
                msg = json.loads(await ws.get_message())
                if "id" in msg and msg["id"] in waiting:
                    waiting.pop(msg["id"]).set()

        async def send(i: int) -> None:
            request = next(ids)
            done = waiting[request] = trio.Event()
            params = {"text": message(i)}
            if sessions.get(i % SESSIONS):
                params["session"] = sessions[i % SESSIONS]
            else:
                sessions[i % SESSIONS] = f"bench_{i % SESSIONS}"
                params["session"] = sessions[i % SESSIONS]
            await ws.send_message(
                json.dumps(
                    {"jsonrpc": "2.0", "id": request, "method": "chat.send", "params": params}
                )
            )
            await done.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
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
                nursery.start_soon(send, i)
            samples.append((trio.current_time() - t0, rss_mb(pid)))
            nursery.cancel_scope.cancel()
    return samples


def serve_slope(root: Path, minutes: float) -> tuple[float, float, float, list[float]]:
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
        samples = trio.run(load, f"ws://127.0.0.1:{port}/", auth, minutes * 60, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    after = [(t, m) for t, m in samples if t >= 60]
    by_minute = [m for t, m in samples if t % 60 < SAMPLE_EVERY]
    return samples[0][1], samples[-1][1], slope_per_hour(after), by_minute


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
        start, end, slope, by_minute = serve_slope(root, args.minutes)
        print(
            f"serve RSS under {RATE:g} msg/s over {SESSIONS} sessions for {args.minutes:g} min: "
            f"{start:.1f} -> {end:.1f} MB, slope {slope:.1f} MB/h after the first minute"
        )
        print("serve RSS at each minute (MB): " + " ".join(f"{m:.1f}" for m in by_minute))
    print(
        f"RESULT turn_growth={t5000 / t10:.2f} session_kb_at_5000={size / 1024:.1f} "
        f"rss_slope_mb_per_hour={slope:.1f}"
    )


if __name__ == "__main__":
    main()
