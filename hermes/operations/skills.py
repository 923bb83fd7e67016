"""The operator's skills actions (`hermes skills ...`): install one from outside, list,
show what one holds and what the scan found, enable, disable, remove.

An installed skill waits in quarantine until an owner enables it; the scan's findings
are shown (at install, show and enable), never fixed behind the owner's back. These act
on HERMES_HOME/skills directly: serve reads that directory at every turn, so there is
nobody to tell and nothing that needs a running serve."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import attrs

from hermes.actors.errors import Invalid, NotFound
from hermes.agent.scan import Finding, scan_tree
from hermes.agent.skills.card import CARD, Card, parse_card
from hermes.agent.skills.fetch import fetch_skill
from hermes.agent.skills.library import FILE_BYTES, QUARANTINE, Skill, SkillLibrary
from hermes.home import make_private_dir
from hermes.operations.context import NoArgs, Operation, Ops
from hermes.terminal.addresses import AllowList

INCOMING = ".incoming"  # under skills/: where a skill is fetched before its quarantine


class SkillNotFound(NotFound):
    """No shared skill by that name, in any state."""


@attrs.frozen
class SkillReport:
    """One shared skill as an operator sees it."""

    name: str
    state: str
    description: str
    directory: str
    files: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()


def report(library: SkillLibrary, skill: Skill, *, scan: bool = True) -> SkillReport:
    findings = tuple(scan_tree(skill.directory)) if scan else ()
    return SkillReport(
        skill.name,
        skill.state,
        skill.card.description,
        str(skill.directory),
        tuple(library.files(skill.directory)),
        findings,
    )


def install_skill(library: SkillLibrary, source: str, allow_private: AllowList) -> SkillReport:
    """Fetch the skill `source` names (a directory, a .tar.gz or .zip, a git repository, an
    archive's URL under web_fetch's rules), check its SKILL.md as every turn will, scan
    it, and put it in quarantine: no role sees it until an owner enables it. On any
    failure nothing is left."""
    incoming = library.root / INCOMING / secrets.token_hex(6)
    make_private_dir(incoming)
    try:
        fetched = fetch_skill(source, incoming, allow_private=allow_private)
        card = _card(fetched, source)
        taken = library.located(card.name)
        target = library.root / QUARANTINE / card.name
        if taken is not None or os.path.lexists(target):
            state = taken.state if taken is not None else "a broken one in quarantine"
            raise Invalid(
                f"a skill named {card.name} exists already ({state}): hermes skills"
                f" remove {card.name}, or delete {target}, first"
            )
        make_private_dir(target.parent)
        os.rename(fetched, target)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
        _drop_if_empty(library.root / INCOMING)
    skill = library.located(card.name)
    if skill is None:  # its card read differently in place: not left half-installed
        shutil.rmtree(target, ignore_errors=True)
        raise Invalid(f"{source}: the skill's {CARD} cannot be read where it was installed")
    return report(library, skill)


def _card(fetched: Path, source: str) -> Card:
    """The SKILL.md of what was fetched, read as a turn reads it: a regular file within
    FILE_BYTES, UTF-8, in the format."""
    path = fetched / CARD
    if path.is_symlink() or not path.is_file():
        raise Invalid(f"{source}: {CARD} must be a file, not a link")
    data = path.read_bytes()
    if len(data) > FILE_BYTES:
        raise Invalid(f"{source}: {CARD} is {len(data)} bytes, over the {FILE_BYTES} it may be")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid(f"{source}: {CARD} is not UTF-8 text") from None
    return parse_card(text)[0]


def list_skills(library: SkillLibrary) -> list[SkillReport]:
    """Every shared skill, whatever its state (not scanned: `show` does that)."""
    skills = [s for state in ("enabled", "quarantined", "disabled") for s in library.shared(state)]
    return [report(library, s, scan=False) for s in sorted(skills, key=lambda s: s.name)]


def show_skill(library: SkillLibrary, name: str) -> SkillReport:
    return report(library, _located(library, name))


def enable_skill(library: SkillLibrary, name: str) -> SkillReport:
    """Out of quarantine (or back from disabled): every role its config allows sees it."""
    skill = _located(library, name)
    if skill.state != "enabled":
        skill = library.move(skill, "enabled")
    return report(library, skill)


def disable_skill(library: SkillLibrary, name: str) -> SkillReport:
    skill = _located(library, name)
    if skill.state != "disabled":
        skill = library.move(skill, "disabled")
    return report(library, skill, scan=False)


def remove_skill(library: SkillLibrary, name: str) -> SkillReport:
    skill = _located(library, name)
    gone = attrs.evolve(report(library, skill, scan=False), state="removed")
    library.remove(skill)
    return gone


def _located(library: SkillLibrary, name: str) -> Skill:
    skill = library.located(name)
    if skill is None:
        raise SkillNotFound(f"no skill named {name} (hermes skills list shows them)")
    return skill


def _drop_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


@attrs.frozen
class ContextFinding:
    """A line of a project file serve's prompts left out, and why."""

    path: str
    where: str
    kind: str
    what: str


async def context_findings(ops: Ops, args: NoArgs) -> list[ContextFinding]:
    """What the scan found in the project files (AGENTS.md) serve's prompts loaded (the
    dashboard's; `hermes doctor` scans them itself)."""
    return [
        ContextFinding(str(loaded.path), f.where, f.kind, f.what)
        for loaded in ops.live.context_findings()
        for f in loaded.findings
    ]


OPERATIONS = (Operation("context.findings", NoArgs, list[ContextFinding], context_findings),)
