"""A slow reader of a turn's steps holds the turn back instead of buffering them, and a
local client that stops reading is cut, not waited on forever."""

from __future__ import annotations

import json

import trio
import trio.testing
from trio_websocket import open_websocket_url

from hermes.adapters.contract import InboundEvent, StepKind, Target, TurnStep
from hermes.adapters.local.endpoint import CALL_STEPS, CLIENT_STUCK_AFTER
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.memory import Memory, MemoryStore
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.permissions import Caller
from hermes.agent.tools.base import ToolContext
from hermes.agent.tools.catalog import default_tools
from hermes.gateway.session_actor import SessionActor, Turn
from hermes.gateway.turn_starter import TURN_STEPS
from hermes.state.db import Db
from hermes.state.messages import messages_of
from hermes.terminal.session import TerminalSession
from tests.gateway.local_endpoint import HEADERS, Admissions, local_endpoint


async def test_a_reader_that_stops_holds_the_turn_back(registry, home):
    calls = 3 * TURN_STEPS  # more steps than the channel holds, before any tool runs
    text = "\n".join(tool_line("no_such_tool", n=n) for n in range(calls))
    agent = Agent(ProviderChain([OfflineProvider()]), default_tools())
    send, steps = trio.open_memory_channel[TurnStep](TURN_STEPS)  # as the router opens it
    async with Db(registry, home.state_db) as db, trio.open_nursery() as nursery:
        terminal = TerminalSession(home.root, state_dir=home.root / ".term")
        memory = Memory(MemoryStore(home.memories))
        ctx = ToolContext("s1", db, terminal, memory, Caller("local", "", "owner"))
        address = await nursery.start(SessionActor(ctx, agent).run)
        await address.cast(Turn(text, send))
        with trio.fail_after(10):  # unbounded, it would never block: this would fail
            while not send.statistics().tasks_waiting_send:  # the turn waits on the channel
                await trio.testing.wait_all_tasks_blocked()
        assert send.statistics().current_buffer_used == TURN_STEPS  # full, and no more
        rows = await db.read(messages_of, "s1")
        assert [r.role for r in rows] == ["user", "assistant"]  # no tool has run meanwhile

        got = [step async for step in steps]  # read at last: the turn runs to its end
        kinds = [step.kind for step in got]
        assert kinds.count(StepKind.TOOL_CALL) == kinds.count(StepKind.TOOL_RESULT) == calls
        assert kinds[-1] is StepKind.DONE
        rows = await db.read(messages_of, "s1")
        assert [r.role for r in rows].count("tool") == calls
        nursery.cancel_scope.cancel()


async def test_a_client_that_stops_reading_slows_its_turn_then_is_cut(autojump_clock):
    admissions = Admissions()
    endpoint = local_endpoint(admissions)
    piece = "x" * 256 * 1024
    pieces = 400  # far more than the socket buffers, the call and the mailbox hold
    passed_on = 0

    async def turn(event: InboundEvent) -> None:
        """The router's side: each step waits for room in the endpoint's mailbox."""
        nonlocal passed_on
        where = {"event_id": event.event_id, "target": event.target(), "session_id": "s"}
        for _ in range(pieces):
            await address.cast(TurnStep(StepKind.TEXT, piece, **where))
            passed_on += 1
        await address.cast(TurnStep(StepKind.DONE, "end", **where))

    async with trio.open_nursery() as nursery:
        address = await nursery.start(endpoint.run)
        url = f"ws://127.0.0.1:{endpoint.port}/"
        async with open_websocket_url(url, extra_headers=HEADERS) as stuck:
            request = {"jsonrpc": "2.0", "id": 1, "method": "chat.send", "params": {"text": "hi"}}
            await stuck.send_message(json.dumps(request))  # and never reads again
            first = await admissions.next()
            async with trio.open_nursery() as router:
                router.start_soon(turn, first)
                await trio.testing.wait_all_tasks_blocked()
                # Everything between is full and the producer waits; no time has passed.
                assert passed_on < pieces and trio.current_time() < CLIENT_STUCK_AFTER
                assert endpoint.waiting.held_for(first.event_id) == CALL_STEPS
            # The stuck client was cut after CLIENT_STUCK_AFTER; then the turn went on.
            assert trio.current_time() >= CLIENT_STUCK_AFTER
            assert passed_on == pieces and not endpoint.waiting and not endpoint.clients

        # The endpoint still serves: a new client's call gets its turn's final step.
        async with open_websocket_url(url, extra_headers=HEADERS) as fresh:
            request = {"jsonrpc": "2.0", "id": 2, "method": "chat.send", "params": {"text": "yo"}}
            await fresh.send_message(json.dumps(request))
            event = await admissions.next()
            where = {"event_id": event.event_id, "target": Target("local", event.chat_id)}
            await address.cast(TurnStep(StepKind.DONE, "hello", session_id="s2", **where))
            reply = json.loads(await fresh.get_message())
            assert reply["result"] == {"session": "s2", "text": "hello", "status": "done"}
        nursery.cancel_scope.cancel()
