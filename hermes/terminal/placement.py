"""Who runs where: the one rule that picks a command's backend.

- A user's commands always run in the sandbox, with `terminal.network.users`; no setting
  gives users the host. Without a working sandbox users get no terminal at all.
- An owner's run on the backend (`terminal.backend`: this machine, or ssh), unless
  `terminal.sandbox.owner: sandbox`; in the sandbox an owner gets `public` network (and
  with no sandbox here, each such command asks an owner first).
- A turn whose context holds untrusted text (a web page, an MCP server's answer, someone
  else's message or mail, a file sent) runs an owner's command as
  `terminal.after_untrusted` says: in the sandbox (the default), after an owner's yes,
  or on the backend as any other. The turn knows this from where its context came from
  (hermes.agent.untrusted), never from the command's text. With no sandbox here, such a
  command asks an owner first.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs

from hermes.config import Role
from hermes.terminal.backends.base import Backend, BackendUnavailable, Network
from hermes.terminal.backends.host import Host
from hermes.terminal.backends.sandbox import Sandbox
from hermes.terminal.backends.ssh import Ssh
from hermes.terminal.settings import TerminalConfig

log = logging.getLogger(__name__)


@attrs.frozen
class Placement:
    """Where one command runs and why. `backend` None: nowhere (`why` says why); `ask`:
    an owner approves before it runs (`why` is the reason asked); `pass_env` False: the
    variables `agent.tools.pass_env` lets through stay out (the owner's, never a user's)."""

    backend: Backend | None
    network: Network = "none"
    why: str = ""  # shown beside the command's tool line when it says more than the role
    ask: bool = False
    pass_env: bool = True  # what agent.tools.pass_env names goes with it (an owner's only)

    @property
    def confined(self) -> bool:
        return self.backend is not None and self.backend.confined


class Backends:
    """The backends serve has, and `place`, the rule above."""

    def __init__(
        self,
        config: TerminalConfig,
        unconfined: Backend,
        sandbox: Sandbox | None,
        sandbox_problem: str | None = None,
    ) -> None:
        """`sandbox` None: there is none, for `sandbox_problem` (said by doctor, /whoami
        and every refusal)."""
        self.config = config
        self.unconfined = unconfined
        self.sandbox = sandbox
        self.sandbox_problem = sandbox_problem if sandbox is None else None

    @classmethod
    def host_only(cls) -> Backends:
        """This machine for everyone and no sandbox: for code that runs no turn of a user
        (tests, one-shot tools)."""
        config = TerminalConfig()
        return cls(config, Host(), None, "no sandbox is set up here")

    def place(self, role: Role, untrusted: str | None = None) -> Placement:
        """Where `role`'s next command runs; `untrusted`: why the turn's context holds text
        from outside an owner's hands (None: it holds none)."""
        if role != "owner":
            if self.sandbox is None:
                return Placement(None, why=f"no sandbox: {self.sandbox_problem}")
            return Placement(self.sandbox, self.config.network.users, pass_env=False)
        if self.config.sandbox.owner == "sandbox":
            if self.sandbox is not None:
                return Placement(self.sandbox, "public")
            why = f"terminal.sandbox.owner is sandbox and there is none ({self.sandbox_problem})"
            return Placement(self.unconfined, why=why, ask=True)
        if untrusted is None or self.config.after_untrusted == "host":
            return Placement(self.unconfined)
        because = f"this conversation holds untrusted text ({untrusted})"
        if self.config.after_untrusted == "sandbox" and self.sandbox is not None:
            return Placement(self.sandbox, "public", why=f"sandboxed: {because}")
        where = "" if self.sandbox else f" and there is no sandbox ({self.sandbox_problem})"
        return Placement(self.unconfined, why=f"{because}{where}", ask=True)

    def describe(self) -> dict[str, Any]:
        """What each role gets, for `hermes doctor` and /whoami: `place`'s answers, said."""
        return {
            "backend": self.unconfined.name,
            "sandbox": "works" if self.sandbox is not None else self.sandbox_problem,
            "owner": self._said(self.place("owner")),
            "owner_after_untrusted_text": self._said(self.place("owner", "untrusted text")),
            "user": self._said(self.place("user")),
        }

    def _said(self, placement: Placement) -> str:
        if placement.backend is None:
            return f"no terminal ({self.sandbox_problem})"
        where = placement.backend.name
        if placement.confined:
            where += f" (network {placement.network})"
        return f"{where} after an owner's yes" if placement.ask else where


def backends_for(config: TerminalConfig, home: Path) -> Backends:
    """The backends of a serve (or a `hermes cron run`) of the home at `home`: this
    machine or the ssh machine for owners (`terminal.backend`), and the sandbox if
    bubblewrap works here (tried once, by running
    `true` in it, blocking: it takes milliseconds); where it does not, users get no
    terminal and owners keep this machine, with a warning in the log."""
    unconfined = Ssh(config.ssh) if config.backend == "ssh" else Host()
    try:
        sandbox = Sandbox.find(config.sandbox, home)
        sandbox.probe()
    except BackendUnavailable as exc:
        log.warning(
            "no sandbox for commands: %s; users get no terminal, owners' commands"
            " run unconfined (%s)",
            exc,
            unconfined.name,
        )
        return Backends(config, unconfined, None, str(exc))
    return Backends(config, unconfined, sandbox)
