"""One-round turn time through the hermes agent loop against a bare httpx request.

Run: python bench/agent.py
Both talk to the same fake OpenAI-compatible server on 127.0.0.1, a real HTTP
server in its own process (a provider is never in ours) that answers at once.
The hermes turn includes what a real turn does: the user's message written to
state.db, the system prompt built, the request, the reply recorded. Turns run
in conversations of TURNS_PER_SESSION, the way a session actor serves them:
the first turn of each creates the session and reads its history from
state.db, the later ones carry the history kept from the turn before. The
bare baseline sends the same request bodies, in the same order.
Last line: RESULT turn_ratio=<hermes turn time / bare request time>
                  added_us=<what hermes adds to a model round, in microseconds>
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.agent.chain import ProviderChain  # noqa: E402
from hermes.agent.loop import Agent  # noqa: E402
from hermes.agent.memory import Memory, MemoryStore  # noqa: E402
from hermes.agent.openai_compat import OpenAICompatible  # noqa: E402
from hermes.agent.permissions import Caller  # noqa: E402
from hermes.agent.tools.base import ToolContext  # noqa: E402
from hermes.agent.tools.catalog import default_tools  # noqa: E402
from hermes.state.db import Db  # noqa: E402
from hermes.state.registry import Registry  # noqa: E402
from hermes.terminal.session import TerminalSession  # noqa: E402

ROUNDS = 300
WARMUP = 20
TURNS_PER_SESSION = 10


class Recording(httpx.AsyncClient):
    """Keeps every request body hermes sent, for the bare baseline to resend."""

    bodies: list[bytes] = []

    async def send(self, request: httpx.Request, **kwargs):
        Recording.bodies.append(request.content)
        return await super().send(request, **kwargs)


async def bare(url: str, bodies: list[bytes]) -> list[float]:
    times = []
    headers = {"content-type": "application/json", "authorization": "Bearer k"}
    async with httpx.AsyncClient() as client:
        for i, body in enumerate(bodies):
            start = time.perf_counter()
            response = await client.post(url + "/chat/completions", content=body, headers=headers)
            response.json()
            if i >= WARMUP:
                times.append(time.perf_counter() - start)
    return times


async def turns(url: str, root: Path) -> list[float]:
    registry = Registry()
    provider = OpenAICompatible("fake", "m", url, "k", client=Recording())
    agent = Agent(ProviderChain([provider]), default_tools())
    times = []
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, root / "state.db") as db:
            terminal = TerminalSession(root, state_dir=root / ".t")  # one per conversation
            memory = Memory(MemoryStore(root / "memories"))
            owner = Caller("local", "", "owner")
            conversation = None
            for i in range(ROUNDS + WARMUP):
                if i % TURNS_PER_SESSION == 0:  # a new conversation: its history is read
                    ctx, conversation = ToolContext(f"s{i}", db, terminal, memory, owner), None
                start = time.perf_counter()
                result = await agent.run_turn(ctx, "hi", stream=False, conversation=conversation)
                if i >= WARMUP:
                    times.append(time.perf_counter() - start)
                assert result.text == "pong"
                conversation = result.conversation  # kept between turns, as a session actor does
        registry.request_drain(trio.current_time() + 10)
    return times


def main() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai", "--text", "pong"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            ours = statistics.median(trio.run(turns, url, Path(tmp)))
        raw = statistics.median(trio.run(bare, url, Recording.bodies))
    finally:
        server.terminate()
        server.wait()
    print(f"bare httpx request    {raw * 1000:6.2f} ms (the same bodies, in order)")
    print(f"hermes one-round turn {ours * 1000:6.2f} ms (median of {ROUNDS})")
    print(f"hermes adds           {(ours - raw) * 1e6:6.0f} us per model round")
    print(f"RESULT turn_ratio={ours / raw:.2f} added_us={(ours - raw) * 1e6:.0f}")


if __name__ == "__main__":
    main()
