"""How people write, through the router: a burst is one turn, a message mid-turn
interrupts, queues or steers, groups answer when spoken to, two bots stop, and one person
links accounts on two platforms. Every admitted message ends answered or with a reason:
its journal row is closed, and what its sender was told is asserted."""

from __future__ import annotations

import attrs
import trio
import trio.testing
from prometheus_client import REGISTRY

from hermes.adapters.contract import StepKind
from hermes.adapters.settings import GatewayConfig, GroupsConfig, PlatformConfig
from hermes.gateway.flow_commands import ONLY_IN_A_DM
from hermes.gateway.session_actor import STEERED
from hermes.gateway.settings import Config
from hermes.state.db import Db
from hermes.state.identities import list_identities
from tests.fakes.openai import stream_answer, text_answer, tool_answer
from tests.gateway.router_harness import running_router

PEOPLE = Config(
    platforms={
        "telegram": PlatformConfig(
            allowed_users=("alice", "bob", "other-bot"), owner="alice", allowed_chats=("g1",)
        ),  # fmt: skip
        "slack": PlatformConfig(allowed_users=("alice-s", "bob-s")),
    }
)
WINDOW = 3.0  # real seconds: the parts below go in well within it, however busy the machine


async def rows(registry, home) -> dict[str, str]:
    """Each journal row's state, by event id."""
    async with Db(registry, home.state_db) as db:
        found = await db.read(
            lambda c: c.execute("SELECT event_id, state FROM inbound_journal").fetchall()
        )
    return dict(found)


async def joined(registry, home) -> dict[str, tuple[str, int]]:
    """The events another's turn answers: its lead, and whether they steered it."""
    async with Db(registry, home.state_db) as db:
        found = await db.read(lambda c: c.execute(
            "SELECT event_id, answered_by, steered FROM inbound_journal"
            " WHERE answered_by IS NOT NULL").fetchall())  # fmt: skip
    return {event_id: (lead, steered) for event_id, lead, steered in found}


def prompts(fake) -> list[list[dict]]:
    return [r["body"]["messages"] for r in fake.requests]


# -- bursts -----------------------------------------------------------------------------


async def test_a_paste_in_three_parts_is_one_turn_answered_once(registry, home, fake):
    lines = [f"line {i:04d} " + "x" * 80 for i in range(100)]  # about 9,000 characters
    paste = "\n".join(lines)
    parts = ["\n".join(lines[:45]), "\n".join(lines[45:90]), "\n".join(lines[90:])]
    fake.script(text_answer("read it all"))
    async with running_router(registry, home, fake, PEOPLE, merge_window=WINDOW) as h:
        sent = [await h.send("alice", text) for text in parts]
        done = await h.final(sent[-1])
        await h.settle()
    assert done.kind == "done" and done.text == "read it all"
    assert len(fake.requests) == 1
    assert prompts(fake)[0][-1]["content"] == paste
    assert [a.text for a in h.replies.answers] == ["read it all"]  # once, to the last part
    assert set((await rows(registry, home)).values()) == {"answered"}
    lead = f"telegram:{sent[-1].event_id}"  # a restart would resume the parts as one turn
    assert await joined(registry, home) == {e.event_id: (lead, 0) for e in sent[:-1]}


async def test_a_command_inside_a_burst_runs_on_its_own(registry, home, fake):
    fake.script(text_answer("both parts"))
    async with running_router(registry, home, fake, PEOPLE, merge_window=WINDOW) as h:
        first = await h.send("alice", "first part")
        status = await h.ask("alice", "/status")  # answered at once, the burst still waits
        assert "idle" in status.text and not fake.requests
        last = await h.send("alice", "second part")
        assert (await h.final(last)).text == "both parts"
        await h.settle()
    assert prompts(fake)[0][-1]["content"] == "first part\nsecond part"
    assert h.replies.answers_to(first) == []  # answered by the turn it joined
    assert set((await rows(registry, home)).values()) == {"answered"}


async def test_merge_window_zero_is_a_turn_a_message(registry, home, fake):
    fake.script(text_answer("one"), text_answer("two"))
    async with running_router(registry, home, fake, PEOPLE) as h:
        assert (await h.ask("alice", "first")).text == "one"
        assert (await h.ask("alice", "second")).text == "two"
    assert [p[-1]["content"] for p in prompts(fake)] == ["first", "second"]


async def test_a_crash_inside_the_window_loses_no_part_and_answers_none_twice(registry, home, fake):
    fake.script(text_answer("A1"), text_answer("A2"))
    async with running_router(registry, home, fake, PEOPLE, merge_window=60) as h:
        parts = [await h.send("alice", "part one"), await h.send("alice", "part two")]
        await h.routed()
        assert len(h.router.bursts.waiting) == 1 and not fake.requests
        h.crash()  # no drain, no flush: the parts are claimed and never answered
    assert set((await rows(registry, home)).values()) == {"started"}
    async with running_router(registry, home, fake, PEOPLE, merge_window=60) as h:
        answers = [await h.answer_to(part) for part in parts]
        await h.settle()
    assert [a.text for a in answers] == ["(answered after hermes restarted) A1",
                                         "(answered after hermes restarted) A2"]  # fmt: skip
    assert [p[-1]["content"] for p in prompts(fake)] == ["part one", "part two"]
    assert set((await rows(registry, home)).values()) == {"answered"}


# -- busy chats ---------------------------------------------------------------------------


def blocking_tool(gate: trio.Path) -> tuple[str, dict]:
    """A terminal call that runs until the test lets it end (the file exists)."""
    return ("terminal", {"command": f"while [ ! -e {gate} ]; do sleep 0.02; done; echo done"})


async def test_steer_adds_the_message_before_the_next_model_call(registry, home, fake, tmp_path):
    gate = trio.Path(tmp_path / "go")
    fake.script(tool_answer(blocking_tool(gate)), text_answer("metric it is"))
    config = attrs.evolve(PEOPLE, gateway=GatewayConfig(busy="steer"))
    async with running_router(registry, home, fake, config) as h:
        first = await h.send("alice", "convert 5 miles")
        await h.first_step(first, "tool_call")
        steer = await h.send("alice", "in kilometres please")
        await h.routed()
        await trio.testing.wait_all_tasks_blocked(0.05)  # the steer waits in the session
        await gate.touch()
        assert (await h.final(first)).text == "metric it is"
        assert (await h.final(steer)).kind == StepKind.DONE
        await h.settle()
    assert len(fake.requests) == 2
    second = prompts(fake)[1]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == "in kilometres please"
    assert [a.text for a in h.replies.answers_to(first)] == ["metric it is"]
    assert [a.text for a in h.replies.answers_to(steer)] == [STEERED]
    assert set((await rows(registry, home)).values()) == {"answered"}
    assert await joined(registry, home) == {steer.event_id: (f"telegram:{first.event_id}", 1)}


async def test_queue_runs_after_and_interrupt_stops_the_running_turn(registry, home, fake):
    long = stream_answer([f"w{i} " for i in range(40)], pause=0.03)
    fake.script(long, text_answer("after"), long, text_answer("instead"))
    async with running_router(registry, home, fake, PEOPLE) as h:
        assert "busy: interrupt" in (await h.ask("alice", "/busy")).text
        assert "busy: queue" in (await h.ask("alice", "/busy queue")).text
        first = await h.send("alice", "tell me a story")
        await h.first_step(first)
        queued = await h.send("alice", "and then?")
        assert (await h.final(first)).kind == StepKind.DONE  # not interrupted
        assert (await h.answer_to(queued)).text == "after"
        await h.ask("alice", "/busy interrupt")
        again = await h.send("alice", "another story")
        await h.first_step(again)
        cut = await h.send("alice", "no, stop that")
        assert (await h.final(again)).kind == StepKind.INTERRUPTED
        assert (await h.answer_to(cut)).text == "instead"
    assert [p[-1]["content"] for p in prompts(fake)] == [
        "tell me a story", "and then?", "another story", "no, stop that",
    ]  # fmt: skip


async def test_queue_and_steer_once_whatever_the_mode(registry, home, fake, tmp_path):
    gate = trio.Path(tmp_path / "go")
    fake.script(tool_answer(blocking_tool(gate)), text_answer("steered"), text_answer("queued"))
    async with running_router(registry, home, fake, PEOPLE) as h:  # interrupt mode
        first = await h.send("alice", "start")
        await h.first_step(first, "tool_call")
        later = await h.send("alice", "/queue then this")
        now = await h.send("alice", "/steer and this")
        await h.routed()
        await trio.testing.wait_all_tasks_blocked(0.05)
        await gate.touch()
        assert (await h.final(first)).text == "steered"
        assert (await h.answer_to(later)).text == "queued"
        await h.final(now)
    assert prompts(fake)[1][-1]["content"] == "and this"
    assert prompts(fake)[2][-1]["content"] == "then this"


# -- groups ---------------------------------------------------------------------------


async def test_a_group_answers_a_mention_and_a_reply_not_chatter(registry, home, fake):
    fake.script(text_answer("to the mention"), text_answer("to the reply"))
    async with running_router(registry, home, fake, PEOPLE) as h:
        chatter = await h.send("bob", "lunch?", group="g1")
        mention = await h.send("bob", "@bot what's for lunch?", group="g1", mentioned=True)
        assert (await h.answer_to(mention)).text == "to the mention"
        reply = await h.send("alice", "and dessert?", group="g1", replied=True)
        assert (await h.answer_to(reply)).text == "to the reply"
        await h.settle()
    assert h.replies.answers_to(chatter) == [] and len(fake.requests) == 2
    assert (await rows(registry, home))[chatter.event_id] == "refused"


async def test_two_bots_stop_after_bot_turns_and_a_person_starts_the_count_again(
    registry, home, fake
):
    groups = GroupsConfig(activation="always", bots="answer", bot_turns=2)
    team = attrs.evolve(PEOPLE.platforms["telegram"], groups=groups)
    config = attrs.evolve(PEOPLE, platforms={"telegram": team})
    fake.default = text_answer("beep")
    async with running_router(registry, home, fake, config) as h:
        bot = []
        for i in range(3):  # two bots take turns: each answer goes to the other bot
            bot.append(await h.send("other-bot", f"beep {i}", group="g1", is_bot=True))
            await h.final(bot[-1])
        assert [len(h.replies.answers_to(sent)) for sent in bot] == [1, 1, 0]
        assert (await h.final(bot[2])).kind == StepKind.REFUSED
        await h.ask("bob", "hush", group="g1")  # a person: the count starts again
        await h.answer_to(await h.send("other-bot", "beep again", group="g1", is_bot=True))
        stranger = await h.send("stranger-bot", "beep", group="g1", is_bot=True)
        await h.final(stranger)
    assert len(fake.requests) == 4  # two bot turns, bob's, and one after him
    assert h.replies.answers_to(bot[2]) == [] and h.replies.answers_to(stranger) == []


# -- one person, two platforms ---------------------------------------------------------


async def test_linked_accounts_share_a_conversation_and_an_unlinked_one_cannot(
    registry, home, fake
):
    note = {"action": "add", "target": "user", "text": "Bob's boat is blue"}
    fake.script(tool_answer(("memory", note)), text_answer("noted on telegram"),
                text_answer("continued on slack"))  # fmt: skip
    async with running_router(registry, home, fake, PEOPLE) as h:
        await h.ask("bob", "remember: the boat is blue")  # bob on telegram (a user)
        offer = (await h.ask("bob", "/link")).text
        code = offer.split("Your link code: ", 1)[1].split(".", 1)[0]
        wrong = await h.ask("bob-s", "/link ZZZZZZZZ", platform="slack")
        assert "wrong or has expired" in wrong.text
        stranger = await h.send("mallory", f"/link {code}", platform="slack")
        await h.final(stranger)
        assert h.replies.answers_to(stranger) == []  # refused: not allowed there
        linked = await h.ask("bob-s", f"/link {code}", platform="slack")
        assert linked.text.startswith("Linked: ") and "telegram bob" in linked.text
        assert "slack bob-s" in linked.text
        cont = await h.ask("bob-s", "/continue", platform="slack")
        assert "Continuing your conversation from telegram" in cont.text
        answer = await h.ask("bob-s", "what colour is the boat?", platform="slack")
        assert answer.text == "continued on slack" and answer.target.platform == "slack"
        again = await h.ask("bob-s", f"/link {code}", platform="slack")
        assert "wrong or has expired" in again.text  # one-time
    on_slack = prompts(fake)[2]
    seen = [m["content"] for m in on_slack if m["role"] == "user"]
    assert seen == ["remember: the boat is blue", "what colour is the boat?"]
    assert "Bob's boat is blue" in on_slack[0]["content"]  # the memory the two share
    async with Db(registry, home.state_db) as db:
        people = await db.read(list_identities)
    assert sorted((i.platform, i.user_id) for i in people) == [("slack", "bob-s"),
                                                                ("telegram", "bob")]  # fmt: skip


async def test_in_a_shared_chat_only_the_turns_own_sender_steers_it(registry, home, fake, tmp_path):
    gate = trio.Path(tmp_path / "go")
    fake.script(tool_answer(blocking_tool(gate)), text_answer("owner's"), text_answer("bob's"))
    shared = attrs.evolve(
        PEOPLE.platforms["telegram"], groups=GroupsConfig("always", "shared"), busy="steer"
    )
    async with running_router(registry, home, fake, Config(platforms={"telegram": shared})) as h:
        first = await h.send("alice", "check the servers", group="g1")
        await h.first_step(first, "tool_call")
        bobs = await h.send("bob", "and delete the logs", group="g1")
        await h.routed()
        await trio.testing.wait_all_tasks_blocked(0.05)
        await gate.touch()
        assert (await h.final(first)).text == "owner's"
        assert (await h.answer_to(bobs)).text == "bob's"  # a turn of his own, after
    assert "and delete the logs" not in str(prompts(fake)[1])
    assert prompts(fake)[2][-1]["content"] == "and delete the logs"


async def test_stop_drops_a_burst_that_waits_and_says_so_once(registry, home, fake):
    async with running_router(registry, home, fake, PEOPLE, merge_window=60) as h:
        parts = [await h.send("alice", "one"), await h.send("alice", "two")]
        await h.routed()
        assert (await h.ask("alice", "/stop")).text == "Nothing is running."
        await h.settle()
    assert [a.text for a in h.replies.answers if a.source in parts] == [
        "stopped with /stop before it began"
    ]
    assert not fake.requests and set((await rows(registry, home)).values()) == {"answered"}


async def test_the_merge_window_is_not_counted_as_hermess_overhead(registry, home, fake):
    def sample(part: str) -> float:
        return REGISTRY.get_sample_value(f"hermes_turn_overhead_seconds_{part}") or 0.0

    count, total = sample("count"), sample("sum")
    fake.script(text_answer("after the window"))
    async with running_router(registry, home, fake, PEOPLE, merge_window=1.0) as h:
        start = trio.current_time()
        assert (await h.ask("alice", "a lone message")).text == "after the window"
        took = trio.current_time() - start
        await h.settle()
    assert took >= 1.0  # it waited the window, and no longer than a turn takes ...
    assert sample("count") == count + 1
    assert sample("sum") - total < took - 0.95  # ... and the wait is not hermes's


async def test_shared_chats_keep_continue_and_busy_for_their_owners(registry, home, fake):
    shared = attrs.evolve(PEOPLE.platforms["telegram"], groups=GroupsConfig("always", "shared"))
    config = attrs.evolve(PEOPLE, platforms={**PEOPLE.platforms, "telegram": shared})
    async with running_router(registry, home, fake, config) as h:
        busy = await h.ask("bob", "/busy steer", group="g1")
        assert busy.text.startswith("Only an owner can use /busy here")
        cont = await h.ask("alice", "/continue", group="g1")
        assert cont.text.startswith("This chat is one conversation for everyone in it")
        code = (await h.ask("bob", "/link")).text.split("Your link code: ", 1)[1][:8]
        in_group = await h.ask("bob", f"/link {code}", group="g1")
        assert in_group.text == ONLY_IN_A_DM
    async with Db(registry, home.state_db) as db:
        assert await db.read(list_identities) == []


async def test_an_unlinked_chat_goes_back_to_its_own_conversation(registry, home, fake):
    fake.default = text_answer("ok")
    async with running_router(registry, home, fake, PEOPLE) as h:
        await h.ask("bob", "on telegram")
        code = (await h.ask("bob", "/link")).text.split("Your link code: ", 1)[1][:8]
        await h.ask("bob-s", f"/link {code}", platform="slack")
        await h.ask("bob-s", "/continue", platform="slack")
        attached = await h.final(await h.send("bob-s", "still here?", platform="slack"))
        assert (await h.ask("bob-s", "/unlink", platform="slack")).text.startswith("This acc")
        own = await h.final(await h.send("bob-s", "and now?", platform="slack"))
        tg = await h.final(await h.send("bob", "telegram again"))
    assert attached.session_id == tg.session_id != own.session_id


async def test_in_a_shared_chat_another_never_interrupts_nor_loses_a_place(registry, home, fake):
    long = stream_answer([f"w{i} " for i in range(40)], pause=0.03)
    fake.script(long, text_answer("ok"), long)
    fake.default = text_answer("ok")
    shared = attrs.evolve(PEOPLE.platforms["telegram"], groups=GroupsConfig("always", "shared"))
    async with running_router(registry, home, fake, Config(platforms={"telegram": shared})) as h:
        first = await h.send("alice", "a long story", group="g1")
        await h.first_step(first)
        bob = await h.send("bob", "bob one", group="g1")  # waits: alice's turn goes on
        assert (await h.final(first)).kind == StepKind.DONE
        assert (await h.answer_to(bob)).text == "ok"
        second = await h.send("alice", "a long story again", group="g1")
        await h.first_step(second)
        bob = await h.send("bob", "bob two", group="g1")
        instead = await h.send("alice", "no, this", group="g1")  # cuts only her own turn
        assert (await h.final(second)).kind == StepKind.INTERRUPTED
        assert (await h.answer_to(bob)).text == "ok"  # his place kept
        assert (await h.answer_to(instead)).text == "ok"
    asked = [p[-1]["content"] for p in prompts(fake)]
    assert asked == ["a long story", "bob one", "a long story again", "bob two", "no, this"]
