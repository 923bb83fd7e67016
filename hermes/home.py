"""HERMES_HOME: where everything of one gateway lives, created with private modes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import attrs

DIR_MODE = 0o700
SECRET_MODE = 0o600


def default_home() -> Path:
    """HERMES_HOME from the environment, else ~/.hermes."""
    env = os.environ.get("HERMES_HOME")
    return Path(env).expanduser() if env else Path.home() / ".hermes"


@attrs.frozen
class HermesHome:
    """The layout of one HERMES_HOME. Nothing is created until `ensure()`."""

    root: Path

    @classmethod
    def from_env(cls) -> HermesHome:
        return cls(default_home().absolute())

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def env_path(self) -> Path:
        return self.root / ".env"

    @property
    def state_db(self) -> Path:
        return self.root / "state.db"

    @property
    def memories(self) -> Path:
        return self.root / "memories"

    @property
    def scripts(self) -> Path:
        return self.root / "scripts"

    @property
    def cron_output(self) -> Path:
        return self.root / "cron" / "output"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def cache(self) -> Path:
        """Downloaded media (a chat's photos, documents, voice notes), size-capped."""
        return self.root / "cache"

    @property
    def outgoing(self) -> Path:
        """Files queued to send (send_file, voice replies): a copy per outbox row, so the
        file sent is the one queued even if its original changes."""
        return self.root / "outgoing"

    @property
    def skills(self) -> Path:
        """Skills: shared ones at the top, installed ones quarantined apart until an owner
        enables them, a user's own under users/<platform>/<user>/."""
        return self.root / "skills"

    @property
    def soul(self) -> Path:
        """SOUL.md: the persona, replacing the built-in identity when it exists."""
        return self.root / "SOUL.md"

    @property
    def workspace(self) -> Path:
        """Where the agent's terminal sessions start, one directory per session (never
        HERMES_HOME itself, where the secrets are)."""
        return self.root / "workspace"

    @property
    def serve_token(self) -> Path:
        return self.root / "serve.token"

    @property
    def serve_port(self) -> Path:
        """Where serve writes its endpoint's port, which clients read."""
        return self.root / "serve.port"

    @property
    def ops_port(self) -> Path:
        """Where serve writes the operator surfaces' port (chosen when ops.port is 0)."""
        return self.root / "ops.port"

    @property
    def webhooks_port(self) -> Path:
        """Where serve writes the webhook listener's port."""
        return self.root / "webhooks.port"

    def listener_port(self, name: str) -> Path:
        """Where serve writes the port of a platform that listens on its own (`name`)."""
        return self.root / f"{name}.port"

    @property
    def port_files(self) -> tuple[Path, ...]:
        """What a running serve writes of its ports: gone when it stops."""
        fixed = (self.serve_port, self.ops_port, self.webhooks_port)
        return fixed + tuple(p for p in sorted(self.root.glob("*.port")) if p not in fixed)

    @property
    def serve_pid(self) -> Path:
        return self.root / "serve.pid"

    def ensure(self) -> HermesHome:
        """Create the layout (directories 0700); tighten modes of existing secret files."""
        for directory in (
            self.root,
            self.memories,
            self.scripts,
            self.root / "cron",
            self.cron_output,
            self.logs,
            self.cache,
            self.outgoing,
            self.workspace,
        ):
            make_private_dir(directory)
        for secret in (self.env_path, self.serve_token):
            if secret.exists():
                os.chmod(secret, SECRET_MODE)
        return self


def path_part(text: str) -> str:
    """Text from outside (a user id, a session id a client chose) as one path component:
    letters, digits, _ and - as they are, every other character as %XX, so nothing can
    climb out of its directory (`..`, `/`)."""
    return re.sub(r"[^A-Za-z0-9_-]", lambda m: "".join(f"%{b:02x}" for b in m[0].encode()), text)


def make_private_dir(path: Path) -> None:
    """mkdir -p with mode 0700 on every directory it creates, and on `path` itself."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)


def write_secret_file(path: Path, content: str) -> None:
    """Write a file that only its owner may read: created 0600, never briefly wider, and
    whole: written beside it and renamed over it, so a crash leaves the old file or the
    new one (.env's other secrets are never lost to a half-written rewrite)."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, SECRET_MODE)
    try:
        os.fchmod(fd, SECRET_MODE)
        os.write(fd, content.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
