"""What a user of `hermes serve` feels: the latency it adds to a model's answer, and its memory.

Run: python bench/serve.py   (from the repository root; takes under a minute)
- A fake OpenAI-compatible model runs in its own process (tests/fakes/openai.py):
  it streams a few words after 100 ms. A real `hermes serve` subprocess on a
  fresh HERMES_HOME uses it as its model.
- 1,000 sessions are opened over the local endpoint (one message each, over 50
  WebSocket connections with calls in flight on each), then serve's resident
  memory is read, its children (the state.db writer) included.
- Timed: 100 messages/s for 10 s on an open-loop schedule (message i is sent
  at t0 + i/100 whatever happened to the earlier ones), round robin over the
  1,000 sessions; latency is chat.send sent -> its reply received, the turn's
  streamed events in between.
- The baseline, in the same run at the same offered rate: the same number of
  streaming requests sent straight to the fake with httpx (model, messages,
  stream), latency = sent -> stream complete. The overhead is hermes's
  percentile minus the baseline's.
- serve's own view of the timed phase: `hermes_turn_overhead_seconds` read from
  its /metrics before and after (the time it adds to each turn: arrival to the
  answer handed to the endpoint, less the model's call), its p50 and p99
  interpolated within the histogram's buckets as Prometheus's histogram_quantile
  does; and serve's CPU (its whole process, the writer's thread included) per turn.
- For information, vs_echo as before, one round: a second serve with the
  built-in offline model, 200 clients x 20 turns, against a bare
  trio-websocket echo server answering each frame with itself.
Targets (issue 28): overhead_p50_ms <= 3, internal_p99_ms <= 10, cpu_ms_per_turn <= 2.5,
rss_1000_sessions_mb <= 100; overhead_p99_ms (a difference of two noisy tails) is reported.
Last line: RESULT overhead_p50_ms=<x> overhead_p99_ms=<y> internal_p99_ms=<z>
cpu_ms_per_turn=<c> rss_1000_sessions_mb=<r> vs_echo=<w>
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import psutil
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import CpuWatch, kill, percentile, start_child  # noqa: E402

from hermes.agent.prompt import PromptParts, system_prompt  # noqa: E402

FAKE_DELAY = 0.1  # seconds before the fake model answers
FAKE_TEXT = "pong from the fake model"  # streamed one word per chunk
SESSIONS = 1000
CONNECTIONS = 50
OPEN_IN_FLIGHT = 4  # calls in flight per connection while the sessions are opened
RATE = 100.0  # messages per second, offered
SECONDS = 10.0
REQUESTS = int(RATE * SECONDS)
BASELINE_SLACK_MS = 5.0  # a baseline p50 further above the fake's delay: the bench is the limit
BUSY_OTHERS = 0.1  # CPUs taken by other processes during a timed phase worth a warning
ECHO_CLIENTS = 200
ECHO_MESSAGES = 20

ECHO_SERVER = """
import sys, trio
from trio_websocket import ConnectionClosed, serve_websocket
async def echo(request):
    ws = await request.accept()
    try:
        while True:
            await ws.send_message(await ws.get_message())
    except ConnectionClosed:
        pass
async def main():
    async with trio.open_nursery() as n:
        server = await n.start(serve_websocket, echo, "127.0.0.1", 0, None)
        print(server.port, flush=True)
trio.run(main)
"""


# --- processes -------------------------------------------------------------------------------


class Serve:
    """`hermes serve` on a fresh home under `tmp`, started and ready."""

    def __init__(self, tmp: Path, name: str, config: str) -> None:
        self.home = tmp / name
        self.home.mkdir()
        (self.home / "config.yaml").write_text(config)
        env = {**os.environ, "HERMES_HOME": str(self.home)}
        self.stderr_path = tmp / f"{name}.stderr"
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hermes.cli.main", "serve"],
                env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
            )  # fmt: skip
        self.port = 0
        for line in self.proc.stdout:
            if line.startswith("HERMES_BACKEND_READY"):
                self.port = int(line.split("port=")[1])
                break
        if not self.port:
            self.proc.wait()
            tail = self.stderr_path.read_text()[-2000:]
            raise SystemExit(f"hermes serve exited ({self.proc.returncode}) before ready:\n{tail}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # never blocks it
        self.url = f"ws://127.0.0.1:{self.port}/"
        token = (self.home / "serve.token").read_text().strip()
        self.auth = [(b"authorization", f"Bearer {token}".encode())]

    def rss_mb(self) -> tuple[float, int]:
        """Resident memory of serve and its children (the state.db writer), and their count."""
        server = psutil.Process(self.proc.pid)
        parts = [server, *server.children(recursive=True)]
        total = 0
        for part in parts:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += part.memory_info().rss
        return total / (1024 * 1024), len(parts)

    def overhead_buckets(self) -> dict[float, float]:
        """hermes_turn_overhead_seconds now, from /metrics: cumulative count by bound."""
        port = int((self.home / "ops.port").read_text())
        headers = {k.decode(): v.decode() for k, v in self.auth}
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=headers)
        response.raise_for_status()
        buckets = {}
        for line in response.text.splitlines():
            if line.startswith("hermes_turn_overhead_seconds_bucket{"):
                bound = line.split('le="')[1].split('"')[0]
                buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
        return buckets

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                print("WARNING: serve did not drain within 60 s; killed")
                self.proc.kill()
                self.proc.wait()
        if self.proc.returncode not in (0, -signal.SIGKILL):
            print(f"WARNING: serve exited {self.proc.returncode} after SIGTERM")


# --- figures ---------------------------------------------------------------------------------


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The q-th percentile (ms) of what a histogram observed between two readings, linear
    within the bucket that holds it (Prometheus's histogram_quantile)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    rank = q / 100 * counts[-1]
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound == float("inf"):
                return lower * 1000  # above the last finite bound: that bound, at least
            inside = count - below
            return (lower + (bound - lower) * ((rank - below) / inside if inside else 0)) * 1000
        lower, below = bound, count
    return lower * 1000


class Timing:
    """One open-loop phase: latencies, and when each request actually went out."""

    def __init__(self, name: str, pids: list[int]) -> None:
        self.name = name
        self.pids = pids  # the processes of the bench, for CpuWatch
        self.latencies: list[float] = []
        self.sent: list[float] = []
        self.lags: list[float] = []  # actual send time - scheduled send time
        self.cpu: CpuWatch | None = None
        self.buckets: list[dict[float, float]] = []  # serve's histogram, before and after

    def send_rate(self) -> float:
        return (len(self.sent) - 1) / (max(self.sent) - min(self.sent))

    def p(self, q: float) -> float:
        return percentile(self.latencies, q)

    def line(self, what: str) -> str:
        return (
            f"{self.name:<11} p50 {self.p(50):7.2f} ms  p99 {self.p(99):7.2f} ms  "
            f"max {self.p(100):7.2f} ms  ({len(self.latencies)} {what}; "
            f"{RATE:.0f}/s offered, {self.send_rate():.1f}/s sent, "
            f"send lag p99 {percentile(self.lags, 99):.2f} ms; "
            f"other processes {self.cpu.others:.2f} CPUs)"
        )


async def open_loop(timing: Timing, one) -> None:
    """Request i goes out at t0 + i/RATE, whatever became of the earlier ones."""

    async def run(i: int, at: float) -> None:
        start = trio.current_time()
        timing.lags.append(start - at)
        timing.sent.append(start)
        timing.latencies.append(await one(i, start))

    gc.collect()
    gc.disable()  # the load generator's own collections stay out of the latencies
    try:
        timing.cpu = CpuWatch(timing.pids)
        t0 = trio.current_time() + 0.05
        async with trio.open_nursery() as nursery:
            for i in range(REQUESTS):
                at = t0 + i / RATE
                await trio.sleep_until(at)
                nursery.start_soon(run, i, at)
        timing.cpu.stop()
    finally:
        gc.enable()


# --- hermes over the local endpoint ----------------------------------------------------------


class Conn:
    """One WebSocket to the endpoint with many calls in flight; replies matched by id."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, list[Any]] = {}  # id -> [event, reply, received at]

    async def read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                msg = json.loads(await self.ws.get_message())
                slot = self.waiting.pop(msg.get("id"), None)  # turn.event notifications: no id
                if slot is not None:
                    slot[1], slot[2] = msg, trio.current_time()
                    slot[0].set()

    async def chat(self, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """chat.send: its result, and when the reply arrived (trio clock)."""
        request_id = next(self.ids)
        slot: list[Any] = [trio.Event(), None, 0.0]
        self.waiting[request_id] = slot
        await self.ws.send_message(json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "chat.send", "params": params}
        ))  # fmt: skip
        await slot[0].wait()
        reply = slot[1]
        result = reply.get("result") or {}
        if result.get("status") != "done" or result.get("text", "").strip() != FAKE_TEXT:
            raise RuntimeError(f"chat.send failed: {reply!r:.500}")
        return result, slot[2]


async def hermes_phases(serve: Serve, pids: list[int]) -> tuple[float, float, float, int, Timing]:
    """Open the sessions, read serve's memory, then the timed phase."""
    async with contextlib.AsyncExitStack() as stack:
        conns = []
        for _ in range(CONNECTIONS):
            ws = await stack.enter_async_context(
                open_websocket_url(serve.url, extra_headers=serve.auth, connect_timeout=10)
            )
            conns.append(Conn(ws))
        async with trio.open_nursery() as readers:
            for conn in conns:
                readers.start_soon(conn.read)

            sessions: list[str] = [""] * SESSIONS  # session k lives on connection k % CONNECTIONS

            async def opener(c: int, w: int) -> None:
                for k in range(c + w * CONNECTIONS, SESSIONS, CONNECTIONS * OPEN_IN_FLIGHT):
                    result, _ = await conns[c].chat({"text": f"hello {k}"})
                    sessions[k] = result["session"]

            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for c in range(CONNECTIONS):
                    for w in range(OPEN_IN_FLIGHT):
                        nursery.start_soon(opener, c, w)
            open_seconds = time.perf_counter() - start
            assert len(set(sessions)) == SESSIONS and all(sessions), "sessions were not all new"
            rss, processes = serve.rss_mb()

            async def one(i: int, start: float) -> float:
                k = i % SESSIONS
                _, received = await conns[k % CONNECTIONS].chat(
                    {"text": f"message {i}", "session": sessions[k]}
                )
                return received - start

            timing = Timing("hermes", pids)
            timing.buckets = [await trio.to_thread.run_sync(serve.overhead_buckets)]
            await open_loop(timing, one)
            timing.buckets.append(await trio.to_thread.run_sync(serve.overhead_buckets))
            rss_after, _ = serve.rss_mb()
            readers.cancel_scope.cancel()
    return open_seconds, rss, rss_after, processes, timing


# --- the baseline: straight to the fake ------------------------------------------------------


def baseline_body(i: int) -> dict[str, Any]:
    """What hermes sends for a session's second message, without the tool schemas."""
    session = f"local_{i:012x}"
    system = system_prompt(PromptParts(), session, "local", ZoneInfo("UTC"), time.time())
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"hello {i}"},
        {"role": "assistant", "content": FAKE_TEXT},
        {"role": "user", "content": f"message {i}"},
    ]
    return {"model": "m", "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip


async def baseline_phase(url: str, pids: list[int]) -> Timing:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def one(i: int, start: float) -> float:
            async with client.stream("POST", url, json=baseline_body(i)) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"the fake answered {response.status_code}")
                text = []
                async for line in response.aiter_lines():  # to the end: the connection is reused
                    if line.startswith("data:") and line != "data: [DONE]":
                        for choice in json.loads(line[5:]).get("choices") or ():
                            text.append((choice.get("delta") or {}).get("content") or "")
            if "".join(text).strip() != FAKE_TEXT:
                raise RuntimeError(f"the fake streamed {''.join(text)!r}")
            return trio.current_time() - start

        for i in range(10):  # warm up: imports, the first connections
            await one(i, trio.current_time())
        timing = Timing("baseline", pids)
        await open_loop(timing, one)
    return timing


# --- vs_echo: the offline model against a bare echo server -----------------------------------


async def echo_load(url: str, headers: list, check) -> float:
    """ECHO_CLIENTS clients, each ECHO_MESSAGES request/reply round trips; turns per second."""

    async def client(n: int) -> None:
        async with open_websocket_url(url, extra_headers=headers) as ws:
            for i in range(ECHO_MESSAGES):
                params = {"text": f"message {i}", "session": f"bench-{n}"}
                request = {"jsonrpc": "2.0", "id": i, "method": "chat.send", "params": params}
                await ws.send_message(json.dumps(request))
                while True:  # skip the turn's streamed events; wait for the reply
                    reply = json.loads(await ws.get_message())
                    if reply.get("id") == i:
                        break
                check(reply)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for n in range(ECHO_CLIENTS):
            nursery.start_soon(client, n)
    return ECHO_CLIENTS * ECHO_MESSAGES / (time.perf_counter() - start)


def serve_check(reply: dict) -> None:
    assert reply["result"]["text"].startswith("You said: message"), reply


def echo_check(reply: dict) -> None:
    assert reply["method"] == "chat.send", reply


# --- the run ---------------------------------------------------------------------------------


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with contextlib.ExitStack() as stack:
            fake, base_url = start_child([
                sys.executable, "-m", "tests.fakes.openai",
                "--delay", str(FAKE_DELAY), "--text", FAKE_TEXT, "--stream",
            ])  # fmt: skip
            stack.callback(kill, fake)
            config = (
                f"model: {{provider: fake, model: m, base_url: {json.dumps(base_url)}}}\n"
                "gateway: {local: {port: 0}}\nops: {port: 0}\n"
            )
            serve = Serve(tmp, "home", config)
            stack.callback(serve.stop)
            rss_ready, _ = serve.rss_mb()
            pids = [os.getpid(), fake.pid, serve.proc.pid]
            open_s, rss, rss_after, processes, hermes = trio.run(hermes_phases, serve, pids)
            baseline = trio.run(baseline_phase, base_url + "/chat/completions", pids)

        with contextlib.ExitStack() as stack:
            echo, echo_port = start_child([sys.executable, "-c", ECHO_SERVER])
            stack.callback(kill, echo)
            offline = Serve(tmp, "offline", "gateway:\n  local:\n    port: 0\nops:\n  port: 0\n")
            stack.callback(offline.stop)
            echo_rate = trio.run(echo_load, f"ws://127.0.0.1:{echo_port}/", [], echo_check)
            serve_rate = trio.run(echo_load, offline.url, offline.auth, serve_check)

    delay_ms = FAKE_DELAY * 1000
    print(f"fake model  streams {len(FAKE_TEXT.split())} words after {delay_ms:.0f} ms "
          f"(its own process, {base_url})")  # fmt: skip
    print(f"sessions    {SESSIONS} opened in {open_s:.2f} s ({SESSIONS / open_s:.0f} turns/s, "
          f"{CONNECTIONS} connections x {OPEN_IN_FLIGHT} in flight)")  # fmt: skip
    print(f"memory      serve {rss:.1f} MB resident with {SESSIONS} sessions open "
          f"({processes} processes: serve and its children; {rss_ready:.1f} MB when ready, "
          f"{rss_after:.1f} MB after the timed phase)")  # fmt: skip
    print(baseline.line("streaming requests straight to the fake, httpx"))
    print(hermes.line(f"chat.send over {CONNECTIONS} connections, round robin on the sessions"))
    overhead_p50 = hermes.p(50) - baseline.p(50)
    overhead_p99 = hermes.p(99) - baseline.p(99)
    print(f"overhead    p50 {overhead_p50:+.2f} ms  p99 {overhead_p99:+.2f} ms  "
          f"(hermes minus baseline)")  # fmt: skip
    per = [t * 1000 / REQUESTS for t in hermes.cpu.used]  # pids: bench, fake, serve
    base = [t * 1000 / REQUESTS for t in baseline.cpu.used]
    print(f"cpu         per turn: serve {per[2]:.2f} ms (its writer included), load generator "
          f"{per[0]:.2f} ms, fake {per[1]:.2f} ms; per baseline request: load generator "
          f"{base[0]:.2f} ms, fake {base[1]:.2f} ms")  # fmt: skip
    internal_p50 = bucket_quantile(*hermes.buckets, 50)
    internal_p99 = bucket_quantile(*hermes.buckets, 99)
    print(f"internal    p50 {internal_p50:.2f} ms  p99 {internal_p99:.2f} ms  (serve's own "
          f"hermes_turn_overhead_seconds over the timed phase, within its buckets)")  # fmt: skip
    vs_echo = serve_rate / echo_rate
    print(f"vs_echo     serve {serve_rate:.0f} turns/s (offline model) / echo "
          f"{echo_rate:.0f} msgs/s = {vs_echo:.3f} "
          f"({ECHO_CLIENTS} clients x {ECHO_MESSAGES}, one round)")  # fmt: skip
    if baseline.p(50) > delay_ms + BASELINE_SLACK_MS:
        above = baseline.p(50) - delay_ms
        print(f"WARNING: the baseline's p50 is {above:.2f} ms above the fake's "
              f"{delay_ms:.0f} ms: the load generator or the fake is a bottleneck")  # fmt: skip
    for timing in (baseline, hermes):
        if timing.cpu.others > BUSY_OTHERS:
            print(f"WARNING: other processes took {timing.cpu.others:.2f} CPUs during the "
                  f"{timing.name} phase: the figures are not this code's alone")  # fmt: skip
        if timing.send_rate() < 0.95 * RATE:
            rate = timing.send_rate()
            print(f"WARNING: {timing.name} requests went out at {rate:.1f}/s, below the "
                  f"{RATE:.0f}/s offered: the load generator is a bottleneck")  # fmt: skip
    print(
        f"RESULT overhead_p50_ms={overhead_p50:.2f} overhead_p99_ms={overhead_p99:.2f} "
        f"internal_p99_ms={internal_p99:.2f} cpu_ms_per_turn={per[2]:.2f} "
        f"rss_1000_sessions_mb={rss:.1f} vs_echo={vs_echo:.3f}"
    )


if __name__ == "__main__":
    main()
