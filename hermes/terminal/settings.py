"""The terminal's section of config.yaml (`terminal`): where commands run.

The docstring under each field of these classes is its line in docs/configuration.md.
"""

from __future__ import annotations

from typing import Literal

import attrs

from hermes.config import BadValue, absolute_paths, not_blank, port_number, positive

HIDDEN_IN_SANDBOX = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/etc/hermes",
)


@attrs.frozen
class SandboxConfig:
    """The bubblewrap sandbox: what a confined command sees of this machine. It sees
    /usr, /bin, /lib*, /etc (less `hide`) and `read_only`, read-only; a private /tmp; its
    session's directory read-write, as its working directory and HOME; nothing else."""

    owner: Literal["host", "sandbox"] = "host"
    """Where an owner's commands run: `host` (the backend, unconfined, as a personal
    assistant that manages its own server expects) or `sandbox`. A user's always run in
    the sandbox."""
    hide: tuple[str, ...] = attrs.field(default=HIDDEN_IN_SANDBOX, validator=absolute_paths)
    """Paths under /etc (or `read_only`) a sandboxed command never sees (globs; absolute)."""
    read_only: tuple[str, ...] = attrs.field(default=(), validator=absolute_paths)
    """More paths a sandboxed command sees, read-only (`/opt`, a toolchain); never
    HERMES_HOME or a directory holding it."""


@attrs.frozen
class NetworkConfig:
    """What a sandboxed command may reach over the network."""

    users: Literal["none", "public"] = "none"
    """A user's commands: `none` (no network at all) or `public` (the public internet
    through hermes's proxy: never loopback, private ranges or the cloud metadata
    address). An owner's sandboxed commands always get `public`."""


@attrs.frozen
class SshConfig:
    """The ssh backend: an owner's unconfined commands run on another machine, through
    this machine's OpenSSH client."""

    host: str | None = attrs.field(default=None, validator=not_blank)
    """The machine's name or address (required with `backend: ssh`)."""
    port: int = attrs.field(default=22, validator=port_number)
    """Its SSH port."""
    user: str | None = attrs.field(default=None, validator=not_blank)
    """The user to log in as (required with `backend: ssh`)."""
    key: str | None = attrs.field(default=None, validator=not_blank)
    """The private key's path on this machine (required with `backend: ssh`)."""
    known_hosts: str | None = attrs.field(default=None, validator=not_blank)
    """A known_hosts file holding the machine's host key; unset: ~/.ssh/known_hosts. An
    unknown or changed host key refuses the connection."""
    workdir: str | None = attrs.field(default=None, validator=not_blank)
    """Where commands start on the machine; unset: the user's home there."""
    connect_timeout: float = attrs.field(default=10.0, validator=positive)
    """Seconds to wait for the connection."""


@attrs.frozen
class TerminalConfig:
    """Where commands run: the backend for an owner's, the sandbox for a user's and for a
    turn that read untrusted text."""

    backend: Literal["host", "ssh"] = "host"
    """Where unconfined commands run: `host` (this machine) or `ssh` (the machine `ssh`
    names)."""
    sandbox: SandboxConfig = SandboxConfig()
    """The sandbox (bubblewrap) and who runs in it."""
    network: NetworkConfig = NetworkConfig()
    """Network access in the sandbox."""
    after_untrusted: Literal["sandbox", "approve", "host"] = "sandbox"
    """An owner's command in a turn whose context holds untrusted text (a web page, an MCP
    server's answer, someone else's message or mail, a file sent): `sandbox` runs it
    confined, `approve` asks an owner before it runs unconfined, `host` runs it as any
    other."""
    ssh: SshConfig = SshConfig()
    """The ssh backend's machine."""

    def __attrs_post_init__(self) -> None:
        if self.backend == "ssh":
            missing = [k for k in ("host", "user", "key") if getattr(self.ssh, k) is None]
            if missing:
                raise BadValue(f"ssh: backend ssh needs {', '.join(missing)}")
