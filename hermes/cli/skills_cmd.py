"""`hermes skills`: install skills from outside (quarantined until enabled), list them,
show what one holds and what the scan found, enable, disable, remove."""

from __future__ import annotations

import argparse

from hermes.adapters.registry import SECTIONS
from hermes.agent.skills.library import SkillLibrary
from hermes.cli import exit_codes
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.skills import (
    SkillReport,
    disable_skill,
    enable_skill,
    install_skill,
    list_skills,
    remove_skill,
    show_skill,
)
from hermes.terminal.addresses import AllowList


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = actions.add_parser(
        "install",
        help="bring a skill in, quarantined until enabled: a directory, a .tar.gz or"
        " .zip, a git repository, or an archive's URL",
    )
    install.add_argument("source", help="PATH, URL or GIT_URL")
    actions.add_parser("list", help="every shared skill and its state")
    for action, what in (
        ("show", "what a skill holds and what the scan found"),
        ("enable", "let every role its config allows use it (out of quarantine)"),
        ("disable", "keep it, unused"),
        ("remove", "delete it"),
    ):
        one = actions.add_parser(action, help=what)
        one.add_argument("name")
    parser.set_defaults(func=skills)


def skills(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    library = SkillLibrary(home.skills, config.skills)
    if args.action == "list":
        return _list(list_skills(library))
    if args.action == "install":
        done = install_skill(library, args.source, AllowList.parse(config.web.allow_private))
        _show(done)
        print(f"quarantined: no one can use it until you run `hermes skills enable {done.name}`")
        return exit_codes.OK
    act = {
        "show": show_skill,
        "enable": enable_skill,
        "disable": disable_skill,
        "remove": remove_skill,
    }[args.action]
    done = act(library, args.name)
    if args.action == "remove":
        print(f"removed {done.name} ({done.directory})")
    elif args.action == "disable":
        print(f"{done.name}: disabled")
    else:
        _show(done)
    return exit_codes.OK


def _list(found: list[SkillReport]) -> int:
    if not found:
        print("no skills (hermes skills install PATH|URL|GIT_URL; or the agent's skill_manage)")
        return exit_codes.OK
    print(f"{'NAME':<24} {'STATE':<12} DESCRIPTION")
    for skill in found:
        print(f"{skill.name:<24} {skill.state:<12} {skill.description[:70]}")
    return exit_codes.OK


def _show(skill: SkillReport) -> None:
    print(f"{skill.name}: {skill.state}, at {skill.directory}")
    print(f"  {skill.description}")
    print(f"  files: {', '.join(skill.files) or '-'}")
    if not skill.findings:
        print("  the scan found nothing")
        return
    print(f"  the scan found {len(skill.findings)} thing(s) to look at before enabling it:")
    for finding in skill.findings:
        print(f"    {finding.where}: {finding.kind}: {finding.what}")
