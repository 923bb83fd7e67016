"""The browser tools with Debian's Chromium against pages served on 127.0.0.2 (allowed
through `web.allow_private`): a page JavaScript writes, a form filled and sent, a link
followed; every request to loopback (127.0.0.1, `localhost`) and to the metadata address
refused and listed; two sessions' cookies apart; the profile gone after close; a cut call
closing its browser; a screenshot reaching a multimodal model as an image part; a download
saved into the session's directory, and one past the media cap cancelled and deleted; an
idle browser closed after `browser.idle_seconds` (on a stopped virtual clock); a user's
Chromium running inside the sandbox (its own network namespace, no HERMES_HOME)."""

from __future__ import annotations

import base64
import json
import os

import attrs
import pytest
import trio

from hermes.agent.browser.browsers import DOWNLOADS, PROFILE, Browsers
from hermes.agent.browser.settings import BrowserConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.permissions import Caller
from hermes.agent.providers import USERS_BROWSE, build_agent
from hermes.agent.settings import AgentConfig, ToolsConfig
from hermes.agent.tools.base import SessionFiles, ToolError
from hermes.agent.tools.browser import browser_tools
from hermes.agent.tools.catalog import default_tools
from hermes.config import Secrets
from hermes.gateway.settings import Config
from hermes.state.messages import SHOWN
from hermes.terminal.addresses import AllowList
from hermes.terminal.placement import backends_for
from hermes.terminal.session import TerminalSession
from hermes.terminal.settings import TerminalConfig
from hermes.terminal.tree import ProcessId, descendant_pids
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.pages import FakePages

CHROMIUM = "/usr/bin/chromium"
SITE = "127.0.0.2"  # the test's site, allowed; 127.0.0.1 stays refused
MAX_DOWNLOAD = 2**20  # media.max_file_mb: 1


@pytest.fixture
def chromium(require_system):
    require_system(CHROMIUM, packages=("chromium",))


@pytest.fixture
def pages():
    with FakePages(SITE) as fake:
        yield fake
    assert fake.internal_errors == []


@pytest.fixture
async def browsers(chromium):
    running = Browsers(BrowserConfig(max=2), AllowList.parse([SITE]), MAX_DOWNLOAD)
    async with running.running():
        yield running


def session(ctx, name):
    """The ctx of another session, with its own directory."""
    own = ctx.terminal.workdir / name
    own.mkdir(exist_ok=True)
    terminal = TerminalSession(own, state_dir=own / ".term")
    return attrs.evolve(ctx, session_id=name, terminal=terminal)


async def call(tools, name, ctx, **args):
    return json.loads(await tools[name](args, ctx))


async def test_a_page_written_by_javascript_a_form_and_a_link(ctx, pages, browsers):
    tools = browser_tools(browsers, multimodal=False)
    pages.page("/next", "<title>Next</title><p>followed the link</p>", "text/html")
    pages.page("/sent", "<title>Sent</title><p>thanks</p>", "text/html")
    url = pages.page(
        "/",
        """<title>Shop</title><div id=stock></div><a href="/next">Next page</a>
        <form action="/sent"><input name=q aria-label=Query>
        <select name=size aria-label=Size><option value=s>Small</option>
        <option value=l>Large</option></select></form>
        <script>document.getElementById('stock').textContent = 'In stock: 7 left'</script>""",
        "text/html",
    )
    opened = await call(tools, "browser_open", ctx, url=url)
    assert opened["title"] == "Shop" and ctx.untrusted == f"a page in the browser ({SITE})"
    snap = (await call(tools, "browser_snapshot", ctx))["snapshot"]
    assert 'text "In stock: 7 left"' in snap  # written by the page's script
    refs = {line.split('"')[1]: line.split("]")[0].strip().lstrip("[") for line in
            snap.splitlines() if "[e" in line and '"' in line}  # fmt: skip
    await call(tools, "browser_select", ctx, ref=refs["Size"], value="Large")
    sent = await call(tools, "browser_type", ctx, ref=refs["Query"], text="red shoes", submit=True)
    assert sent["title"] == "Sent"
    assert pages.forms == [("/sent", {"q": "red shoes", "size": "l"})]
    back = await call(tools, "browser_back", ctx)
    assert back["title"] == "Shop"
    snap = (await call(tools, "browser_snapshot", ctx))["snapshot"]
    link = next(line for line in snap.splitlines() if '"Next page"' in line)
    followed = await call(tools, "browser_click", ctx, ref=link.split("]")[0].strip().lstrip("["))
    assert followed["title"] == "Next" and pages.requests[-1] == "/next"
    assert (ctx.terminal.own / PROFILE).is_dir()
    assert await call(tools, "browser_close", ctx) == {"closed": True}
    assert not (ctx.terminal.own / PROFILE).exists()  # the profile goes with it
    with pytest.raises(ToolError, match="cannot see images"):
        await tools["browser_screenshot"]({}, ctx)


async def test_every_way_to_loopback_and_the_metadata_address_is_refused_and_listed(
    ctx, pages, browsers
):
    tools = browser_tools(browsers, multimodal=False)
    port = pages.url.rsplit(":", 1)[1]
    pages.redirect("/away", f"http://127.0.0.1:{port}/inside")
    url = pages.page(
        "/",
        f"""<title>Bait</title>
        <iframe src="http://127.0.0.1:{port}/framed"></iframe>
        <img src="http://169.254.169.254/latest/meta-data/">
        <script>
        fetch('http://localhost:{port}/fetched').catch(() => 0);
        new WebSocket('ws://127.0.0.1:{port}/socket');
        </script>""",
        "text/html",
    )
    seen: list[dict] = (await call(tools, "browser_open", ctx, url=url)).get("refused", [])
    wanted = {
        ("127.0.0.1", "loopback"),
        ("localhost", "loopback"),
        ("169.254.169.254", "link-local (a cloud metadata address)"),
    }
    with trio.fail_after(20):
        while not wanted <= {(r["host"], r["why"].split(" is ")[-1]) for r in seen}:
            seen += (await call(tools, "browser_scroll", ctx)).get("refused", [])
    assert [r["host"] for r in seen].count("127.0.0.1") == 2  # the frame and the WebSocket
    answer = await call(tools, "browser_open", ctx, url=pages.url + "/away")
    assert answer["refused"][0]["host"] == "127.0.0.1"  # the redirect's target
    assert not {"/inside", "/framed", "/fetched", "/socket"} & set(pages.requests)


async def test_two_sessions_keep_their_cookies_apart_and_max_is_kept(ctx, pages, browsers):
    tools = browser_tools(browsers, multimodal=False)
    url = pages.page(
        "/",
        "<title>c</title><p id=c></p><script>document.getElementById('c').textContent ="
        " 'cookies:' + document.cookie; document.cookie = 'who=' + location.hash.slice(1)"
        "</script>",
        "text/html",
    )
    one, two, three = session(ctx, "one"), session(ctx, "two"), session(ctx, "three")
    await call(tools, "browser_open", one, url=url + "#one")
    await call(tools, "browser_open", one, url=url)
    assert 'text "cookies:who=one"' in (await call(tools, "browser_snapshot", one))["snapshot"]
    await call(tools, "browser_open", two, url=url)
    assert 'text "cookies:"' in (await call(tools, "browser_snapshot", two))["snapshot"]
    with pytest.raises(ToolError, match=r"2 browsers are open already \(browser.max\)"):
        await tools["browser_open"]({"url": url}, three)


async def test_two_calls_of_one_reply_share_the_sessions_one_browser(ctx, pages, browsers):
    """A reply's tool calls run at once: the session's first two get one browser, not two
    on one profile."""
    tools = browser_tools(browsers, multimodal=False)
    url = pages.page("/", "<title>one</title><p>hello</p>", "text/html")
    answers = []
    async with trio.open_nursery() as nursery:
        for name, args in (("browser_open", {"url": url}), ("browser_snapshot", {})):
            nursery.start_soon(lambda n=name, a=args: _append(answers, call(tools, n, ctx, **a)))
    assert len(answers) == 2 and browsers.count() == 1
    assert (await call(tools, "browser_snapshot", ctx))["title"] == "one"


async def _append(answers, asked):
    answers.append(await asked)


async def test_a_call_cut_mid_page_closes_its_browser(ctx, pages, browsers):
    """What /stop or a newer message does to a turn: its browser (the whole tree) goes."""
    tools = browser_tools(browsers, multimodal=False)
    slow = pages.hold("/slow")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tools["browser_open"], {"url": slow}, ctx)
        await trio.to_thread.run_sync(pages.wait_until, lambda f: "/slow" in f.requests)
        nursery.cancel_scope.cancel()
    assert browsers.current(ctx.session_id) is None and browsers.count() == 0
    assert not (ctx.terminal.own / PROFILE).exists()


async def test_a_screenshot_reaches_a_multimodal_model_as_an_image_part(
    ctx, pages, browsers, fake, home
):
    files = SessionFiles(home.root, ctx.terminal.own, True, home.cache, home.root, home.root)
    ctx = attrs.evolve(ctx, files=files)
    url = pages.page("/", "<title>Pic</title><h1>hello</h1>", "text/html")
    tools = browser_tools(browsers, multimodal=True)
    agent = Agent(ProviderChain([OpenAICompatible("A", "m", fake.url, None, image_px=512)]),
                  default_tools() | tools, 5)  # fmt: skip
    fake.script(
        tool_answer(("browser_open", {"url": url})),
        tool_answer(("browser_screenshot", {})),
        text_answer("I see it."),
    )
    result = await agent.run_turn(ctx, "look at the page", stream=False)
    assert result.text == "I see it."
    last = fake.requests[2]["body"]["messages"]
    shown = last[-1]
    assert shown["role"] == "user" and shown["content"][0]["text"].startswith(SHOWN)
    image = shown["content"][1]["image_url"]["url"]
    assert image.startswith("data:image/")
    assert base64.b64decode(image.split(",", 1)[1])[:4] in (b"\x89PNG", b"\xff\xd8\xff\xe0")


async def test_a_download_is_saved_in_the_session_directory_and_one_past_the_cap_refused(
    ctx, pages, browsers
):
    tools = browser_tools(browsers, multimodal=False)
    data = b"day,visits\n" + b"monday,7\n" * 500
    small = pages.page(
        "/report",
        data,
        "text/csv",
        headers={"content-disposition": 'attachment; filename="report.csv"'},
    )
    big = pages.page("/big", b"\0" * (3 * MAX_DOWNLOAD), "application/octet-stream",
                     headers={"content-disposition": "attachment; filename=big.iso"})  # fmt: skip
    downloads = ctx.terminal.own / DOWNLOADS

    [saved] = (await call(tools, "browser_open", ctx, url=small))["downloads"]
    assert saved["state"] == "saved" and saved["bytes"] == len(data)
    assert saved["path"] == str(downloads / "report.csv")
    assert (downloads / "report.csv").read_bytes() == data

    [refused] = (await call(tools, "browser_open", ctx, url=big))["downloads"]
    assert refused["file"] == "big.iso" and refused["url"] == big
    assert refused["state"].startswith("refused: over media.max_file_mb (1 MB)")
    with trio.fail_after(10):  # Chromium may write the partial file after its cancel
        while sorted(p.name for p in downloads.iterdir()) != ["report.csv"]:  # noqa: ASYNC110
            await trio.sleep(0.05)
    assert pages.requests.count("/big") == 1


@pytest.fixture
def stopped_clock():
    """A virtual clock that moves only when the test jumps it: Chromium works in real time,
    and no timeout of the CDP client fires while it does."""
    return trio.testing.MockClock()


async def test_an_idle_browser_closes_after_idle_seconds(ctx, pages, chromium, stopped_clock):
    idle = BrowserConfig(idle_seconds=60)
    browsers = Browsers(idle, AllowList.parse([SITE]), MAX_DOWNLOAD)
    tools = browser_tools(browsers, multimodal=False)
    url = pages.page("/", "<title>Idle</title>", "text/html")
    async with browsers.running():
        await call(tools, "browser_open", ctx, url=url)
        browser = browsers.current(ctx.session_id)
        tree = [p for p in map(ProcessId.of, descendant_pids(os.getpid())) if p is not None]
        assert tree and browser is not None and browser.profile.is_dir()

        stopped_clock.jump(59)
        await call(tools, "browser_snapshot", ctx)  # used: its idle time starts again
        stopped_clock.jump(59)
        await trio.testing.wait_all_tasks_blocked()
        assert browsers.current(ctx.session_id) is browser  # 59 s unused: still open

        stopped_clock.jump(1)
        await browser.closed.wait()
        assert browsers.count() == 0 and not browser.profile.exists()
        assert not [p for p in tree if p.alive()]


async def test_a_users_chromium_runs_in_the_sandbox(
    ctx, home, tmp_path, pages, browsers, require_system
):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    backends = backends_for(TerminalConfig(), home.root)
    assert backends.sandbox is not None, backends.sandbox_problem
    own = tmp_path / "user-session"
    own.mkdir()
    terminal = TerminalSession(own, state_dir=own / ".term", backends=backends)
    user = attrs.evolve(ctx, session_id="u1", terminal=terminal, caller=Caller("t", "1", "user"))
    tools = browser_tools(browsers, multimodal=False)
    port = pages.url.rsplit(":", 1)[1]
    url = pages.page(
        "/", f'<title>Hello</title><img src="http://127.0.0.1:{port}/x.png">', "text/html"
    )
    seen = await call(tools, "browser_open", user, url=url)
    assert seen["title"] == "Hello" and pages.requests[0] == "/"
    with trio.fail_after(20):
        refused = seen.get("refused", [])
        while not any(r["host"] == "127.0.0.1" for r in refused):
            refused += (await call(tools, "browser_scroll", user)).get("refused", [])
    chromiums = [p for p in descendant_pids(os.getpid()) if "chromium" in _exe(p)]
    assert chromiums
    ours = os.readlink("/proc/self/ns/net")
    for pid in chromiums:
        assert os.readlink(f"/proc/{pid}/ns/net") != ours  # the sandbox's own network
        assert os.path.isdir(f"/proc/{pid}/root{own}")  # its session's directory
        assert not os.path.exists(f"/proc/{pid}/root{home.root}")  # never HERMES_HOME
    assert "/x.png" not in pages.requests
    assert browsers.current("u1").sandbox is backends.sandbox
    assert await call(tools, "browser_close", user) == {"closed": True}
    assert not (own / PROFILE).exists()
    assert not [p for p in descendant_pids(os.getpid()) if "chromium" in _exe(p)]


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def test_users_are_offered_the_browser_only_where_there_is_a_sandbox(home):
    tools = ToolsConfig(user=(*ToolsConfig().user, "browser_open"))
    config = Config(agent=AgentConfig(tools=tools))
    assert "browser_open" in build_agent(config, Secrets({}, frozenset()), home).offered("user")
    agent = build_agent(config, Secrets({}, frozenset()), home, no_sandbox="no bwrap")
    assert "browser_open" not in agent.offered("user")
    assert USERS_BROWSE in agent.permissions.refusal("user", "browser_open")
