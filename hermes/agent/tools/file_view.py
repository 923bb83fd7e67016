"""What one caller's file tools may reach: what that caller's commands may see.

The file tools (hermes.agent.tools.files) read and write files of this machine without
running a command, so they must not reach further than a command of the same turn would:
a user's files are their session's own directory (all a sandboxed command sees
read-write), and an owner's are the whole machine less HERMES_HOME's secrets, unless the
turn's commands would be confined or asked about (untrusted text), or run on another
machine (ssh), where these tools, which reach this machine, have nothing to offer.

`FileView.resolve` is the one function that decides: it follows links and answers with
the real path, or refuses. A path checked and then opened is two steps, and a link
swapped in between would lead anywhere; so the tools also check the real path of what
they opened (`opened_path`) with `FileView.holds`.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from hermes.agent.tools.base import ToolContext, ToolError
from hermes.home import default_home


class FileRefused(ToolError):
    """A path the caller's file tools may not reach; the message says why and what they
    may reach."""


def _under(path: Path, top: Path) -> bool:
    return path == top or path.is_relative_to(top)


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def opened_path(fd: int) -> Path:
    """The real path of what the descriptor `fd` has open (the kernel's word, after any
    link followed on the way)."""
    return Path(os.readlink(f"/proc/self/fd/{fd}"))


@attrs.frozen
class FileView:
    """What one caller's file tools may reach: `roots` (None: the whole machine) less
    `hidden`, where `unhidden` (each inside a hidden one) is reachable again; relative
    paths resolve against `base`. Every path held is a real one (links followed)."""

    roots: tuple[Path, ...] | None
    hidden: tuple[Path, ...]
    base: Path
    unhidden: tuple[Path, ...] = ()

    def resolve(self, path: str) -> Path:
        """The real path (links followed) of `path` if the view holds it, else FileRefused.
        The tools also check what they actually opened with `holds`."""
        if not isinstance(path, str) or not path:
            raise ToolError("a path is needed")
        if "\0" in path:
            raise FileRefused("a path holds no NUL character")
        real = _real(self.base / path)  # an absolute path replaces the base
        if not self.holds(real):
            raise FileRefused(f"{path} is not a path your file tools may reach: {self.reach}")
        return real

    def holds(self, real: Path) -> bool:
        """Whether the real path `real` lies in the view."""
        if self.roots is not None and not any(_under(real, r) for r in self.roots):
            return False
        if any(_under(real, h) for h in self.hidden):
            return any(_under(real, u) for u in self.unhidden)
        return True

    def reaches_into(self, real: Path) -> bool:
        """Whether anything under the real directory `real` may be held (a search prunes
        the directories where nothing can be)."""
        if self.roots is not None and not any(
            _under(real, r) or _under(r, real) for r in self.roots
        ):
            return False
        if any(_under(real, h) for h in self.hidden):
            return any(_under(real, u) or _under(u, real) for u in self.unhidden)
        return True

    @property
    def reach(self) -> str:
        """What the view holds, said for a refusal."""
        if self.roots is None:
            said = "any file of this machine"
        else:
            said = "only files under " + ", ".join(map(str, self.roots))
        if self.hidden:
            said += " but none under " + ", ".join(map(str, self.hidden))
            if self.unhidden:
                said += " (except under " + ", ".join(map(str, self.unhidden)) + ")"
        return said


def view_for(ctx: ToolContext) -> FileView:
    """What `ctx`'s caller's file tools may reach: what a command of its turn would see,
    by its placement (hermes.terminal.placement, asked as the terminal tool asks).

    - Commands nowhere (a user with no sandbox here): FileRefused, with the reason.
    - Commands confined (the sandbox), or an owner's that would need a yes to run
      (`placement.ask`: the turn read untrusted text, or there is no sandbox for an owner
      who asked for one): the session's own directory, the one a sandboxed command of it
      gets read-write (`ctx.terminal.own`), and nothing else.
    - An owner's commands unconfined on this machine (backend `host`): the whole machine,
      but HERMES_HOME (its .env, state.db, serve.token, the media cache, other sessions'
      tools' output) is hidden except its `workspace/` directory, where sessions work,
      and so is serve's own /proc entry (its environment and memory hold the secrets).
    - An owner's commands on another machine (`ssh`), or any other backend: FileRefused:
      these tools reach this machine, so the terminal tool is the way to those files.

    Relative paths resolve against the directory the session's shell was left in on that
    backend when the view holds it, else against the session's directory (its own one
    when confined, else its working directory)."""
    terminal = ctx.terminal
    placement = terminal.backends.place(ctx.caller.role, ctx.untrusted)
    backend = placement.backend
    if backend is None:
        raise FileRefused(f"files cannot be reached here: {placement.why}")
    if placement.confined or placement.ask:
        own = _real(terminal.own)
        view = FileView((own,), (), own)
        if placement.why:
            ctx.note(f"files only under {own}: {placement.why}")
        fallback = own
    elif backend.name == "host":
        homes = _homes(ctx)
        hidden = (*homes, Path(f"/proc/{os.getpid()}"))
        view = FileView(None, hidden, Path("/"), tuple(_real(h / "workspace") for h in homes))
        fallback = _real(terminal.workdir)
    elif backend.name == "ssh":
        raise FileRefused(
            "the file tools reach this machine, while this owner's commands run on another"
            " one over ssh: use the terminal tool for files there"
        )
    else:
        raise FileRefused(
            f"the file tools know no files of the {backend.name} backend: use the terminal tool"
        )
    cwd = terminal.cwd_in(backend)
    base = fallback
    if cwd.startswith("/"):
        real = _real(cwd)
        if real.is_dir() and view.holds(real):
            base = real
    return attrs.evolve(view, base=base)


def _homes(ctx: ToolContext) -> tuple[Path, ...]:
    """Every HERMES_HOME this turn may belong to, real paths: the session's (its files),
    the one the sandbox hides, and the one serve reads from the environment (a cron
    turn knows no files of its own)."""
    found = [default_home()]
    if ctx.files is not None:
        found.append(ctx.files.home)
    sandbox = ctx.terminal.backends.sandbox
    if sandbox is not None:
        found.append(sandbox.home)
    return tuple(dict.fromkeys(_real(h.absolute()) for h in found))
