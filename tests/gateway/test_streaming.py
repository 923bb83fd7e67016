"""Streamed text reaches a local client coalesced: a frame at most every COALESCE seconds
(or once COALESCE_BYTES wait), not one per word, and nothing is lost or reordered."""

from __future__ import annotations

import json

import trio
from trio_websocket import open_websocket_url

from hermes.adapters.contract import InboundEvent, StepKind, TurnStep
from hermes.adapters.local.endpoint import COALESCE, COALESCE_BYTES
from tests.gateway.local_endpoint import HEADERS, Admissions, local_endpoint

WORDS = 200
EVERY = 0.005  # the model's pace: a word every 5 ms, 1 s in all


async def test_words_go_out_in_frames_at_most_every_50_ms(autojump_clock):
    admissions = Admissions()
    endpoint = local_endpoint(admissions)

    async def turn(event: InboundEvent) -> None:
        where = {"event_id": event.event_id, "target": event.target(), "session_id": "s"}
        for i in range(WORDS):
            await address.cast(TurnStep(StepKind.TEXT, f"w{i} ", **where))
            await trio.sleep(EVERY)
        await address.cast(TurnStep(StepKind.TOOL_CALL, "{}", tool="memory", **where))
        await address.cast(TurnStep(StepKind.TEXT, "x" * (2 * COALESCE_BYTES), **where))
        await address.cast(TurnStep(StepKind.DONE, "the answer", **where))

    frames: list[tuple[float, dict]] = []
    async with trio.open_nursery() as nursery:
        address = await nursery.start(endpoint.run)
        url = f"ws://127.0.0.1:{endpoint.port}/"
        async with open_websocket_url(url, extra_headers=HEADERS) as ws:
            request = {"jsonrpc": "2.0", "id": 1, "method": "chat.send", "params": {"text": "hi"}}
            await ws.send_message(json.dumps(request))
            nursery.start_soon(turn, await admissions.next())
            while True:
                msg = json.loads(await ws.get_message())
                if msg.get("id") == 1:
                    break
                frames.append((trio.current_time(), msg["params"]))
        nursery.cancel_scope.cancel()

    assert msg["result"] == {"session": "s", "text": "the answer", "status": "done"}
    kinds = [params["kind"] for _, params in frames]
    texts = [params["text"] for _, params in frames if params["kind"] == "text"]
    # Every word, once, in order; the tool call after them; the long text after it.
    assert kinds.index("tool_call") == len(kinds) - 2
    assert "".join(texts[:-1]) == "".join(f"w{i} " for i in range(WORDS))
    assert texts[-1] == "x" * (2 * COALESCE_BYTES)  # over the byte bound: at once
    words = [t for t, params in frames if params["kind"] == "text"][:-1]
    assert len(words) <= WORDS * EVERY / COALESCE + 2  # ~20 frames, not 200
    assert all(b - a >= COALESCE - 1e-9 for a, b in zip(words, words[1:], strict=False))
