"""Approvals through the router: a guarded command in a turn waits for an owner.

The model (the fake) asks for a command the guard holds (`DROP TABLE` in an
echo: harmless when it runs, and it touches a file so a test can see that it
ran). The request and its prompt are rows in state.db; `/approve` and `/deny`
from the chat decide it (a button press sends the same words); the deadline,
`/stop`, a drain and a crash end it. Real time here: the fake model is a real
server on a thread, which a mock clock would outrun; the deadline test uses a
short `agent.approval_timeout`.
"""

from __future__ import annotations

import json

import attrs
import pytest
import trio

from hermes.adapters.settings import PlatformConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.permissions import Permissions
from hermes.agent.settings import AgentConfig, ToolsConfig
from hermes.agent.tools.catalog import default_tools
from hermes.gateway.approvals import ApprovalWaits
from hermes.gateway.journal import new_owner
from hermes.gateway.settings import Config
from hermes.state.approvals import RESTARTED
from tests.fakes.openai import text_answer, tool_answer
from tests.gateway.router_harness import running_router
from tests.seed import rows

CONFIG = Config(
    platforms={"telegram": PlatformConfig(allowed_users=("alice", "bob"), owner="alice")}
)


def guarded(path, word: str = "TABLE") -> tuple[str, dict]:
    """A terminal call the guard holds ("dropping a database"); it touches `path`."""
    return ("terminal", {"command": f"echo DROP {word} t; touch {path}"})


def tool_results(fake) -> list[dict]:
    """Every terminal result the model was sent, parsed, in order (each once)."""
    seen: dict[str, dict] = {}
    for request in fake.requests:
        for m in request["body"]["messages"]:
            if m["role"] == "tool":
                seen.setdefault(m["tool_call_id"] + m["content"], json.loads(m["content"]))
    return list(seen.values())


async def requests(h) -> list[tuple]:
    """Read-only, as the CLI reads (also after the router is gone)."""
    return rows(h.home.state_db, "SELECT id, state, decided_by, always, command, user_id"
                " FROM approvals ORDER BY created_at")  # fmt: skip


async def prompts(h) -> list[tuple]:
    return rows(h.home.state_db, "SELECT chat_id, text, buttons FROM outbox"
                " WHERE idempotency_key LIKE 'approval:%'")  # fmt: skip


async def test_an_owner_approves_from_the_chat_and_the_command_runs(registry, home, fake, tmp_path):
    ran = tmp_path / "ran"
    fake.script(tool_answer(guarded(ran)), text_answer("done"))
    async with running_router(registry, home, fake, CONFIG) as h:
        asked = await h.send("alice", "drop it")
        await h.router.approval_waits.until_begun(1)
        ((request_id, state, *_),) = await requests(h)
        assert state == "pending" and not ran.exists()
        ((chat, text, buttons),) = await prompts(h)
        assert chat == "dm-alice" and request_id in text
        assert f"```\necho DROP TABLE t; touch {ran}\n```" in text  # shown as it is
        assert "Alice (telegram alice)" in text and f"in {home.workspace}" in text
        assert json.loads(buttons) == [
            ["Approve", f"/approve {request_id}"],
            ["Always for this session", f"/approve {request_id} always"],
            ["Deny", f"/deny {request_id}"],
        ]
        refused = await h.ask("bob", f"/approve {request_id}")
        assert refused.text == "Only an owner can approve."
        assert (await requests(h))[0][1] == "pending"
        approved = await h.ask("alice", f"/approve {request_id}")
        assert approved.text.startswith(f"Approved ({request_id})")
        assert (await h.answer_to(asked)).text == "done"
        assert ran.exists()
        late = await h.ask("alice", f"/deny {request_id}")
        assert "was approved by telegram alice (Alice)" in late.text
    (result,) = tool_results(fake)
    assert result["exit_code"] == 0 and "DROP TABLE t" in result["output"]
    ((_, state, by, always, *_),) = await requests(h)
    assert (state, by, always) == ("approved", "telegram alice (Alice)", 0)


async def test_a_deny_and_an_expiry_tell_the_model_and_run_nothing(registry, home, fake, tmp_path):
    ran = tmp_path / "ran"
    short = attrs.evolve(CONFIG, agent=AgentConfig(approval_timeout=0.5))
    fake.script(
        tool_answer(guarded(ran)), text_answer("denied then"),
        tool_answer(guarded(ran)), text_answer("expired then"),
    )  # fmt: skip
    async with running_router(registry, home, fake, short) as h:
        first = await h.send("alice", "drop it")
        await h.router.approval_waits.until_begun(1)
        ((request_id, *_),) = await requests(h)
        assert (await h.ask("alice", "/deny")).text.startswith(f"Denied ({request_id})")
        assert (await h.answer_to(first)).text == "denied then"
        assert (await h.ask("alice", "drop it again")).text == "expired then"
        denied_id, expired_id = [r[0] for r in await requests(h)]
        told = await h.ask("alice", f"/approve {expired_id}")
        assert told.text == f"request {expired_id} was expired; nothing changed."
        # No outbox runs here: the prompt of the request that ended undecided is taken
        # back; the one an owner answered stays.
        assert [denied_id in text for _, text, _ in await prompts(h)] == [True]
    denied, expired = tool_results(fake)
    assert denied["status"] == "denied" and "denied it" in denied["error"]
    assert expired["status"] == "expired" and "expired" in expired["error"]
    assert [r[1] for r in await requests(h)] == ["denied", "expired"]
    assert not ran.exists()


async def test_always_for_this_session_asks_once_for_that_command(registry, home, fake, tmp_path):
    ran, other = tmp_path / "ran", tmp_path / "other"
    elsewhere = {"command": f"mkdir -p {tmp_path}/elsewhere && cd {tmp_path}/elsewhere"}
    fake.script(
        tool_answer(guarded(ran)), text_answer("one"),
        tool_answer(guarded(ran)), text_answer("two"),
        tool_answer(("terminal", elsewhere)), tool_answer(guarded(ran)), text_answer("no"),
        tool_answer(guarded(other, "DATABASE")), text_answer("three"),
    )  # fmt: skip
    async with running_router(registry, home, fake, CONFIG) as h:
        await h.send("alice", "drop it")
        await h.router.approval_waits.until_begun(1)
        ((request_id, *_),) = await requests(h)
        await h.ask("alice", f"/approve {request_id} always")
        await h.replies.wait_for(lambda: any(a.text == "one" for a in h.replies.answers))
        assert (await h.ask("alice", "again")).text == "two"  # no prompt, no wait
        moved = await h.send("alice", "the same, from elsewhere")
        await h.router.approval_waits.until_begun(2)  # another directory: asked again
        await h.ask("alice", "/deny")
        await h.final(moved)
        third = await h.send("alice", "something else")
        await h.router.approval_waits.until_begun(3)
        rows = await requests(h)
        assert [(r[1], r[3]) for r in rows] == [
            ("approved", 1), ("approved", 0), ("denied", 0), ("pending", 0)
        ]  # fmt: skip
        assert rows[1][2] == "always for this session (telegram alice (Alice))"
        assert len(await prompts(h)) == 3  # all but the one "always" let through
        await h.ask("alice", "/stop")
        assert (await h.final(third)).kind == "interrupted"
    assert ran.exists() and not other.exists()
    assert [r[1] for r in await requests(h)][-1] == "cancelled"


async def test_a_users_request_goes_to_the_owners_dm_and_stop_cancels_it(
    registry, home, fake, tmp_path, require_system
):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))  # a user's shell is sandboxed
    ran = tmp_path / "ran"
    tools = default_tools()
    shell = Permissions.build(ToolsConfig(user=("terminal",)), tools)
    agent = Agent(ProviderChain([OpenAICompatible("f", "m", fake.url, "k")]), tools,
                  permissions=shell)  # fmt: skip
    fake.script(text_answer("hi alice"), tool_answer(guarded(ran)))
    async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
        assert (await h.ask("alice", "hello")).text == "hi alice"  # her DM session
        asked = await h.send("bob", "drop it")
        await h.router.approval_waits.until_begun(1)
        ((chat, text, _),) = await prompts(h)
        assert chat == "dm-alice" and "Bob (telegram bob)" in text
        assert (await h.ask("bob", "/stop")).text == "Stopped the running turn."
        assert (await h.final(asked)).kind == "interrupted"
    ((_, state, by, *_),) = await requests(h)
    assert (state, by) == ("cancelled", "the turn was stopped")
    assert not ran.exists()


async def test_a_drain_cancels_the_wait_and_the_turn_finishes(registry, home, fake, tmp_path):
    ran = tmp_path / "ran"
    fake.script(tool_answer(guarded(ran)), text_answer("ok, not now"))
    async with running_router(registry, home, fake, CONFIG) as h:
        asked = await h.send("alice", "drop it")
        await h.router.approval_waits.until_begun(1)
        h.router.request_drain(trio.current_time() + 10)
        assert (await h.answer_to(asked)).text == "ok, not now"
    ((_, state, by, *_),) = await requests(h)
    assert (state, by) == ("cancelled", "hermes is shutting down")
    (result,) = tool_results(fake)
    assert result["status"] == "cancelled" and not ran.exists()


@pytest.mark.timeout(60)
async def test_a_crash_while_waiting_expires_the_request_and_the_resumed_turn_says_so(
    registry, home, fake, tmp_path
):
    ran = tmp_path / "ran"
    fake.script(tool_answer(guarded(ran)))
    async with running_router(registry, home, fake, CONFIG) as h:
        asked = await h.send("alice", "drop it")
        await h.router.approval_waits.until_begun(1)
        ((request_id, *_),) = await requests(h)
        h.crash()
        await h.stopped.wait()
        # A cancel lets the wait mark it cancelled; a killed process writes nothing.
        h.cli_write(lambda conn: conn.execute(
            "UPDATE approvals SET state = 'pending', decided_by = NULL, decided_at = NULL"
        ))  # fmt: skip
    async with running_router(registry, home, fake, CONFIG, owner=new_owner()) as h:
        told = await h.answer_to(asked)
        assert "waited for an owner's approval; the request expired" in told.text
        late = await h.ask("alice", f"/approve {request_id}")
        assert f"request {request_id} was expired by {RESTARTED}" in late.text
    assert not ran.exists() and len(fake.requests) == 1


async def test_only_an_owner_of_the_requests_platform_decides(registry, home, fake, tmp_path):
    """An owner elsewhere (Slack's) is no owner here; `/approve` without an ID takes only
    the request whose prompt is in this chat."""
    ran = tmp_path / "ran"
    two = Config(platforms={
        **CONFIG.platforms, "slack": PlatformConfig(allowed_users=("sam",), owner="sam")
    })  # fmt: skip
    fake.script(tool_answer(guarded(ran)), text_answer("done"))
    async with running_router(registry, home, fake, two) as h:
        asked = await h.send("alice", "drop it")
        await h.router.approval_waits.until_begun(1)
        ((request_id, *_),) = await requests(h)
        sam = await h.ask("sam", f"/approve {request_id}", platform="slack")
        assert sam.text == "Only an owner can approve."
        elsewhere = await h.ask("bob", "/approve")  # in his own DM
        assert elsewhere.text == "Nothing waits for approval here."
        assert (await requests(h))[0][1] == "pending"
        assert (await h.ask("alice", "/approve")).text.startswith(f"Approved ({request_id})")
        assert (await h.answer_to(asked)).text == "done"
    assert ran.exists()


async def test_a_router_restarted_after_a_drain_still_asks(registry, home, fake, tmp_path):
    """serve keeps one ApprovalWaits across a router's restart (rest_for_one): the
    drain of the old router must not cancel the new one's requests."""
    waits = ApprovalWaits()
    fake.script(text_answer("first"), tool_answer(guarded(tmp_path / "ran")),
                text_answer("denied"))  # fmt: skip
    async with running_router(registry, home, fake, CONFIG, approval_waits=waits) as h:
        assert (await h.ask("alice", "hello")).text == "first"
    assert waits.draining  # the way out drained it
    async with running_router(registry, home, fake, CONFIG, approval_waits=waits) as h:
        asked = await h.send("alice", "drop it")
        await waits.until_begun(1)
        await h.ask("alice", "/deny")
        assert (await h.answer_to(asked)).text == "denied"
    assert [r[1] for r in await requests(h)] == ["denied"]
