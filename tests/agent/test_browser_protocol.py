"""The browser's parts that need no Chromium: the CDP client over a pipe (answers to their
callers, errors typed, events kept by method, a closed pipe ending every call) and the
snapshot's rendering of an accessibility tree."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from hermes.agent.browser.cdp import Cdp, CdpClosed, CdpError, split_messages
from hermes.agent.browser.snapshot import render


async def test_answers_reach_their_callers_and_events_are_kept(nursery):
    ours, theirs = trio.testing.memory_stream_pair()
    cdp = Cdp(ours, ours)
    nursery.start_soon(cdp.reader)

    async def chromium() -> None:
        buffer = bytearray()
        while True:
            buffer += await theirs.receive_some()
            for raw in split_messages(buffer):
                call = json.loads(raw)
                out = []
                if call["method"] == "Page.navigate":
                    out.append({"method": "Page.loadEventFired", "params": {"t": 1}})
                    out.append({"id": call["id"], "result": {"frameId": "F"}})
                else:
                    out.append({"id": call["id"], "error": {"message": "no such method"}})
                await theirs.send_all(b"".join(json.dumps(o).encode() + b"\0" for o in out))

    async with trio.open_nursery() as running:
        running.start_soon(chromium)
        assert await cdp.send("Page.navigate", {"url": "x"}, "S") == {"frameId": "F"}
        event = await cdp.wait_for("Page.loadEventFired", 5)
        assert event is not None and event.params == {"t": 1}
        with pytest.raises(CdpError, match="Nope.do: no such method"):
            await cdp.send("Nope.do")
        running.cancel_scope.cancel()
    await theirs.aclose()
    with pytest.raises(CdpClosed):
        await cdp.send("Page.navigate")


def test_messages_split_at_their_nul_bytes_and_a_part_waits():
    buffer = bytearray(b'{"id":1}\0{"id":2}\0{"id"')
    assert split_messages(buffer) == [b'{"id":1}', b'{"id":2}']
    assert buffer == bytearray(b'{"id"')


def node(i, role, name="", children=(), backend=None, **extra):
    found = {"nodeId": str(i), "role": {"value": role}, "childIds": [str(c) for c in children]}
    if name:
        found["name"] = {"value": name}
    if backend is not None:
        found["backendDOMNodeId"] = backend
    return {**found, **extra}


def test_a_tree_renders_indented_with_references_to_its_elements():
    nodes = [
        node(1, "RootWebArea", "Shop", (2, 6)),
        node(2, "generic", "", (3, 5)),  # nameless: its place goes to its children
        node(3, "link", "Next", (4,), backend=30),
        node(4, "StaticText", "Next"),  # repeats its link's name: left out
        node(5, "StaticText", "In stock"),
        node(6, "form", "", (7,), backend=60),
        node(
            7,
            "textbox",
            "Query",
            backend=70,
            value={"value": "shoes"},
            properties=[{"name": "required", "value": {"value": True}}],
        ),
        node(8, "button", "hidden", backend=80, ignored=True),
    ]
    text, refs = render(nodes)
    assert text.splitlines() == [
        'page "Shop"',
        '[e1] link "Next"',
        'text "In stock"',
        "[e2] form",
        '  [e3] textbox "Query" value="shoes" required',
    ]
    assert (refs.node("e1"), refs.node("[e3]"), refs.node("e9")) == (30, 70, None)
