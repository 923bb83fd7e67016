"""Throughput and latency of `hermes serve` through the offline model, and its memory.

Run: python bench/serve.py
- 200 concurrent WebSocket clients send 20 chat messages each (one session per
  client) to a real `hermes serve` subprocess on a fresh HERMES_HOME; each
  message is a full turn (state.db writes, the offline model, the reply).
- The baseline, measured the same way in the same run: a bare trio-websocket
  echo server in its own process, answering each frame with itself.
- Three rounds, echo and serve in turn, each round on new sessions; the
  rates are the medians of the rounds (one round takes a second or two, and
  this VM's speed wanders by more than 10% between such runs).
- Then 1,000 idle sessions are opened on serve and its resident memory read,
  its state.db writer's child process included.
Last line: RESULT msgs_per_s=<n> vs_echo=<x> p99_ms=<y> rss_1000_sessions_mb=<m>
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import psutil
import trio
from trio_websocket import open_websocket_url

CLIENTS = 200
MESSAGES = 20
ROUNDS = 3
IDLE_SESSIONS = 1000

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


async def load(url: str, headers: list, check, round_: int = 0) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def client(n: int) -> None:
        async with open_websocket_url(url, extra_headers=headers) as ws:
            for i in range(MESSAGES):
                params = {"text": f"message {i}", "session": f"bench-{round_}-{n}"}
                request = {"jsonrpc": "2.0", "id": i, "method": "chat.send", "params": params}
                start = time.perf_counter()
                await ws.send_message(json.dumps(request))
                while True:  # skip the turn's streamed events; wait for the reply
                    reply = json.loads(await ws.get_message())
                    if reply.get("id") == i:
                        break
                latencies.append(time.perf_counter() - start)
                check(reply)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for n in range(CLIENTS):
            nursery.start_soon(client, n)
    return time.perf_counter() - start, latencies


def serve_check(reply: dict) -> None:
    assert reply["result"]["text"].startswith("You said: message"), reply


def echo_check(reply: dict) -> None:
    assert reply["method"] == "chat.send", reply


async def idle_sessions(url: str, headers: list) -> None:
    async with open_websocket_url(url, extra_headers=headers) as ws:
        for i in range(IDLE_SESSIONS):
            request = {"jsonrpc": "2.0", "id": i, "method": "chat.send",
                       "params": {"text": "hello", "session": f"idle-{i}"}}  # fmt: skip
            await ws.send_message(json.dumps(request))
            while json.loads(await ws.get_message()).get("id") != i:
                pass


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[int(len(values) * 0.99)] * 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.yaml").write_text("gateway:\n  local:\n    port: 0\n")
        env = {**os.environ, "HERMES_HOME": str(home)}
        argv = [sys.executable, "-m", "hermes.cli.main", "serve"]
        serve = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        echo = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE,
                                text=True)  # fmt: skip
        try:
            port = int(serve.stdout.readline().split("port=")[1])
            token = (home / "serve.token").read_text().strip()
            echo_port = int(echo.stdout.readline())
            auth = [(b"authorization", f"Bearer {token}".encode())]
            echo_times, serve_times, serve_lat = [], [], []
            for round_ in range(ROUNDS):
                echo_url, serve_url = f"ws://127.0.0.1:{echo_port}/", f"ws://127.0.0.1:{port}/"
                echo_times.append(trio.run(load, echo_url, [], echo_check, round_)[0])
                elapsed, latencies = trio.run(load, serve_url, auth, serve_check, round_)
                serve_times.append(elapsed)
                serve_lat += latencies
            trio.run(idle_sessions, f"ws://127.0.0.1:{port}/", auth)
            server = psutil.Process(serve.pid)  # with its state.db writer's process
            parts = [server, *server.children(recursive=True)]
            rss = sum(p.memory_info().rss for p in parts) / (1024 * 1024)
        finally:
            for proc in (serve, echo):
                proc.terminate()
                proc.wait(timeout=60)
    total = CLIENTS * MESSAGES
    rate, echo_rate = total / median(serve_times), total / median(echo_times)
    print(f"echo server   {echo_rate:8.0f} msgs/s   (rates: medians of {ROUNDS} rounds)")
    print(f"hermes serve  {rate:8.0f} msgs/s   p99 {p99(serve_lat):7.2f} ms  "
          f"({CLIENTS} clients x {MESSAGES} turns, offline model)")  # fmt: skip
    print(f"hermes serve  {rss:.0f} MB resident with {IDLE_SESSIONS} idle sessions open "
          f"({len(parts)} processes: serve and its writer)")  # fmt: skip
    print(
        f"RESULT msgs_per_s={rate:.0f} vs_echo={rate / echo_rate:.2f} "
        f"p99_ms={p99(serve_lat):.1f} rss_1000_sessions_mb={rss:.0f}"
    )


if __name__ == "__main__":
    main()
