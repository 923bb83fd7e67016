"""Soak: `hermes serve` under a steady mixed load for minutes; does its memory keep growing?

Run: python bench/soak.py [--minutes 10]   (from the repository root; not part of the tests)
- The model: tests/fakes/openai.py's fake in its own process (this file, run with
  --fake-model), answering every request after 50 ms. A chat or cron message that
  carries the tool marker gets a terminal tool call first, a command printing
  200 KB, and its answer once the tool's result comes back.
- A real `hermes serve` on a fresh HERMES_HOME uses it. Offered load, open loop
  (message i goes out at t0 + i/RATE whatever became of the earlier ones): 4
  chat.send a second, round robin over 200 sessions on 20 WebSocket connections,
  every 10th message a tool call with the large output; 3 cron jobs `every 5s`
  (added with cron.add at the start; one of them calls the tool too), their
  briefs delivered back to the endpoint. Every answer is checked (and each
  terminal result streamed back, exit code 0); a call without its answer within
  60 s is a failure. A fresh connection per sample asks
  cron.list (fires) and status (live session actors).
- The model's window is 8,000 tokens (the offline model's), so one large tool
  output fills a session's conversation to its budget; each session's first
  message calls the tool, so the first minute (left out of the slope) fills all
  200 and what is fitted is what keeps growing, not conversations growing to
  their bound (with a 128k window, 200 sessions legitimately take ~80 MB).
- Serve's own resident memory (its main process; its child processes, the
  commands it runs, are shown apart) every 10 s. The slope is a least-squares
  fit of MB against hours over the samples after the first minute; the fit over
  the last half alone is shown beside it (a leak keeps its slope, memory still
  settling flattens).
- The baseline, in the same run: a second serve on its own fresh home, the same
  config, with no load at all, sampled at the same moments and fitted over the
  same window. The load generator's own slope is shown too.
Last line: RESULT rss_start_mb=<a> rss_end_mb=<b> slope_mb_per_hour=<c>
Target: slope_mb_per_hour <= 5 after the first minute.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import psutil
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import CpuWatch, kill, percentile, start_child  # noqa: E402
from long_session import slope_per_hour  # noqa: E402
from serve import Serve  # noqa: E402

from tests.fakes.openai import FakeOpenAI, text_answer, tool_answer  # noqa: E402

FAKE_DELAY = 0.05  # seconds before the fake model answers
REPLY = "soak reply from the fake model"
MARKER = "SOAK-TOOL"  # a user message carrying it gets the terminal call first
BIG_COMMAND = "head -c 200000 /dev/zero | tr '\\0' x"  # prints 200 KB
RATE = 4.0  # chat messages per second, offered
SESSIONS = 200
CONNECTIONS = 20
TOOL_EVERY = 10  # every 10th chat message calls the tool (and each session's first)
CONTEXT_TOKENS = 8000  # the model's window: each session's conversation is full in a minute
CRON_JOBS = 3
CRON_EVERY = "every 5s"
SAMPLE_EVERY = 10.0  # seconds
WARMUP = 60.0  # seconds left out of the slope
ANSWER_TIMEOUT = 60.0
LOOK_TIMEOUT = 10.0  # for cron.list and status at a sample
TARGET = 5.0  # MB per hour
BUSY_OTHERS = 0.5  # CPUs taken by other processes worth a warning
KEPT_REASONS = 5


# --- the fake model, in its own process --------------------------------------------------------


class SoakModel(FakeOpenAI):
    """The fake's default answer, except for a request whose last message is the user's
    and carries MARKER: that one gets the terminal call (its follow-up ends with the
    tool's result, so it gets the answer)."""

    def _triggered(self, text: str, body: Any) -> Any:
        messages = body.get("messages") if isinstance(body, dict) else None
        last = messages[-1] if messages else {}
        content = last.get("content") if isinstance(last, dict) else None
        if last.get("role") == "user" and isinstance(content, str) and MARKER in content[:200]:
            return tool_answer(("terminal", {"command": BIG_COMMAND}))
        return None


def fake_model() -> None:
    with SoakModel(delay=FAKE_DELAY) as fake:
        fake.default = text_answer(REPLY)
        for record in ("requests", "prompt_sizes", "prompt_tokens"):  # a soak's worth piles up
            setattr(fake, record, collections.deque(maxlen=100))
        print(fake.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            fake.thread.join()


# --- the endpoint ------------------------------------------------------------------------------


class Link:
    """One WebSocket to the endpoint, many calls in flight; replies matched by id,
    notifications handed to `on_note`."""

    def __init__(self, ws, on_note=lambda msg: None) -> None:
        self.ws = ws
        self.on_note = on_note
        self.ids = itertools.count(1)
        self.waiting: dict[int, list[Any]] = {}  # id -> [event, reply]

    async def read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                msg = json.loads(await self.ws.get_message())
                slot = self.waiting.pop(msg.get("id"), None)
                if slot is not None:
                    slot[1] = msg
                    slot[0].set()
                elif "method" in msg:
                    self.on_note(msg)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The reply (a result or an error); raises ConnectionClosed."""
        request_id = next(self.ids)
        slot: list[Any] = [trio.Event(), None]
        self.waiting[request_id] = slot
        try:
            await self.ws.send_message(json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            ))  # fmt: skip
            await slot[0].wait()
        finally:
            self.waiting.pop(request_id, None)
        return slot[1]


@contextlib.asynccontextmanager
async def linked(serve: Serve, on_note=lambda msg: None):
    async with open_websocket_url(serve.url, extra_headers=serve.auth, connect_timeout=10,
                                  max_message_size=2**24) as ws:  # fmt: skip
        link = Link(ws, on_note)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.read)
            yield link
            nursery.cancel_scope.cancel()


# --- the load ----------------------------------------------------------------------------------


@attrs.define
class Tally:
    sent: int = 0
    answered: int = 0
    failed: int = 0
    tool_turns: int = 0  # answered turns whose message asked for the tool
    tool_results: int = 0  # terminal results streamed back (turn.event tool_result)
    tool_failures: int = 0  # ... whose exit code was not 0
    briefs: int = 0  # cron briefs delivered back to the endpoint
    brief_failures: int = 0  # briefs that say the fire failed
    fires: int = 0  # cron fires claimed (cron.list: the jobs' fences)
    fire_errors: int = 0  # jobs whose last fire failed, at the last look
    latencies: list[float] = attrs.Factory(list)
    lags: list[float] = attrs.Factory(list)
    reasons: list[str] = attrs.Factory(list)

    def fail(self, why: str) -> None:
        self.failed += 1
        if len(self.reasons) < KEPT_REASONS:
            self.reasons.append(why[:300])

    def errors(self) -> int:
        return self.failed + self.brief_failures + self.fire_errors + self.tool_failures

    def note(self, msg: dict[str, Any]) -> None:
        params = msg.get("params") or {}
        if msg.get("method") == "turn.event" and params.get("kind") == "tool_result":
            self.tool_results += 1
            if not params.get("text", "").startswith('{"exit_code": 0,'):
                self.tool_failures += 1
                if len(self.reasons) < KEPT_REASONS:
                    self.reasons.append(f"tool result: {params.get('text')!r:.300}")
        if msg.get("method") == "chat.message" and params.get("kind") == "cron":
            self.briefs += 1
            if params.get("text") != REPLY:
                self.brief_failures += 1
                if len(self.reasons) < KEPT_REASONS:
                    self.reasons.append(f"cron brief: {params.get('text')!r:.300}")


@attrs.frozen
class Sample:
    t: float  # seconds since the load began
    serve: float  # MB, serve's own process
    children: float  # MB, serve's children together
    processes: int  # serve's children
    idle: float  # MB, the idle serve's own process
    bench: float  # MB, this process


def own_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def children_mb(pid: int) -> tuple[float, int]:
    total, count = 0, 0
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += child.memory_info().rss
            count += 1
    return total / 2**20, count


def live_sessions(node: dict[str, Any]) -> int:
    """The router's live session actors, from the status tree."""
    if "sessions" in (node.get("detail") or {}):
        return node["detail"]["sessions"]
    return max((live_sessions(child) for child in node.get("children") or ()), default=0)


async def chat_load(links: list[Link], tally: Tally, t0: float, seconds: float) -> None:
    async def one(i: int, at: float) -> None:
        k = i % SESSIONS
        # every session's first message, then every 10th, shifted by one session a round
        tool = i < SESSIONS or (i + i // SESSIONS) % TOOL_EVERY == 0
        text = f"{MARKER} message {i}" if tool else f"message {i}: what's new in session {k}?"
        start = trio.current_time()
        tally.lags.append(start - at)
        tally.sent += 1
        reply = None
        with trio.move_on_after(ANSWER_TIMEOUT):
            try:
                reply = await links[k % CONNECTIONS].call(
                    "chat.send", {"text": text, "session": f"soak_{k}"}
                )
            except ConnectionClosed as exc:
                tally.fail(f"message {i}: the connection closed: {exc}")
                return
        if reply is None:
            tally.fail(f"message {i}: no answer within {ANSWER_TIMEOUT:g} s")
            return
        result = reply.get("result") or {}
        if result.get("status") != "done" or result.get("text") != REPLY:
            tally.fail(f"message {i}: {reply!r}")
            return
        tally.answered += 1
        tally.tool_turns += tool
        tally.latencies.append(trio.current_time() - start)

    async with trio.open_nursery() as nursery:
        for i in itertools.count():
            at = t0 + i / RATE
            if at - t0 >= seconds:
                break
            await trio.sleep_until(at)
            nursery.start_soon(one, i, at)


async def look(serve: Serve, tally: Tally) -> str:
    """Cron fires and failures (cron.list), live session actors (status), on a fresh
    connection; "?" when serve did not answer within LOOK_TIMEOUT."""
    with trio.move_on_after(LOOK_TIMEOUT):
        async with linked(serve) as link:
            jobs = (await link.call("cron.list", {})).get("result") or []
            status = (await link.call("status", {})).get("result") or {}
        tally.fires = sum(job["fence"] for job in jobs)
        tally.fire_errors = sum(job["last_status"] == "error" for job in jobs)
        return str(live_sessions(status))
    return "?"


def measure(serve: Serve, idle: Serve, t: float) -> Sample:
    for proc in (serve, idle):
        if proc.proc.poll() is not None:
            tail = proc.stderr_path.read_text(errors="replace")[-1500:]
            raise SystemExit(f"{proc.home.name} serve exited ({proc.proc.returncode}) at "
                             f"t={t:.0f}s:\n{tail}")  # fmt: skip
    child_mb, processes = children_mb(serve.proc.pid)
    return Sample(t, own_mb(serve.proc.pid), child_mb, processes, own_mb(idle.proc.pid),
                  own_mb(os.getpid()))  # fmt: skip


async def soak(serve: Serve, idle: Serve, seconds: float, cpu_pids: list[int]):
    tally = Tally()
    samples: list[Sample] = []
    async with contextlib.AsyncExitStack() as stack:
        links = [
            await stack.enter_async_context(linked(serve, tally.note)) for _ in range(CONNECTIONS)
        ]
        cron = await stack.enter_async_context(linked(serve, tally.note))  # follows the briefs
        for j in range(CRON_JOBS):
            prompt = f"{MARKER} cron job {j}" if j == 0 else f"cron job {j}: anything new?"
            params = {"schedule": CRON_EVERY, "prompt": prompt, "name": f"soak-{j}",
                      "session": f"soak_cron_{j}"}  # fmt: skip
            added = await cron.call("cron.add", params)
            if "result" not in added:
                raise SystemExit(f"cron.add failed: {added!r}")
        cpu = CpuWatch(cpu_pids)
        t0 = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(chat_load, links, tally, t0, seconds)
            for n in itertools.count():
                at = t0 + n * SAMPLE_EVERY
                if at - t0 > seconds + 1e-9:
                    break
                await trio.sleep_until(at)
                sample = measure(serve, idle, trio.current_time() - t0)
                samples.append(sample)
                sessions = await look(serve, tally)
                in_flight = tally.sent - tally.answered - tally.failed
                print(f"t={sample.t:5.0f}s  rss {sample.serve:6.1f} MB (children "
                      f"{sample.processes}: {sample.children:5.1f} MB; idle serve "
                      f"{sample.idle:5.1f} MB)  "
                      f"answered {tally.answered}/{tally.sent} ({in_flight} in flight)  "
                      f"cron fires {tally.fires} briefs {tally.briefs}  sessions {sessions}  "
                      f"errors {tally.errors()}", flush=True)  # fmt: skip
        cpu.stop()
        await look(serve, tally)
    return tally, samples, cpu


# --- the run -----------------------------------------------------------------------------------


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def fitted(samples: list[Sample], field: str) -> float:
    return slope_per_hour([(s.t, getattr(s, field)) for s in samples if s.t >= WARMUP])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="the load's length")
    parser.add_argument("--fake-model", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fake_model:
        return fake_model()
    seconds = args.minutes * 60
    if seconds < WARMUP + 2 * SAMPLE_EVERY:
        raise SystemExit(f"--minutes: at least {(WARMUP + 2 * SAMPLE_EVERY) / 60:g}")
    with tempfile.TemporaryDirectory(prefix="hermes-soak-") as tmp_name:
        tmp = Path(tmp_name)
        with contextlib.ExitStack() as stack:
            fake, base_url = start_child([sys.executable, __file__, "--fake-model"])
            stack.callback(kill, fake)
            config = (
                f"model: {{provider: fake, model: m, base_url: {json.dumps(base_url)}, "
                f"context_tokens: {CONTEXT_TOKENS}}}\n"
                "gateway: {local: {port: 0}}\nops: {port: 0}\n"
            )
            serve = Serve(tmp, "soak", config)
            stack.callback(serve.stop)
            idle = Serve(tmp, "idle", config)
            stack.callback(idle.stop)
            print(f"fake model at {base_url} (its own process); serve pid {serve.proc.pid}, "
                  f"idle serve pid {idle.proc.pid}; {args.minutes:g} min", flush=True)  # fmt: skip
            pids = [os.getpid(), fake.pid, serve.proc.pid]
            try:
                tally, samples, cpu = trio.run(soak, serve, idle, seconds, pids)
            except BaseException as exc:  # Ctrl-C or a serve gone: a line, not a group's tree
                found = leaves(exc)
                if any(isinstance(e, KeyboardInterrupt) for e in found):
                    raise SystemExit("interrupted; serve and the fake are stopped") from None
                exits = [e for e in found if isinstance(e, SystemExit)]
                if exits:
                    raise exits[0] from None
                raise
    report(args.minutes, tally, samples, cpu)


def report(minutes: float, tally: Tally, samples: list[Sample], cpu: CpuWatch) -> None:
    first, last = samples[0], samples[-1]
    at_warmup = next(s for s in samples if s.t >= WARMUP)
    slope, idle_slope, bench_slope = (fitted(samples, f) for f in ("serve", "idle", "bench"))
    half = last.t / 2
    late_slope = slope_per_hour([(s.t, s.serve) for s in samples if s.t >= half])
    fits = sum(s.t >= WARMUP for s in samples)
    busiest = max(samples, key=lambda s: s.processes)
    print(f"load        {RATE:g} chat.send/s offered over {SESSIONS} sessions on {CONNECTIONS} "
          f"connections for {minutes:g} min, every {TOOL_EVERY}th a terminal call printing "
          f"200 KB; {CRON_JOBS} cron jobs '{CRON_EVERY}' (one calls the tool)")  # fmt: skip
    lat = tally.latencies or [0.0]
    print(f"answered    {tally.answered}/{tally.sent} ({tally.tool_turns} with the tool call; "
          f"{tally.tool_results} terminal results streamed, {tally.tool_failures} failed), "
          f"failed {tally.failed}; latency p50 {percentile(lat, 50):.1f} ms, p99 "
          f"{percentile(lat, 99):.1f} ms, max {percentile(lat, 100):.1f} ms; send lag p99 "
          f"{percentile(tally.lags or [0.0], 99):.1f} ms")  # fmt: skip
    print(f"cron        {tally.fires} fires claimed, {tally.briefs} briefs delivered "
          f"({tally.brief_failures} saying the fire failed); jobs whose last fire failed: "
          f"{tally.fire_errors}")  # fmt: skip
    print(f"serve RSS   {first.serve:.1f} MB at the start, {at_warmup.serve:.1f} MB at "
          f"{at_warmup.t:.0f} s, {last.serve:.1f} MB at the end: slope {slope:+.2f} MB/h over "
          f"the {fits} samples after the first minute, {late_slope:+.2f} MB/h over the last half "
          f"(serve's own process)")  # fmt: skip
    print(f"children    at most {busiest.processes} processes at a sample ({busiest.children:.1f} "
          f"MB), {last.processes} at the end (not in the figure)")  # fmt: skip
    print(f"baseline (idle serve, same run, same window): {first.idle:.1f} -> {last.idle:.1f} "
          f"MB, slope {idle_slope:+.2f} MB/h; hermes under load: {slope:+.2f} MB/h")  # fmt: skip
    print(f"load generator (this process): {first.bench:.1f} -> {last.bench:.1f} MB, slope "
          f"{bench_slope:+.2f} MB/h")  # fmt: skip
    by_minute = [s.serve for s in samples if s.t % 60 < SAMPLE_EVERY / 2]
    print("serve RSS at each minute (MB): " + " ".join(f"{m:.1f}" for m in by_minute))
    bench_s, fake_s, serve_s = cpu.used
    span = last.t or 1.0
    print(f"cpu         serve {serve_s:.1f} s ({serve_s / span:.2f} CPUs, its children "
          f"included), fake {fake_s:.1f} s, load generator {bench_s:.1f} s; other processes "
          f"{cpu.others:.2f} CPUs")  # fmt: skip
    if tally.reasons:
        print("first failures:\n  " + "\n  ".join(tally.reasons))
    if tally.errors():
        print(f"WARNING: {tally.errors()} errors: the load was not all served")
    if cpu.others > BUSY_OTHERS:
        print(f"WARNING: other processes took {cpu.others:.2f} CPUs: the machine was not quiet")
    if slope > TARGET >= late_slope:
        print(f"note: over the last half the slope is within the target ({late_slope:+.2f} MB/h): "
              f"serve's memory may still be settling rather than leaking; a longer run "
              f"(--minutes 25) tells them apart")  # fmt: skip
    print(f"target      slope <= {TARGET:g} MB/h after the first minute: "
          f"{'met' if slope <= TARGET else 'NOT met'}")  # fmt: skip
    print(f"RESULT rss_start_mb={first.serve:.1f} rss_end_mb={last.serve:.1f} "
          f"slope_mb_per_hour={slope:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
