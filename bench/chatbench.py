"""What the chat-platform benches (telegram.py, slack.py, discord.py) share: the fake
in its own process, `hermes serve` on a fresh home with the offline model, waiting for
the answers, the pace check, and the figures and warnings they print. Each bench
keeps what is its platform's own: how a user writes, the bare echo client, the checks."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.delivery.outbox import PACES  # noqa: E402
from hermes.gateway.serve import READY_LINE  # noqa: E402

HELD = 0.005  # a post this close to its earliest allowed time was probably held by the pace
LEVELS = ("WARNING", "ERROR", "CRITICAL")


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


class FakeProcess:
    """A fake platform (`python -m tests.fakes.<name> ...`) in its own process, driven
    over its `_fake/` HTTP surface."""

    def __init__(self, name: str, *args: str) -> None:
        argv = [sys.executable, "-m", f"tests.fakes.{name}", *args]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            kill(self.proc)
            raise SystemExit(f"the fake {name} did not start")

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
    section) and one platform (`platform`: its YAML under `platforms:`), its tokens in
    the environment; started and ready."""

    def __init__(self, tmp: Path, platform: str, tokens: dict[str, str]) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        (self.home / "config.yaml").write_text(
            # No per-user limit: the offered load is the measure (users write 1 a second).
            "gateway:\n  rate_limit: 0\n  local:\n    port: 0\nops:\n  port: 0\nplatforms:\n"
            + platform
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


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] * 1000


def per_message(seconds: float, count: int) -> str:
    return f"{seconds * 1000 / count:.3f} ms"


def start_helper(bench: str, flag: str, url: str, log_path: Path) -> subprocess.Popen:
    """The bench's own file run again with `flag url` (its bare echo client), stderr to
    `log_path`."""
    with open(log_path, "w") as stderr:
        argv = [sys.executable, bench, flag, url]
        return subprocess.Popen(argv, cwd=ROOT, stderr=stderr)


async def until_answered(
    http: httpx.AsyncClient,
    fake: FakeProcess,
    side: Any,
    wanted: range,
    limit: float,
    replies_of: Callable[[dict[str, Any], Any], dict[int, list[dict[str, Any]]]],
) -> dict[str, Any]:
    """Read the fake's state until each injection in `wanted` has a reply (`replies_of`
    says which are, the platform's way); its state."""
    wait = 0.05
    with trio.move_on_after(limit):
        while True:
            state = await fake.state(http)
            side.reads += 1
            replies = replies_of(state, side)
            if all(replies.get(n) for n in wanted):
                return state
            await trio.sleep(wait)
            wait = min(wait * 1.5, 0.5)  # a backlog is not read over and over
    state = await fake.state(http)
    replies = replies_of(state, side)
    missing = sum(not replies.get(n) for n in wanted)
    side.problems.append(f"{missing} of {len(wanted)} not answered within {limit:.0f} s")
    return state


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


def pace_lines(platform: str, sends: list[dict[str, Any]], chat: str) -> tuple[list[str], int]:
    """How close hermes's posts (`sends`, each with `at` and its chat under `chat`) came to
    the platform's pace: the lines to print and how many were probably held."""
    pace = PACES.get(platform)
    if pace is None:
        return [], 0
    times = [s["at"] for s in sends]
    overall, least = held(times, pace.per_second, pace.burst)
    by_chat: dict[str, list[float]] = defaultdict(list)
    for s in sends:
        by_chat[s[chat]].append(s["at"])
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


def comparison_lines(bare: Any, hermes: Any, target_vs_bare: float, target_p99: float) -> list[str]:
    return [
        f"hermes/bare  rate {hermes.rate / bare.rate:.2f} (target >= {target_vs_bare}), hermes "
        f"p99 {hermes.p(99):.1f} ms (target <= {target_p99:.0f}; bare p99 {bare.p(99):.1f} ms; "
        f"p50 hermes {hermes.p(50):.1f}, bare {bare.p(50):.1f} ms)",
        "        at a fixed offered rate both sides keep up if they can, and the rate ratio "
        "is then about 1 by construction; the latency is the telling figure",
    ]


def closing_lines(
    bare: Any, hermes: Any, rate: float, busy_others: float, notes: list[str]
) -> list[str]:
    """What may make the figures not this code's alone, then the RESULT line."""
    out = []
    for side in (bare, hermes):
        if side.cpu.others > busy_others:
            out.append(f"WARNING: other processes took {side.cpu.others:.2f} CPUs during the "
                       f"{side.name} phase: the figures are not this code's alone")  # fmt: skip
        if side.offered < 0.95 * rate:
            out.append(f"WARNING: {side.name}'s messages went in at {side.offered:.1f}/s, below "
                       f"the {rate:.0f}/s offered: the injector is a bottleneck")  # fmt: skip
        if side.problems:
            out.append(f"WARNING: {side.name}: {len(side.problems)} problems (above)")
    out.extend(f"WARNING: {note}" for note in notes)
    out.append(f"RESULT vs_bare={hermes.rate / bare.rate:.2f} p99_ms={hermes.p(99):.1f}")
    return out
