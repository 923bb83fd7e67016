"""The files that shape the agent's prompt besides memory: the persona (HERMES_HOME/SOUL.md,
the owner's own words, replacing the built-in identity) and a project's context
(AGENTS.md, .hermes.md in the directory its commands start in).

Each is capped, and re-read when it changes (a stat per turn, as memory is). A project
file may come from anywhere (a cloned repository), so it is scanned: the lines the scan
flags are left out of the prompt, and what it found is kept for the owner to see
(`hermes doctor`, the dashboard)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from hermes.agent.scan import Finding, without_findings
from hermes.agent.tools.file_view import opened_path

SOUL_CHARS = 4_000
PROJECT_CHARS = 8_000  # every project file of one prompt together
PROJECT_FILES = ("AGENTS.md", ".hermes.md")
READ_BYTES = 256_000  # read at most this much of one file (then cut to its cap)


@attrs.frozen
class Loaded:
    """One context file as the prompt gets it: `text` without the flagged lines,
    `findings` what the scan found, `size` the file's characters before any cut, `real`
    the real path of what was opened."""

    path: Path
    text: str
    findings: tuple[Finding, ...] = ()
    size: int = 0
    real: Path | None = None


class ContextFiles:
    """SOUL.md and the project files, each read again only when its stat changed."""

    def __init__(self, soul: Path | None = None) -> None:
        self.soul = soul
        self._kept: dict[Path, tuple[tuple[int, int, int], Loaded | None]] = {}

    def persona(self, default: str) -> str:
        """SOUL.md's text within SOUL_CHARS when it exists and says something, else
        `default` (the built-in identity)."""
        if self.soul is None:
            return default
        loaded = self._load(self.soul, scan=False)
        if loaded is None or not loaded.text.strip():
            return default
        return _cut(loaded.text.strip(), SOUL_CHARS, self.soul)

    def project(
        self, directories: Iterable[Path], holds: Callable[[Path], bool] | None = None
    ) -> list[Loaded]:
        """The project files found in `directories` (each once, in order) whose real path
        `holds` admits (None: one inside the directory it was found in). A file that is
        itself a link is never read."""
        found, seen = [], set()
        for directory in directories:
            inside = holds or _within(directory)
            for name in PROJECT_FILES:
                loaded = self._load(directory / name, scan=True)
                if loaded is None or loaded.real is None or loaded.real in seen:
                    continue
                if inside(loaded.real):
                    seen.add(loaded.real)
                    found.append(loaded)
        return found

    def findings(self) -> list[Loaded]:
        """The project files read so far whose scan found something (the dashboard's)."""
        kept = list(self._kept.values())  # prompts of other sessions read on in threads
        return [loaded for _, loaded in kept if loaded is not None and loaded.findings]

    def _load(self, path: Path, *, scan: bool) -> Loaded | None:
        try:
            st = os.lstat(path)
        except OSError:
            self._kept.pop(path, None)
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        kept = self._kept.get(path)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        loaded = read_context_file(path, scan=scan)
        self._kept[path] = (stamp, loaded)
        return loaded


def read_context_file(path: Path, *, scan: bool = True) -> Loaded | None:
    """The file at `path` as a prompt would take it (None: not a readable text file, or
    a link): its text less the lines the scan flags when `scan`."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC  # a fifo: no wait
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        real = opened_path(fd)
        data = f.read(READ_BYTES)
    text = data.decode("utf-8", errors="replace")
    if not scan:
        return Loaded(path, text, size=len(text), real=real)
    kept, findings = without_findings(text, path.name)
    return Loaded(path, kept, tuple(findings), len(text), real)


def _within(directory: Path) -> Callable[[Path], bool]:
    top = Path(os.path.realpath(directory))
    return lambda real: real.is_relative_to(top)


def project_block(files: list[Loaded]) -> str:
    """The project files for the system prompt, PROJECT_CHARS in all."""
    parts, room = [], PROJECT_CHARS
    for loaded in files:
        text = loaded.text.strip()
        if not text or room <= 0:
            continue
        part = _cut(text, room, loaded.path)
        lines = len({f.line for f in loaded.findings if f.line is not None})
        if lines:
            part += (
                f"\n[hermes left out {lines} line(s) of {loaded.path.name} that its scan flagged]"
            )
        parts.append(f"From {loaded.path}:\n{part}")
        room -= len(part)
    if not parts:
        return ""
    return "## Project context\n" + "\n\n".join(parts)


def _cut(text: str, cap: int, path: Path) -> str:
    if len(text) <= cap:
        return text
    return f"{text[:cap]}\n[cut: {path} holds {len(text)} characters; the prompt keeps {cap}]"
