"""MEMORY.md (the agent's notes) and USER.md (about the user), with size caps.

Entries are lines starting with "- ". Both files are loaded into the system
prompt, so the caps keep every turn's prompt bounded. Every turn asks for
that block, so it is kept: a change made through the store shows at once,
an edit of the files by hand within RECHECK_SECONDS.

Memory is per user: owners keep the owner-wide files at the top of
`memories/`; every other user keeps their own under
`memories/<platform>/<user>/` and reads the owner-wide notes (MEMORY.md),
which only owners write (`Memory`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from hermes.actors.errors import Invalid
from hermes.agent.permissions import Caller
from hermes.home import path_part

FILES = {"memory": "MEMORY.md", "user": "USER.md"}
CAPS = {"memory": 2_200, "user": 1_375}  # characters
TITLES = {"memory": "Your notes", "user": "About the user"}
RECHECK_SECONDS = 1.0


class MemoryRefused(Invalid):
    """A memory change that cannot be made (cap, unknown entry, empty text)."""


class MemoryStore:
    def __init__(self, directory: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self._clock = clock
        self._cache: dict[str, tuple[tuple[int, int], list[str]]] = {}
        self._blocks: dict[tuple[str, ...], tuple[float, str]] = {}  # targets -> (checked, block)

    def _path(self, target: str) -> Path:
        if target not in FILES:
            raise MemoryRefused(f"memory target must be one of {', '.join(FILES)}, not {target!r}")
        return self.directory / FILES[target]

    def entries(self, target: str) -> list[str]:
        """The file's entries; re-read only when the file changed (every turn asks)."""
        path = self._path(target)
        try:
            st = path.stat()
        except FileNotFoundError:
            return []
        stamp = (st.st_mtime_ns, st.st_size)
        cached = self._cache.get(target)
        if cached is None or cached[0] != stamp:
            text = path.read_text(encoding="utf-8")
            cached = (stamp, [line[2:] for line in text.splitlines() if line.startswith("- ")])
            self._cache[target] = cached
        return list(cached[1])

    def _save(self, target: str, entries: list[str]) -> None:
        text = "".join(f"- {e}\n" for e in entries)
        if len(text) > CAPS[target]:
            raise MemoryRefused(
                f"{FILES[target]} would hold {len(text)} characters, over its cap of "
                f"{CAPS[target]}; replace or remove an entry first"
            )
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._path(target)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        self._blocks.clear()

    def add(self, target: str, text: str) -> str:
        text = " ".join(text.split())
        if not text:
            raise MemoryRefused("nothing to remember: the text is empty")
        entries = self.entries(target)
        if text in entries:
            return f"already in {FILES[target]}"
        self._save(target, [*entries, text])
        return f"added to {FILES[target]}"

    def replace(self, target: str, old: str, text: str) -> str:
        entries = self.entries(target)
        matches = [i for i, e in enumerate(entries) if old in e]
        if len(matches) != 1:
            raise MemoryRefused(
                f"{len(matches)} entries of {FILES[target]} contain {old!r}; need 1"
            )
        entries[matches[0]] = " ".join(text.split())
        self._save(target, entries)
        return f"replaced in {FILES[target]}"

    def remove(self, target: str, old: str) -> str:
        entries = self.entries(target)
        kept = [e for e in entries if old not in e]
        if len(kept) == len(entries):
            raise MemoryRefused(f"no entry of {FILES[target]} contains {old!r}")
        self._save(target, kept)
        return f"removed {len(entries) - len(kept)} from {FILES[target]}"

    def prompt_block(self, targets: tuple[str, ...] = tuple(FILES)) -> str:
        """The files for the system prompt; they are looked at again (a stat each) at
        most once per RECHECK_SECONDS."""
        now = self._clock()
        kept = self._blocks.get(targets)
        if kept is not None and now - kept[0] < RECHECK_SECONDS:
            return kept[1]
        parts = []
        for target in targets:
            entries = self.entries(target)
            if entries:
                parts.append(f"## {TITLES[target]}\n" + "\n".join(f"- {e}" for e in entries))
        block = "\n\n".join(parts)
        self._blocks[targets] = (now, block)
        return block


def user_directory(root: Path, platform: str, user_id: str) -> Path:
    """Where a user who is not an owner keeps their memory."""
    return root / path_part(platform) / path_part(user_id)


def person_directory(root: Path, person: str) -> Path:
    """Where a user with linked accounts keeps the memory they share."""
    return root / "linked" / path_part(person)


def memory_of(shared: MemoryStore, caller: Caller) -> Memory:
    """A caller's memory: an owner's is the owner-wide files; a user's is their own
    directory beside them (one for all of a person's linked accounts)."""
    if caller.is_owner:
        return Memory(shared)
    if caller.person is not None:
        return Memory(shared, MemoryStore(person_directory(shared.directory, caller.person)))
    own = user_directory(shared.directory, caller.platform, caller.user_id)
    return Memory(shared, MemoryStore(own))


def adopt(root: Path, person: str, accounts: list[tuple[str, str]]) -> None:
    """A person's linked memory starts from what each account kept alone: every entry
    it lacks is added, in the accounts' order, as far as each file's cap allows (what
    does not fit stays in the account's own files). Blocking."""
    into = MemoryStore(person_directory(root, person))
    for platform, user_id in accounts:
        own = MemoryStore(user_directory(root, platform, user_id))
        for target in FILES:
            for entry in own.entries(target):
                try:
                    into.add(target, entry)
                except MemoryRefused:
                    break  # full: the rest stays in the account's own files


class Memory:
    """One caller's memory. Owners (`own` None) write and read the owner-wide files; a
    user writes only their own files and reads the owner-wide notes beside them."""

    def __init__(self, shared: MemoryStore, own: MemoryStore | None = None) -> None:
        self.shared = shared
        self.own = own

    def _store(self, target: str) -> MemoryStore:
        return self.own if self.own is not None else self.shared

    def add(self, target: str, text: str) -> str:
        return self._store(target).add(target, text)

    def replace(self, target: str, old: str, text: str) -> str:
        return self._store(target).replace(target, old, text)

    def remove(self, target: str, old: str) -> str:
        return self._store(target).remove(target, old)

    def prompt_block(self) -> str:
        if self.own is None:
            return self.shared.prompt_block()
        shared = self.shared.prompt_block(("memory",)).replace(
            f"## {TITLES['memory']}", "## Notes the owner keeps for everyone", 1
        )
        return "\n\n".join(b for b in (shared, self.own.prompt_block()) if b)
