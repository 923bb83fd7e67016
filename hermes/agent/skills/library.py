"""Where skills live, who sees which, and the one rule for the files a skill may read.

HERMES_HOME/skills/<name>/ are the shared skills, for every role unless the skill's
front matter (metadata `roles: owner`) or `skills.roles` keeps one to owners. A skill
installed from outside waits in skills/.quarantine/<name>/ until an owner enables it;
a disabled one sits in skills/.disabled/<name>/. A skill's state is where it is, so a
move (one rename) changes it and nothing can disagree with the directory. A user's own
skills are in skills/users/<platform>/<user>/<name>/: theirs alone, never shown to
another user (owners use the shared ones).

`skill_path` decides which files a skill may read and is the same function that every
read and write goes through: a relative path, no `..`, and whatever it names (links
followed) still inside the skill's directory; what is opened is checked again.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Literal

import attrs

from hermes.actors.errors import Invalid
from hermes.agent.permissions import Caller
from hermes.agent.skills.card import CARD, Card, SkillFormatError, check_name, parse_card
from hermes.agent.skills.settings import SkillsConfig
from hermes.agent.tools.file_view import FileView, opened_path
from hermes.agent.tools.files import write_atomic
from hermes.home import path_part

QUARANTINE = ".quarantine"
DISABLED = ".disabled"
USERS = "users"
FILE_BYTES = 256_000  # one file a skill holds, read or written
SKILL_FILES = 200  # the files one skill may hold (listed, or added by skill_manage)
OWN_SKILLS = 100  # the skills one user (not an owner) may keep

State = Literal["enabled", "quarantined", "disabled"]


class SkillRefused(Invalid):
    """A skill, or a file of one, this caller may not have: the message says why."""


@attrs.frozen
class Skill:
    """One skill as found: `own` is a user's own; `state` where it sits."""

    card: Card
    directory: Path
    state: State = "enabled"
    own: bool = False

    @property
    def name(self) -> str:
        return self.card.name


class SkillLibrary:
    """The skills under one HERMES_HOME/skills. Cards are re-read only when SKILL.md
    changed (every turn lists them for its prompt)."""

    def __init__(self, root: Path, config: SkillsConfig | None = None) -> None:
        self.root = root
        self.config = config or SkillsConfig()
        self._cards: dict[Path, tuple[tuple[int, int, int], Card | None]] = {}

    # where -----------------------------------------------------------------------------

    def own_root(self, caller: Caller) -> Path:
        return self.root / USERS / path_part(caller.platform) / path_part(caller.user_id)

    def _place(self, state: State) -> Path:
        return {
            "enabled": self.root,
            "quarantined": self.root / QUARANTINE,
            "disabled": self.root / DISABLED,
        }[state]

    # finding ---------------------------------------------------------------------------

    def card_of(self, directory: Path) -> Card | None:
        """The card of the skill at `directory`; None when it is not one (no SKILL.md, or
        one that is not in the format)."""
        try:
            st = os.stat(directory / CARD, follow_symlinks=False)
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        kept = self._cards.get(directory)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        card = None
        if stat.S_ISREG(st.st_mode) and st.st_size <= FILE_BYTES:
            try:
                card = parse_card((directory / CARD).read_text("utf-8"), directory.name)[0]
            except (OSError, UnicodeDecodeError, SkillFormatError):
                card = None
        self._cards[directory] = (stamp, card)
        return card

    def _found(self, where: Path, state: State, own: bool = False) -> Iterator[Skill]:
        try:
            entries = sorted(os.scandir(where), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.name == USERS and not own:
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            card = self.card_of(Path(entry.path))
            if card is not None:
                yield Skill(card, Path(entry.path), state, own)

    def shared(self, state: State = "enabled") -> list[Skill]:
        """The shared skills in `state`, for every role (the operator's view)."""
        return list(self._found(self._place(state), state))

    def broken(self) -> list[Path]:
        """Directories under skills/ (any state) that hold no valid SKILL.md: doctor names them."""
        found = []
        for state in ("enabled", "quarantined", "disabled"):
            place = self._place(state)
            if not place.is_dir():
                continue
            for entry in sorted(os.scandir(place), key=lambda e: e.name):
                if entry.name.startswith(".") or entry.name == USERS and state == "enabled":
                    continue
                if entry.is_dir(follow_symlinks=False) and self.card_of(Path(entry.path)) is None:
                    found.append(Path(entry.path))
        return found

    def may_use(self, caller: Caller, skill: Skill) -> bool:
        if skill.own:
            return True
        roles = self.config.roles.get(skill.name)
        if roles is not None:
            return caller.role in roles
        return caller.is_owner or not skill.card.owners_only

    def available(self, caller: Caller) -> list[Skill]:
        """The skills `caller` may use: the enabled shared ones their role may have, and
        (a user's) their own."""
        skills = [s for s in self.shared() if self.may_use(caller, s)]
        if not caller.is_owner:
            names = {s.name for s in skills}
            skills += [
                s
                for s in self._found(self.own_root(caller), "enabled", own=True)
                if s.name not in names
            ]
        return skills

    def find(self, caller: Caller, name: str) -> Skill:
        """The skill `name` as `caller` may have it, else SkillRefused saying why not
        (unknown, quarantined, disabled, owners only)."""
        try:
            check_name(name)
        except SkillFormatError as exc:
            raise SkillRefused(str(exc)) from None
        for skill in self.available(caller):
            if skill.name == name:
                return skill
        missing = f"no skill named {name} (skills_list lists the ones you have)"
        if not caller.is_owner:  # what owners keep is not named to a user
            raise SkillRefused(missing)
        if self.card_of(self._place("quarantined") / name) is not None:
            raise SkillRefused(
                f"the skill {name} cannot be used: it is quarantined until an"
                f" owner enables it (hermes skills enable {name})"
            )
        if self.card_of(self._place("disabled") / name) is not None:
            raise SkillRefused(f"the skill {name} cannot be used: an owner disabled it")
        raise SkillRefused(missing)

    def located(self, name: str) -> Skill | None:
        """The shared skill `name` in whatever state it is (the operator's view)."""
        check_name(name)
        for state in ("enabled", "quarantined", "disabled"):
            directory = self._place(state) / name
            card = self.card_of(directory)
            if card is not None:
                return Skill(card, directory, state)
        return None

    # reading ---------------------------------------------------------------------------

    def files(self, directory: Path) -> list[str]:
        """The files the skill at `directory` holds, relative to it (links not followed),
        at most SKILL_FILES."""
        found: list[str] = []
        for here, dirs, names in os.walk(directory, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                found.append(str(Path(here, name).relative_to(directory)))
                if len(found) >= SKILL_FILES:
                    return found
        return found

    def read(self, skill: Skill, path: str | None = None) -> bytes:
        """The file `path` of `skill` (None: SKILL.md), within FILE_BYTES."""
        target = skill_path(skill.directory, path)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(target, flags)
        except FileNotFoundError:
            raise SkillRefused(f"the skill {skill.name} has no file {path}") from None
        except OSError as exc:
            raise SkillRefused(
                f"{path} of the skill {skill.name} cannot be read: {exc.strerror}"
            ) from None
        with os.fdopen(fd, "rb") as f:
            _opened_inside(skill.directory, fd, path)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SkillRefused(f"{path} of the skill {skill.name} is not a file")
            if st.st_size > FILE_BYTES:
                raise SkillRefused(
                    f"{path} of the skill {skill.name} is {st.st_size} bytes,"
                    f" over the {FILE_BYTES} a skill file may be"
                )
            return f.read(FILE_BYTES)

    # writing (skill_manage; install) ---------------------------------------------------

    def new_directory(self, caller: Caller, name: str) -> Path:
        """Where `caller`'s new skill `name` goes: shared for an owner, their own for a user;
        SkillRefused when the name is taken."""
        check_name(name)
        if caller.is_owner:
            taken = self.located(name)
            if taken is not None:
                raise SkillRefused(f"a skill named {name} exists already ({taken.state})")
            return self.root / name
        if any(s.name == name for s in self.available(caller)):
            raise SkillRefused(f"you have a skill named {name} already")
        if len(list(self._found(self.own_root(caller), "enabled", own=True))) >= OWN_SKILLS:
            raise SkillRefused(f"a user keeps {OWN_SKILLS} skills at most; delete one first")
        return self.own_root(caller) / name

    def writable(self, caller: Caller, name: str) -> Skill:
        """The skill `name` if `caller` may change it: an owner the enabled shared ones, a
        user only their own."""
        if not caller.is_owner:  # their own, even where a shared one took its name since
            check_name(name)
            card = self.card_of(self.own_root(caller) / name)
            if card is not None:
                return Skill(card, self.own_root(caller) / name, own=True)
        skill = self.find(caller, name)
        if not skill.own and not caller.is_owner:
            raise SkillRefused(f"the skill {name} is shared; only an owner may change it")
        return skill

    def write(self, directory: Path, path: str | None, data: bytes) -> None:
        """Write the file `path` (None: SKILL.md) of the skill at `directory` atomically and
        durably (the file tools' write: a temporary file renamed over the old one, through
        the checked directory, never through a link); scripts/ files are executable."""
        if len(data) > FILE_BYTES:
            raise SkillRefused(f"a skill file may be {FILE_BYTES} bytes at most, not {len(data)}")
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = skill_path(directory, path)
        if not target.exists() and len(self.files(directory)) >= SKILL_FILES:
            raise SkillRefused(f"a skill may hold {SKILL_FILES} files at most")
        root = directory.resolve()
        write_atomic(FileView((root,), (), root), target, data, path or CARD)
        if PurePosixPath(path or CARD).parts[0] == "scripts":
            os.chmod(target, 0o755)

    def remove(self, skill: Skill) -> None:
        shutil.rmtree(skill.directory)
        self._cards.pop(skill.directory, None)

    def move(self, skill: Skill, state: State) -> Skill:
        """`skill` (a shared one) moved to `state`: one rename."""
        place = self._place(state)
        place.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = place / skill.name
        if target.exists():
            raise SkillRefused(f"{target} exists already")
        os.rename(skill.directory, target)
        return Skill(skill.card, target, state)


def skill_path(directory: Path, path: str | None) -> Path:
    """The file `path` (relative; None: SKILL.md) of the skill at `directory`, if a skill
    may reach it: the one rule, which every read and write of a skill's files goes
    through. Absolute paths, `..`, and a name that leads (by a link) out of the skill's
    directory are refused; so is a skill directory that is itself a link."""
    rel = PurePosixPath(path or CARD)
    if rel.is_absolute() or str(path or "").startswith("~"):
        raise SkillRefused(f"{path}: a skill's files are named relative to the skill")
    if ".." in rel.parts:
        raise SkillRefused(f"{path}: '..' leads out of the skill")
    if not rel.parts or rel.parts[0].startswith("."):
        raise SkillRefused(f"{path}: not a file of the skill")
    if directory.is_symlink():
        raise SkillRefused(f"the skill at {directory} is a link; a skill must be a directory")
    root = directory.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root) or target == root:
        raise SkillRefused(f"{path} leads out of the skill (a link to {target})")
    return target


def _opened_inside(directory: Path, fd: int, path: str | None) -> None:
    """What was opened is still inside the skill (a link swapped in leads nowhere)."""
    real = opened_path(fd)
    if not real.is_relative_to(directory.resolve()):
        raise SkillRefused(f"{path} leads out of the skill (a link to {real})")
