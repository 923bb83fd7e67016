"""Skills in turns: through the router with the offline model (`/tool skill_view {...}`
lines) and the fake model (whose requests show the prompt). alice is an owner, bob and
carol users; the skills are real directories under the test's HERMES_HOME."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hermes.adapters.settings import PlatformConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.context_files import ContextFiles
from hermes.agent.loop import Agent
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.permissions import Permissions
from hermes.agent.provider import Provider
from hermes.agent.settings import AgentConfig, ToolsConfig
from hermes.agent.skills.library import SkillLibrary
from hermes.agent.skills.settings import SkillsConfig
from hermes.agent.tools.catalog import default_tools
from hermes.gateway.settings import Config
from tests.fakes.openai import text_answer, tool_answer
from tests.gateway.router_harness import running_router

USERS = ("alice", "bob", "carol")
CONFIG = Config(platforms={"telegram": PlatformConfig(allowed_users=USERS, owner="alice")})
DEPLOY = """\
---
name: deploy
description: Deploy the web site to production; use when asked to ship or release.
---
# Deploying

1. Read references/steps.md.
2. Run scripts/hello.sh.
"""


def write_skill(where: Path, text: str = DEPLOY, files: dict[str, str] | None = None) -> Path:
    where.mkdir(parents=True)
    (where / "SKILL.md").write_text(text)
    for name, content in (files or {}).items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(content)
    return where


@pytest.fixture
def deploy(home) -> Path:
    files = {"references/steps.md": "step one: build\n",
             "scripts/hello.sh": 'echo "hello from $1"\n'}  # fmt: skip
    return write_skill(home.skills / "deploy", files=files)


def agent_of(home, provider: Provider, config: Config = CONFIG) -> Agent:
    tools = default_tools()
    return Agent(ProviderChain([provider]), tools,
                 permissions=Permissions.build(config.agent.tools, tools),
                 skills=SkillLibrary(home.skills, config.skills),
                 context_files=ContextFiles(home.soul))  # fmt: skip


def offline_agent(home, config: Config = CONFIG) -> Agent:
    return agent_of(home, OfflineProvider(), config)


def fake_agent(home, fake, config: Config = CONFIG) -> Agent:
    return agent_of(home, OpenAICompatible("f", "m", fake.url, "k"), config)


def system_of(request: dict) -> str:
    return request["body"]["messages"][0]["content"]


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


async def view(h, user: str, **args: str) -> str:
    return (await h.ask(user, tool_line("skill_view", **args))).text


async def manage(h, user: str, action: str, name: str, **args: str) -> str:
    return (await h.ask(user, tool_line("skill_manage", action=action, name=name, **args))).text


# -- listed, viewed, read, run ----------------------------------------------------------


async def test_a_skill_is_listed_in_the_prompt_viewed_read_and_its_script_run(
    registry, home, fake, deploy
):
    fake.script(
        tool_answer(("skill_view", {"name": "deploy"})),
        tool_answer(("skill_view", {"name": "deploy", "path": "references/steps.md"})),
        tool_answer(("terminal", {"command": f"bash {deploy}/scripts/hello.sh world"})),
        text_answer("shipped"),
    )
    async with running_router(registry, home, fake, CONFIG, agent=fake_agent(home, fake)) as h:
        assert (await h.ask("alice", "ship the site")).text == "shipped"
    first, *_, last = fake.requests
    assert "- deploy: Deploy the web site to production" in system_of(first)
    assert "# Deploying" not in system_of(first)  # only opened when needed
    viewed, reference, ran = tool_results(last)
    assert "# Deploying" in viewed and "references/steps.md" in viewed
    assert reference == "step one: build\n"
    assert json.loads(ran)["output"].strip() == "hello from world"


async def test_a_users_sandboxed_command_runs_a_skills_script(
    registry, home, fake, deploy, require_system
):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    tools = ToolsConfig(user=("terminal", "skill_view"))
    config = Config(platforms=CONFIG.platforms, agent=AgentConfig(tools=tools))
    fake.script(
        tool_answer(("terminal", {"command": f"bash {deploy}/scripts/hello.sh bob"})),
        tool_answer(("terminal", {"command": f"echo x > {deploy}/scripts/hello.sh"})),
        text_answer("done"),
    )
    agent = fake_agent(home, fake, config)
    async with running_router(registry, home, fake, config, agent=agent) as h:
        await h.ask("bob", "run it")
    print("RESULTS", tool_results(fake.requests[-1]))
    ran, wrote = (json.loads(r) for r in tool_results(fake.requests[-1]))
    assert ran["ran_in"] == "sandbox" and ran["output"].strip() == "hello from bob"
    assert wrote["exit_code"] != 0  # read-only there
    assert (deploy / "scripts" / "hello.sh").read_text().startswith("echo")


# -- refused ----------------------------------------------------------------------------


async def test_each_path_out_of_a_skill_is_refused(registry, home, fake, deploy, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret")
    (deploy / "references" / "out").symlink_to(secret)
    (deploy / "references" / "env").symlink_to(home.root / ".env")
    (deploy / "references" / "inside").symlink_to(deploy / "references" / "steps.md")
    async with running_router(registry, home, fake, CONFIG, agent=offline_agent(home)) as h:
        for path, why in (
            ("/etc/passwd", "relative to the skill"),
            ("../deploy/SKILL.md", "'..' leads out"),
            ("references/../../x", "'..' leads out"),
            ("references/out", "leads out of the skill"),
            ("references/env", "leads out of the skill"),
        ):
            said = await view(h, "alice", name="deploy", path=path)
            assert why in said, (path, said)
            assert "the secret" not in said
        assert "step one" in await view(h, "alice", name="deploy", path="references/inside")


async def test_another_users_disabled_and_quarantined_skills_are_refused(
    registry, home, fake, deploy
):
    write_skill(home.skills / "users" / "telegram" / "bob" / "notes",
                DEPLOY.replace("name: deploy", "name: notes"))  # fmt: skip
    write_skill(
        home.skills / ".quarantine" / "fresh", DEPLOY.replace("name: deploy", "name: fresh")
    )
    write_skill(home.skills / ".disabled" / "old", DEPLOY.replace("name: deploy", "name: old"))
    async with running_router(registry, home, fake, CONFIG, agent=offline_agent(home)) as h:
        assert "# Deploying" in await view(h, "bob", name="notes")  # his own
        assert "no skill named notes" in await view(h, "carol", name="notes")
        assert "no skill named notes" in await view(h, "alice", name="notes")
        assert "quarantined" in await view(h, "alice", name="fresh")
        assert "disabled" in await view(h, "alice", name="old")
        listed = (await h.ask("carol", tool_line("skills_list"))).text
        assert "deploy" in listed and "notes" not in listed and "fresh" not in listed


async def test_a_skill_for_owners_only_is_not_a_users(registry, home, fake, deploy):
    write_skill(home.skills / "admin", "---\nname: admin\ndescription: Owner work.\nmetadata:\n"
                "  roles: owner\n---\nbody\n")  # fmt: skip
    config = Config(platforms=CONFIG.platforms, skills=SkillsConfig(roles={"deploy": ("owner",)}))
    async with running_router(registry, home, fake, config, agent=offline_agent(home, config)) as h:
        for name in ("admin", "deploy"):  # not even named to a user
            assert f"no skill named {name}" in await view(h, "bob", name=name)
            assert f"- {name}:" not in (await h.ask("bob", tool_line("skills_list"))).text
        assert "body" in await view(h, "alice", name="admin")


# -- skill_manage -------------------------------------------------------------------------


async def test_a_skill_made_by_skill_manage_is_listed_next_turn(registry, home, fake):
    made = {"action": "create", "name": "backup", "description": "Back up the database.",
            "content": "# Backup\n\nRun hermes db backup.\n"}  # fmt: skip
    fake.script(tool_answer(("skill_manage", made)), text_answer("saved"), text_answer("ok"))
    async with running_router(registry, home, fake, CONFIG, agent=fake_agent(home, fake)) as h:
        await h.ask("alice", "remember how to back up")
        assert "- backup" not in system_of(fake.requests[0])
        await h.ask("alice", "and now?")
    assert "- backup: Back up the database." in system_of(fake.requests[-1])
    assert (home.skills / "backup" / "SKILL.md").read_text().startswith("---\nname: backup\n")


async def test_a_users_skill_is_theirs_alone_and_a_shared_one_is_not_theirs_to_change(
    registry, home, fake, deploy
):
    agent = offline_agent(home)
    async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
        said = await manage(h, "bob", "create", "mine", description="Bob's.", content="bob's way")
        assert "created the skill mine (yours)" in said
        assert "no skill named mine" in await view(h, "carol", name="mine")
        assert "no skill named mine" in await view(h, "alice", name="mine")
        assert "bob's way" in await view(h, "bob", name="mine")
        for user in ("bob", "carol"):
            refused = await manage(h, user, "patch", "deploy", section="Deploying", content="rm")
            assert "only an owner may change it" in refused
        patched = await manage(h, "alice", "patch", "deploy", section="Deploying",
                               content="new steps")  # fmt: skip
        assert "replaced the section 'Deploying'" in patched
    assert (home.skills / "users" / "telegram" / "bob" / "mine" / "SKILL.md").exists()
    text = (deploy / "SKILL.md").read_text()
    assert "new steps" in text and "rm\n" not in text and "1. Read" not in text


async def test_skill_manage_adds_a_file_and_refuses_one_out_of_the_skill(
    registry, home, fake, deploy, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (deploy / "references" / "away").symlink_to(outside)
    (deploy / "scripts" / "linked.sh").symlink_to(outside / "target.sh")
    async with running_router(registry, home, fake, CONFIG, agent=offline_agent(home)) as h:
        said = await manage(h, "alice", "add_file", "deploy", path="scripts/check.sh",
                            content="true\n")  # fmt: skip
        assert "wrote scripts/check.sh" in said
        for path, why in (
            ("scripts/../../x", "'..' leads out"),
            ("references/away/x.md", "leads out of the skill"),
            ("scripts/linked.sh", "leads out of the skill"),
            ("/tmp/y", "go under scripts/"),
            ("SKILL.md", "go under scripts/"),
        ):
            said = await manage(h, "alice", "add_file", "deploy", path=path, content="x")
            assert why in said, (path, said)
    assert os.access(deploy / "scripts" / "check.sh", os.X_OK)
    assert list(outside.iterdir()) == [] and not (home.skills / "x").exists()


async def test_a_patch_replaces_one_section_and_leaves_code_blocks_whole(
    registry, home, fake, deploy
):
    text = DEPLOY + "\n## Build\n\n```bash\n# build it first\nmake\n```\n\n## After\n\nTell them.\n"
    (deploy / "SKILL.md").write_text(text)
    async with running_router(registry, home, fake, CONFIG, agent=offline_agent(home)) as h:
        said = await manage(h, "alice", "patch", "deploy", section="Build", content="make all")
        assert "replaced the section 'Build'" in said
    patched = (deploy / "SKILL.md").read_text()
    assert "make all" in patched and "# build it first" not in patched
    assert "## After\n\nTell them." in patched and patched.count("```") == 0


# -- invoked, and loaded by a job ---------------------------------------------------------


async def test_a_slash_skill_runs_a_turn_with_the_skill_loaded(registry, home, fake, deploy):
    fake.script(text_answer("deploying"), text_answer("plain"))
    async with running_router(registry, home, fake, CONFIG, agent=fake_agent(home, fake)) as h:
        await h.ask("alice", "/deploy to staging")
        await h.ask("alice", "/nosuch thing")
    invoked, plain = fake.requests
    assert "## The skill deploy" in system_of(invoked) and "# Deploying" in system_of(invoked)
    assert invoked["body"]["messages"][-1]["content"] == "/deploy to staging"
    assert "## The skill" not in system_of(plain)


async def test_the_learning_reminder_comes_once_after_many_tool_calls(registry, home, fake):
    config = Config(platforms=CONFIG.platforms, skills=SkillsConfig(remind_after=2))
    memory = ("memory", {"action": "add", "target": "memory", "content": "x"})
    fake.script(tool_answer(memory), tool_answer(memory), tool_answer(memory),
                text_answer("done"))  # fmt: skip
    agent = fake_agent(home, fake, config)
    async with running_router(registry, home, fake, config, agent=agent) as h:
        await h.ask("alice", "work hard")
    reminded = ["save it as a skill" in system_of(r) for r in fake.requests]
    assert reminded == [False, False, True, True]
    assert system_of(fake.requests[3]).count("save it as a skill") == 1
