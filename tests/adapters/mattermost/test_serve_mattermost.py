"""Mattermost end to end: one `hermes serve` process for the module (each test talks in
chats of its own), the fake Mattermost, the fake model. The WebSocket replays nothing,
so what was posted while hermes was away (the socket dropped, a seq skipped, serve
stopped) comes by the catch-up, and is answered once even when the socket brings it
too."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import httpx
import pytest

from hermes.home import HermesHome
from tests.adapters.mattermost.serving import MattermostServe
from tests.adapters.serving import in_thread
from tests.conftest import end_leftover_processes
from tests.fakes.mattermost import BOT_NAME, TOWN, FakeMattermost
from tests.fakes.openai import FakeOpenAI, text_answer, tool_answer
from tests.seed import rows

pytestmark = pytest.mark.timeout(60)
OWNER = "ann"


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[MattermostServe, FakeMattermost, FakeOpenAI]]:
    """Serve on a home of the module's own, started once (a test that stops it starts it
    again)."""
    home = HermesHome(tmp_path_factory.mktemp("mm") / "hermes-home").ensure()
    with FakeMattermost() as fake, FakeOpenAI() as model:
        serve = MattermostServe(home, fake, model)
        serve.configure(access=f"    allow_all_users: true\n    group_policy: open\n"
                               f"    owner: '{OWNER}'\n")  # fmt: skip
        try:
            serve.start()
            fake.wait_authenticated(1)
            yield serve, fake, model
            serve.stop()
        finally:
            serve.close()
    end_leftover_processes()


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """The module's serve outlives each test: `shared` runs tests/conftest.py's check
    once the module is done and serve stopped, not after each test."""
    yield


@pytest.fixture
def mm(shared):
    return shared


async def sent_in(fake: FakeMattermost, channel: str, count: int) -> list[dict]:
    """The bot's posts in `channel`, once there are `count`."""
    return await in_thread(functools.partial(fake.wait_sent, count, 30.0, channel=channel))


def answers_in(fake: FakeMattermost, channel: str) -> list[str]:
    return [s["message"] for s in fake.sent_to(channel)]


async def test_a_dm_is_answered_in_the_dm(mm):
    serve, fake, model = mm
    model.script(text_answer("hi **there** @all"))
    fake.message("hello", user="dee")
    [sent] = await sent_in(fake, "dm-dee", 1)
    assert sent["root_id"] == "" and sent["message"] == "hi **there** @\u200ball"


async def test_a_mention_in_a_channel_is_answered_in_its_thread_and_chatter_is_not(mm):
    serve, fake, model = mm
    model.script(text_answer("at your service"))
    fake.message("just chatting", user="eve", channel="lounge", kind="O")
    asked = fake.message("can you help?", user="eve", channel="lounge", kind="O", mention=True)
    [sent] = await sent_in(fake, "lounge", 1)
    assert sent["root_id"] == asked and sent["message"] == "at your service"
    assert f"@{BOT_NAME}" not in model.requests[-1]["body"]["messages"][-1]["content"]
    assert answers_in(fake, "lounge") == ["at your service"]


async def test_a_thread_continues_its_session(mm):
    serve, fake, model = mm
    model.script(text_answer("first"), text_answer("second"))
    root = fake.message("start a thread", user="fay", channel="dm-fay")
    fake.message("my name is Fay", user="fay", root_id=root)
    await sent_in(fake, "dm-fay", 2)
    fake.message("what is my name?", user="fay", root_id=root)
    await sent_in(fake, "dm-fay", 3)
    [asked] = [r for r in model.requests if "what is my name?" in str(r["body"]["messages"])]
    said = [m.get("content") for m in asked["body"]["messages"]]
    assert "my name is Fay" in said and "start a thread" not in said, said
    # the DM's and the thread's sessions answer in either order
    assert sorted(s["root_id"] for s in fake.sent_to("dm-fay")) == ["", root, root]


async def test_posts_missed_while_the_socket_was_down_or_skipped_are_answered_once(mm):
    serve, fake, model = mm
    model.script(*[text_answer(f"seen {n}") for n in range(4)])
    sockets = len(fake.sockets)
    fake.drop(then="while away", user="gus")  # before a socket opens: only the catch-up
    fake.message("by both", user="hal", again=True)  # and the next socket pushes it too
    await sent_in(fake, "dm-gus", 1)
    await sent_in(fake, "dm-hal", 1)
    fake.message("lost on the wire", user="ida", lost=True)  # its seq skipped
    fake.message("after the gap", user="ivy")
    await sent_in(fake, "dm-ida", 1)
    await sent_in(fake, "dm-ivy", 1)
    await serve.until_journal("answered", len(model.requests))
    assert len(fake.sockets) >= sockets + 2  # the drop, then the gap
    for user in ("gus", "hal", "ida", "ivy"):
        assert len(fake.sent_to(f"dm-{user}")) == 1


async def test_posts_taken_no_later_than_an_admitted_one_and_committed_after_are_answered(mm):
    """`create_at` is when the server took a post: one of the same millisecond as an
    admitted post, or of a moment before it, may be committed after it. The catch-up
    starts a margin before the last admitted post; what it brings again is answered once."""
    serve, fake, model = mm
    model.script(*[text_answer(f"got {n}") for n in range(4)])
    asked = len(model.requests)
    first = fake.message("first", user="lia")
    await sent_in(fake, "dm-lia", 1)
    at = fake.created_at(first)
    fake.drop(then="same millisecond", user="lia", at=at)  # only the catch-up has these
    await sent_in(fake, "dm-lia", 2)
    fake.drop(then="a moment before", user="max", at=at - 1000)
    await sent_in(fake, "dm-max", 1)
    assert any(c["channel"] == "dm-lia" and c["since"] < at for c in fake.catchups)
    fake.message("after", user="lia")  # read once the catch-ups were admitted
    await sent_in(fake, "dm-lia", 3)
    assert len(fake.sent_to("dm-lia")) == 3 and len(fake.sent_to("dm-max")) == 1
    assert len(model.requests) == asked + 4  # what came again started no turn


async def test_posts_made_while_serve_was_stopped_are_answered_once_after(mm):
    serve, fake, model = mm
    serve.stop()
    model.script(text_answer("back for you"), text_answer("and you"))
    asked = len(model.requests)
    fake.message("are you up?", user="jon")
    fake.message("hello?", user="kim", channel=TOWN, kind="O", mention=True)
    serve.start()
    await sent_in(fake, "dm-jon", 1)
    await sent_in(fake, TOWN, 1)
    # the catch-up brought again what the module's earlier tests posted in its margin:
    # the journal knew each (a write that changes nothing), and no turn started
    journal = serve.journal()
    await serve.until_journal("answered", sum(state != "refused" for *_, state in journal))
    assert len(model.requests) == asked + 2


async def test_a_file_is_sent_as_an_upload_then_a_post(mm):
    serve, fake, model = mm
    model.script(
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "here it is"})),
        text_answer("Sent."),
    )
    fake.message("send me the chart", user=OWNER)
    await sent_in(fake, f"dm-{OWNER}", 2)
    [upload] = fake.uploads
    assert upload["name"].endswith("chart.txt") and upload["size"] == len(b"the chart")
    with_file = [s for s in fake.sent_to(f"dm-{OWNER}") if s["file_ids"]]
    assert with_file[0]["file_ids"] == [upload["id"]] and with_file[0]["message"] == "here it is"


async def test_a_forged_press_is_refused_and_costs_nothing(mm):
    """Anyone who reaches the listener can post a press; only one whose token is ours over
    its command and chat is admitted."""
    serve, fake, model = mm
    port = int((serve.home.root / "webhooks.port").read_text())
    context = {"command": "/approve x", "root": "", "kind": "dm", "token": "0" * 64}
    press = {"user_id": OWNER, "channel_id": f"dm-{OWNER}", "post_id": "p1", "context": context}
    before = rows(serve.home.state_db, "SELECT count(*) FROM inbound_journal")
    url = f"http://127.0.0.1:{port}/webhooks/mattermost/actions"
    async with httpx.AsyncClient() as http:
        assert (await http.post(url, json=press)).status_code == 403
        assert (await http.post(url, content=b"not json")).status_code == 403
    assert rows(serve.home.state_db, "SELECT count(*) FROM inbound_journal") == before
