"""web_search against a fake provider on loopback (SearXNG, Brave and Tavily APIs):
results as title/url/snippet, the count honoured, each provider's key in its header and
nowhere else, and every failure of the provider a clear ToolError."""

from __future__ import annotations

import json

import attrs
import pytest
import trio

from hermes.agent.providers import build_agent
from hermes.agent.tools.base import ToolError, schema
from hermes.agent.tools.web_search import MAX_BODY, SNIPPET_CAP, TITLE_CAP, web_search_tool
from hermes.agent.web.settings import SearchConfig, WebConfig
from hermes.config import ConfigError, Secrets
from hermes.gateway.settings import Config
from tests.fakes.searxng import FakeSearch

BRAVE_VAR, TAVILY_VAR = "HERMES_TEST_BRAVE_KEY", "HERMES_TEST_TAVILY_KEY"
SECRETS = Secrets({BRAVE_VAR: "brave-key", TAVILY_VAR: "tavily-key"}, frozenset())
NO_SECRETS = Secrets({}, frozenset())

RESULTS = [
    {"title": f"Result {i}", "url": f"https://example.org/{i}", "content": f"About {i}."}
    for i in range(8)
]


@pytest.fixture
def fake():
    with FakeSearch() as fake:
        fake.set_results(RESULTS)
        yield fake
    assert fake.internal_errors == []


def searxng(fake: FakeSearch, results: int = 5):
    return web_search_tool(SearchConfig("searxng", url=fake.url, results=results), NO_SECRETS)


async def search(tool, ctx, **args) -> list[dict[str, str]]:
    return json.loads(await tool(args, ctx))


async def test_searxng_results_are_title_url_snippet(fake, ctx):
    answer = await search(searxng(fake), ctx, query="trio structured concurrency")
    assert answer[:2] == [
        {"title": "Result 0", "url": "https://example.org/0", "snippet": "About 0."},
        {"title": "Result 1", "url": "https://example.org/1", "snippet": "About 1."},
    ]
    [query] = fake.queries
    assert (query["provider"], query["query"]) == ("searxng", "trio structured concurrency")
    assert query["params"]["format"] == "json"


async def test_untrusted_fields_are_capped_and_results_without_a_web_url_dropped(fake, ctx):
    fake.set_results([
        {"title": "T" * 5000, "url": "https://example.org/long", "content": "S " * 5000},
        {"title": "script", "url": "javascript:alert(1)", "content": "x"},
        {"title": "no url", "content": "x"},
        {"title": "long url", "url": "https://example.org/" + "a" * 5000, "content": "x"},
        "not a record",
    ])  # fmt: skip
    [only] = await search(searxng(fake), ctx, query="q")
    assert only["url"] == "https://example.org/long"
    assert len(only["title"]) == TITLE_CAP and only["title"].endswith("…")
    assert len(only["snippet"]) == SNIPPET_CAP and only["snippet"].endswith("…")


async def test_the_whole_answer_is_capped_like_command_output(fake, ctx):
    fake.set_results([{"title": f"t{i}", "url": f"https://example.org/{i}",
                       "content": "word " * 400} for i in range(20)])  # fmt: skip
    ctx.terminal.options = attrs.evolve(ctx.terminal.options, cap=4000)
    text = await searxng(fake, results=20)({"query": "q"}, ctx)
    assert len(text) < 6000  # 20 snippets of 1000 characters were cut to the cap
    assert "https://example.org/0" in text and "https://example.org/19" in text  # head, tail


async def test_count_is_honoured_up_to_the_configured_results(fake, ctx):
    tool = searxng(fake, results=5)
    assert schema(tool)["function"]["parameters"]["properties"]["count"]["maximum"] == 5
    assert len(await search(tool, ctx, query="q")) == 5
    assert len(await search(tool, ctx, query="q", count=2)) == 2
    assert len(await search(tool, ctx, query="q", count=50)) == 5
    for bad in (0, -1, "3", True, 2.5):
        with pytest.raises(ToolError, match="count must be a whole number from 1 to 5"):
            await tool({"query": "q", "count": bad}, ctx)
    assert len(fake.queries) == 3  # a bad count never reached the provider


async def test_a_missing_or_too_long_query_is_refused(fake, ctx):
    tool = searxng(fake)
    with pytest.raises(ToolError, match="missing argument 'query'"):
        await tool({}, ctx)
    with pytest.raises(ToolError, match="at most 400"):
        await tool({"query": "x" * 401}, ctx)
    assert fake.queries == []


async def test_an_http_error_of_the_provider_is_a_clear_error(fake, ctx):
    fake.fail(503, {"error": "engines overloaded"})
    with pytest.raises(ToolError) as caught:
        await searxng(fake)({"query": "q"}, ctx)
    message = str(caught.value)
    assert "searxng" in message and "HTTP 503" in message and "engines overloaded" in message
    assert len(await search(searxng(fake), ctx, query="q")) == 5  # the next one works


async def test_an_answer_that_is_not_the_expected_json_is_a_clear_error(fake, ctx):
    tool = searxng(fake)
    fake.fail(200, b"<html>rate limited</html>")
    with pytest.raises(ToolError, match=r"web search \(searxng\) answered something that is"):
        await tool({"query": "q"}, ctx)
    fake.fail(200, {"results": "none"})
    with pytest.raises(ToolError, match="results that is not a list"):
        await tool({"query": "q"}, ctx)
    fake.fail(200, ["a", "list"])
    with pytest.raises(ToolError, match="JSON without results"):
        await tool({"query": "q"}, ctx)
    fake.fail(200, b"[" + b" " * MAX_BODY + b"]")
    with pytest.raises(ToolError, match="more than 2,000,000 bytes"):
        await tool({"query": "q"}, ctx)


async def test_a_redirect_is_not_followed(fake, ctx):
    fake.fail(302, b"", headers={"location": "http://169.254.169.254/latest/meta-data"})
    with pytest.raises(ToolError, match="redirect to http://169.254.169.254/latest/meta-data"):
        await searxng(fake)({"query": "q"}, ctx)
    assert len(fake.queries) == 1  # nothing followed it to the fake's own 404 or elsewhere


async def test_an_unreachable_provider_is_a_clear_error(ctx):
    with FakeSearch() as gone:
        url = gone.url
    tool = web_search_tool(SearchConfig("searxng", url=url), NO_SECRETS)
    with pytest.raises(ToolError, match=r"web search \(searxng\) cannot be reached"):
        await tool({"query": "q"}, ctx)


async def test_a_provider_that_does_not_answer_times_out(fake, ctx, mock_clock):
    fake.hang()
    tool = searxng(fake)
    failed = trio.Event()

    async def call() -> None:
        with pytest.raises(ToolError, match=r"web search \(searxng\) no answer within 20 s"):
            await tool({"query": "q"}, ctx)
        failed.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.to_thread.run_sync(fake.wait_held)
        mock_clock.jump(19)
        await trio.testing.wait_all_tasks_blocked()
        assert not failed.is_set()
        mock_clock.jump(2)
    assert failed.is_set()


@pytest.mark.parametrize("url", ["searx.example.org", "ftp://searx.example.org", "http://[::1"])
def test_a_url_that_is_not_http_is_a_config_error(url):
    with pytest.raises(ConfigError, match="web.search.url: .* is not an http"):
        web_search_tool(SearchConfig("searxng", url=url), NO_SECRETS)


def test_no_provider_means_no_tool():
    assert web_search_tool(SearchConfig(), SECRETS) is None


def test_the_agent_offers_it_to_owners_only_where_a_provider_is_configured(fake, home):
    configured = Config(web=WebConfig(search=SearchConfig("searxng", url=fake.url)))
    agent = build_agent(configured, NO_SECRETS, home)
    assert "web_search" in agent.offered("owner")
    assert "web_search" not in agent.offered("user")  # unless agent.tools.user names it
    unconfigured = build_agent(Config(), NO_SECRETS, home).offered("owner")
    assert "web_search" not in unconfigured and "web_fetch" in unconfigured


@pytest.mark.parametrize("provider", ["brave", "tavily"])
def test_a_missing_key_variable_is_a_config_error_naming_it(provider):
    config = SearchConfig(provider, key_env="HERMES_TEST_UNSET_KEY")
    with pytest.raises(ConfigError, match="HERMES_TEST_UNSET_KEY"):
        web_search_tool(config, SECRETS)


async def test_brave_sends_its_key_in_its_header_and_maps_its_results(fake, ctx):
    fake.set_results([{"title": "Trio &amp; <strong>anyio</strong>", "url": "https://a.example/",
                       "content": "The <strong>structured</strong> way &#x27;here&#x27;"},
                      *RESULTS])  # fmt: skip
    config = SearchConfig("brave", url=fake.url, key_env=BRAVE_VAR, results=3)
    text = await web_search_tool(config, SECRETS)({"query": "trio", "count": 2}, ctx)
    assert json.loads(text) == [
        {"title": "Trio & anyio", "url": "https://a.example/",
         "snippet": "The structured way 'here'"},
        {"title": "Result 0", "url": "https://example.org/0", "snippet": "About 0."},
    ]  # fmt: skip
    [query] = fake.queries
    assert (query["provider"], query["key"], query["count"]) == ("brave", "brave-key", 2)
    assert "brave-key" not in text


async def test_brave_with_nothing_found_is_an_empty_list(fake, ctx):
    fake.set_results([])
    config = SearchConfig("brave", url=fake.url, key_env=BRAVE_VAR)
    assert await search(web_search_tool(config, SECRETS), ctx, query="nothing") == []


async def test_tavily_sends_its_key_as_a_bearer_and_asks_for_the_count(fake, ctx):
    config = SearchConfig("tavily", url=fake.url, key_env=TAVILY_VAR, results=4)
    text = await web_search_tool(config, SECRETS)({"query": "trio"}, ctx)
    assert json.loads(text) == [
        {"title": f"Result {i}", "url": f"https://example.org/{i}", "snippet": f"About {i}."}
        for i in range(4)
    ]
    [query] = fake.queries
    assert (query["provider"], query["key"], query["count"]) == ("tavily", "tavily-key", 4)
    assert "tavily-key" not in text


@pytest.mark.parametrize(("provider", "var", "status"), [("brave", BRAVE_VAR, 422),
                                                          ("tavily", TAVILY_VAR, 401)])  # fmt: skip
async def test_a_refused_key_is_an_error_that_never_shows_it(fake, ctx, provider, var, status):
    wrong = Secrets({var: "wrong-key-123"}, frozenset())
    tool = web_search_tool(SearchConfig(provider, url=fake.url, key_env=var), wrong)
    with pytest.raises(ToolError, match=f"web search \\({provider}\\) answered HTTP {status}"):
        await tool({"query": "q"}, ctx)
    assert fake.queries[0]["key"] == "wrong-key-123"  # sent in its header ...
    assert "wrong-key-123" not in repr(tool)  # ... and shown nowhere


async def test_an_error_quoting_the_key_does_not_show_it(fake, ctx):
    fake.fail(400, {"error": "bad token brave-key for this plan"})
    config = SearchConfig("brave", url=fake.url, key_env=BRAVE_VAR)
    with pytest.raises(ToolError) as caught:
        await web_search_tool(config, SECRETS)({"query": "q"}, ctx)
    assert "brave-key" not in str(caught.value) and "[key]" in str(caught.value)
