"""Cron jobs with skills: `hermes cron add --skill` and the cronjob tool record them, and
each fire loads them into its prompt (the fake model's request shows it)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from hermes.actors.errors import Invalid
from hermes.adapters.settings import PlatformConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.cron_runner import CronAgentRunner
from hermes.agent.loop import Agent
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.skills.library import SkillLibrary
from hermes.agent.tools.catalog import default_tools
from hermes.cli import exit_codes
from hermes.cli.main import main
from hermes.cron.schedule import parse_schedule
from hermes.cron.store import NewJob, create_job, list_jobs
from hermes.gateway.settings import Config
from hermes.operations.cron import AddArgs
from hermes.state.db import Db
from tests.fakes.openai import text_answer
from tests.gateway.router_harness import running_router
from tests.seed import rows

UTC = ZoneInfo("UTC")
CONFIG = Config(platforms={"telegram": PlatformConfig(allowed_users=("alice",), owner="alice")})
T0 = 1_800_000_000.0
DEPLOY = "---\nname: deploy\ndescription: Ship it.\n---\n# Deploying\n\nRun make ship.\n"


def deploy_skill(home) -> None:
    (home.skills / "deploy").mkdir(parents=True)
    (home.skills / "deploy" / "SKILL.md").write_text(DEPLOY)


def test_cron_add_and_edit_take_skills(home, capsys):
    argv = ["cron", "add", "every day at 9am", "--prompt", "ship", "--skill", "deploy",
            "--skill", "notes", "--name", "daily"]  # fmt: skip
    assert main(argv) == exit_codes.OK, capsys.readouterr()
    assert rows(home.state_db, "SELECT skills FROM cron_jobs") == [("deploy notes",)]
    assert main(["cron", "edit", "daily", "--skill", "deploy"]) == exit_codes.OK
    assert rows(home.state_db, "SELECT skills FROM cron_jobs") == [("deploy",)]
    assert main(["cron", "add", "every 1h", "--prompt", "x", "--skill", "Bad/Name"]) == (
        exit_codes.USAGE
    )
    assert "cannot name a skill" in capsys.readouterr().err
    with pytest.raises(Invalid, match="a list of skill names"):  # not read letter by letter
        AddArgs("every 1h", prompt="x", skills="deploy")


async def test_a_fire_loads_its_jobs_skills_into_the_prompt(fake, home, registry):
    deploy_skill(home)
    fake.script(text_answer("shipped"), text_answer("tried"))
    chain = ProviderChain([OpenAICompatible("A", "model-a", fake.url, "k")])
    agent = Agent(chain, default_tools(), skills=SkillLibrary(home.skills))
    runner = CronAgentRunner(agent, registry, home.state_db, home.memories, None,
                             home.root / ".term", UTC, workspace=home.workspace)  # fmt: skip
    async with Db(registry, home.state_db) as db:
        schedule = parse_schedule("every day at 9am", UTC, T0)
        job = await db.write(create_job, NewJob("ship", schedule, prompt="ship it",
                                                skills=("deploy",)), T0, UTC)  # fmt: skip
        missing = await db.write(create_job, NewJob("gone", schedule, prompt="x",
                                                    skills=("gone",)), T0, UTC)  # fmt: skip
    assert job.skills == ("deploy",)
    assert await runner.run(job, "ship it", "cron_1") == "shipped"
    await runner.run(missing, "x", "cron_2")
    loaded, said = (r["body"]["messages"][0]["content"] for r in fake.requests)
    assert "## The skill deploy" in loaded and "Run make ship." in loaded
    assert "The skill gone cannot be loaded" in said and "no skill named gone" in said


async def test_the_cronjob_tool_attaches_skills_the_caller_has(registry, home, fake):
    deploy_skill(home)
    agent = Agent(ProviderChain([OfflineProvider()]), default_tools(),
                  skills=SkillLibrary(home.skills))  # fmt: skip
    async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
        daily = {"action": "create", "schedule": "every day at 9am"}
        made = await h.ask("alice", tool_line("cronjob", **daily, prompt="ship", skills=["deploy"]))
        assert "created" in made.text
        refused = await h.ask("alice", tool_line("cronjob", **daily, prompt="x", skills=["nosuch"]))
        assert "no skill named nosuch" in refused.text
        jobs = await h.router.db.read(list_jobs)
    assert [j.skills for j in jobs] == [("deploy",)]
