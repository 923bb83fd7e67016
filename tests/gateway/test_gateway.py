"""The gateway and its session actors: busy modes, /stop, /new, drain notices."""

from __future__ import annotations

import math
import socket
import subprocess

import apsw
import pytest
import trio
import trio.testing

from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.tools.catalog import default_tools
from hermes.config import GatewayConfig
from hermes.gateway.gateway import Chat, Draining, Gateway
from hermes.gateway.session_actor import IDLE_TIMEOUT, QUEUE_MAX, Turn
from hermes.state.sessions import get_session
from tests.fakes.openai import stream_answer, text_answer
from tests.processes import HERMES, hermes, wait_ready


def make(registry, home, fake, busy_mode):
    agent = Agent(ProviderChain([OpenAICompatible("f", "m", fake.url, "k")]), default_tools())
    config = GatewayConfig(busy_mode=busy_mode)
    return Gateway(registry, home.state_db, home.root, home.memories, agent, config)


async def chat(address, session_id, text):
    """The gateway's answer to a chat message, and the receive side of its events."""
    send, events = trio.open_memory_channel(math.inf)
    return await address.call(Chat(session_id, text, send)), events


async def collect(events) -> list[dict]:
    out = []
    async with events:
        async for event in events:
            out.append(event)
    return out


async def first_text(events) -> dict:
    return await events.receive()


@pytest.mark.parametrize("mode", ["interrupt", "queue"])
async def test_a_message_mid_turn_interrupts_or_queues(registry, home, fake, mode):
    fake.script(stream_answer([f"w{i} " for i in range(50)], pause=0.1), text_answer("second"))
    gateway = make(registry, home, fake, mode)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(gateway.run)
        session, events1 = await chat(address, "s1", "long one")
        assert (await events1.receive())["kind"] == "text"  # the first turn is streaming
        _, events2 = await chat(address, "s1", "short one")
        if mode == "interrupt":
            rest1 = await collect(events1)
            assert rest1[-1]["kind"] == "interrupted"
            second = await collect(events2)
            assert second[-1] == {"kind": "done", "text": "second", "tool": "", "call_id": ""}
        else:
            rest1 = await collect(events1)
            assert rest1[-1]["kind"] == "done"  # ran to the end
            second = await collect(events2)
            assert second[-1]["text"] == "second"
        gateway.request_drain(trio.current_time() + 5)


async def test_waiting_turns_are_bounded_and_never_left_hanging(registry, home, fake):
    """In queue mode at most QUEUE_MAX turns wait; more are refused at once. /stop ends
    the waiting ones with a reason: no caller waits on events that never come."""
    fake.script(stream_answer([f"w{i} " for i in range(100)], pause=0.1))
    gateway = make(registry, home, fake, "queue")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(gateway.run)
        _, running = await chat(address, "s1", "long one")
        assert (await running.receive())["kind"] == "text"
        waiting = [(await chat(address, "s1", f"queued {n}"))[1] for n in range(QUEUE_MAX)]
        _, refused = await chat(address, "s1", "one too many")
        assert [e["kind"] for e in await collect(refused)] == ["error"]
        await address.call(Chat("s1", "/stop", trio.open_memory_channel(1)[0]))
        for events in waiting:
            (ended,) = await collect(events)
            assert ended["kind"] == "error" and "/stop" in ended["text"]
        assert (await collect(running))[-1]["kind"] == "interrupted"
        gateway.request_drain(trio.current_time() + 5)


async def test_a_session_actor_stops_after_an_idle_timeout_since_its_last_message(
    registry, home, fake, io_clock
):
    fake.script(text_answer("a"), text_answer("b"))
    gateway = make(registry, home, fake, "interrupt")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(gateway.run)
        _, events = await chat(address, "s1", "one")
        await collect(events)
        await trio.sleep(IDLE_TIMEOUT * 0.75)
        _, events = await chat(address, "s1", "two")
        await collect(events)
        await trio.sleep(IDLE_TIMEOUT * 0.75)  # 1.5 timeouts after the first message
        assert "s1" in gateway.sessions
        await trio.sleep(IDLE_TIMEOUT * 0.5)  # 1.25 timeouts after the last
        assert "s1" not in gateway.sessions
        gateway.request_drain(trio.current_time() + 5)


async def test_stop_new_and_drain_notice(registry, home, fake):
    fake.script(stream_answer([f"w{i} " for i in range(100)], pause=0.1))
    gateway = make(registry, home, fake, "interrupt")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(gateway.run)
        _, events = await chat(address, "s1", "talk")
        await events.receive()
        stopped, no_events = await chat(address, "s1", "/stop")
        assert stopped["stopped"] is True and await collect(no_events) == []  # closed at once
        assert (await collect(events))[-1]["kind"] == "interrupted"
        new, no_events = await chat(address, "s1", "/new")
        assert new["previous"] == "s1" and new["session"] != "s1"
        assert await collect(no_events) == []
        ended = await gateway.db.read(get_session, "s1")
        assert ended.end_reason == "new session"
        gateway.stop_intake()
        with pytest.raises(Draining, match="shutting down"):
            await chat(address, "s2", "hello?")
        gateway.request_drain(trio.current_time() + 5)


def test_port_in_use_exits_75(home):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        home.config_path.write_text(f"gateway:\n  local:\n    port: {port}\n")
        result = hermes("serve")
    assert result.returncode == 75, result.stderr
    assert f"127.0.0.1:{port} is already in use" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(120)
def test_chat_and_status_commands(home, spawn):
    serve = spawn()
    try:
        wait_ready(serve)
        chat = hermes("chat", "-m", "hello hermes")
        assert chat.returncode == 0, chat.stderr
        assert "You said: hello hermes" in chat.stdout
        status = hermes("status")
        assert status.returncode == 0, status.stderr
        assert "gateway" in status.stdout and "running" in status.stdout
        (home.root / "serve.token").write_text("wrong\n")
        refused = hermes("chat", "-m", "hi")
        assert refused.returncode == 1 and "refused the connection" in refused.stderr
    finally:
        serve.terminate()
        assert serve.wait(timeout=60) == 0


async def test_a_turn_left_in_a_crashed_session_actors_mailbox_ends_with_an_error(
    registry, home, fake
):
    fake.script(text_answer("a"))
    gateway = make(registry, home, fake, "interrupt")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(gateway.run)
        _, events = await chat(address, "s1", "one")
        assert (await collect(events))[-1]["kind"] == "done"
        session = gateway.sessions["s1"][1]
        send, events = trio.open_memory_channel(10)
        # Both wait in the mailbox, the Turn behind a message the session actor cannot
        # handle, which crashes it.
        session.cast_nowait(object())
        session.cast_nowait(Turn("two", send))
        got = await collect(events)  # ends: the caller is not left waiting
        assert [e["kind"] for e in got] == ["error"]
        assert "stopped before the turn began" in got[0]["text"]
        await trio.testing.wait_all_tasks_blocked()  # the gateway has seen the crash
        assert "s1" not in gateway.sessions
        gateway.request_drain(trio.current_time() + 5)


@pytest.mark.timeout(120)
def test_a_long_chat_with_the_offline_model_compacts_and_keeps_answering(home, spawn):
    """A fresh home, the default offline model (a small window), one long REPL chat."""
    serve = spawn()
    wait_ready(serve)
    try:
        lines = [f"line {n}: " + "tell me more about the weather " * 25 for n in range(60)]
        lines += ["/usage", "the last one"]
        chat = subprocess.run([*HERMES, "chat"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=90)  # fmt: skip
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.count("You said: line ") == 60
        assert "You said: the last one\nyou> " in chat.stdout
        assert "compacts past 6000" in chat.stdout  # /usage, answered without the agent
    finally:
        serve.terminate()
        assert serve.wait(timeout=60) == 0
    conn = apsw.Connection(str(home.state_db), flags=apsw.SQLITE_OPEN_READONLY)
    kinds = [k for (k,) in conn.execute("SELECT kind FROM compactions")]
    assert kinds and set(kinds) == {"summary"}
    assert conn.execute("SELECT count(*) FROM messages WHERE role = 'user'").get == 61
    conn.close()
