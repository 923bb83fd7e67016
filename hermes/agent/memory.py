"""MEMORY.md (the agent's notes) and USER.md (about the user), with size caps.

Entries are lines starting with "- ". Both files are loaded into the system
prompt, so the caps keep every turn's prompt bounded. Every turn asks for
that block, so it is kept: a change made through the store shows at once,
an edit of the files by hand within RECHECK_SECONDS.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

FILES = {"memory": "MEMORY.md", "user": "USER.md"}
CAPS = {"memory": 2_200, "user": 1_375}  # characters
RECHECK_SECONDS = 1.0


class MemoryRefused(ValueError):
    """A memory change that cannot be made (cap, unknown entry, empty text)."""


class MemoryStore:
    def __init__(self, directory: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self._clock = clock
        self._cache: dict[str, tuple[tuple[int, int], list[str]]] = {}
        self._block: tuple[float, str] | None = None  # (when checked, the prompt block)

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
        self._block = None

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

    def prompt_block(self) -> str:
        """Both files for the system prompt; the files are looked at again (two
        stats) at most once per RECHECK_SECONDS."""
        now = self._clock()
        if self._block is not None and now - self._block[0] < RECHECK_SECONDS:
            return self._block[1]
        parts = []
        for target, title in (("memory", "Your notes"), ("user", "About the user")):
            entries = self.entries(target)
            if entries:
                parts.append(f"## {title}\n" + "\n".join(f"- {e}" for e in entries))
        block = "\n\n".join(parts)
        self._block = (now, block)
        return block
