"""The systemd unit that runs `hermes serve` for one HERMES_HOME, and where it goes.

Rendering is a pure function of the home, the drain timeout, the interpreter and
the service user, so `--print` and `install` show the same text and a reinstall
can tell an identical unit from a different one. The unit encodes serve's exit
contract: 75 (EX_TEMPFAIL, also a frozen event loop) asks to be restarted, 2 (a
bad config.yaml) must not be, since a restart would fail the same way.

One unit per name, `hermes` by default: a second home on one machine takes its
own `--name` (hermes-work.service), so installs for different homes never
overwrite each other silently.
"""

from __future__ import annotations

import math
import os
import pwd
import re
from pathlib import Path

from hermes.actors.errors import Invalid

DEFAULT_NAME = "hermes"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
STOP_MARGIN = 15  # seconds beyond the drain for the shielded flush and the exit itself
RESTART_SEC = 5
START_LIMIT_INTERVAL = 300  # a crash loop gives up after START_LIMIT_BURST starts in this window
START_LIMIT_BURST = 5
MARKER = "# Written by `hermes service install`"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_NEEDS_QUOTES = re.compile(r"[\s\"'\\;]")


class UnitError(Invalid):
    """A unit that cannot be rendered or placed; the message says what to do instead."""


def unit_name(name: str) -> str:
    """`hermes` or `hermes.service` -> `hermes.service`; refuse names systemd would not take."""
    base = name.removesuffix(".service")
    if not _NAME.fullmatch(base):
        raise UnitError(f"not a usable unit name: {name!r} (letters, digits, _ . : - only)")
    return f"{base}.service"


def unit_dir(user: bool) -> Path:
    """Where systemd looks for admin-written units: per user, or system-wide."""
    if not user:
        return SYSTEM_UNIT_DIR
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


def stop_timeout(drain_timeout: float) -> int:
    """TimeoutStopSec: above the drain, so systemd's SIGKILL never cuts a drain short."""
    return math.ceil(drain_timeout) + STOP_MARGIN


def invoking_user() -> str:
    """The user a system unit runs serve as: who ran the command, also through sudo."""
    if os.geteuid() == 0 and os.environ.get("SUDO_USER"):
        return os.environ["SUDO_USER"]
    return pwd.getpwuid(os.geteuid()).pw_name


def home_problem(home: Path, user: str) -> str | None:
    """Why serve running as `user` could not use `home` (a 0700 directory), or None.

    A system unit is usually installed through sudo, where HERMES_HOME easily
    resolves to root's home; catching that here beats a unit in a restart loop.
    """
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return f"no such user: {user}"
    try:
        owner = home.stat().st_uid
    except FileNotFoundError:
        return (
            f"HERMES_HOME {home} does not exist yet; create it as {user} first "
            f"(run `hermes serve` once, or mkdir -m 700 {home} && chown {user} {home})"
        )
    if owner != uid:
        try:
            owner_name = pwd.getpwuid(owner).pw_name
        except KeyError:
            owner_name = str(owner)
        return (
            f"HERMES_HOME {home} belongs to {owner_name}, but the unit would run serve as "
            f"{user}; set HERMES_HOME to {user}'s home (sudo HERMES_HOME=... hermes ...)"
        )
    return None


def _no_control(value: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UnitError(f"a unit file cannot hold control characters: {value!r}")
    return value


def _specifiers(value: str) -> str:
    """Escape `%`, which systemd would expand as a specifier."""
    return _no_control(value).replace("%", "%%")


def _quoted(value: str) -> str:
    """One word of a unit setting, quoted only when systemd would split or unescape it."""
    if value and not _NEEDS_QUOTES.search(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _exec_word(value: str) -> str:
    """One word of ExecStart=: specifiers, then `$` (variable expansion), then quoting."""
    return _quoted(_specifiers(value).replace("$", "$$"))


def render_unit(home: Path, drain_timeout: float, executable: str, run_as: str | None) -> str:
    """The unit text: a user unit (systemctl --user) when `run_as` is None, else a system
    unit that runs serve as `run_as`.

    ExecStart runs `executable -P -m hermes.cli.main serve`: the interpreter that
    runs this install, so the unit keeps its virtualenv; -P keeps the working
    directory (the home, where the agent writes files) off sys.path.
    """
    home_text = _specifiers(str(home))
    unit = [
        f"{MARKER} for HERMES_HOME={_no_control(str(home))}.",
        "# Reinstall with --force after changing gateway.drain_timeout (TimeoutStopSec).",
        "[Unit]",
        f"Description=hermes AI-agent gateway ({home_text})",
    ]
    if run_as is not None:
        unit += ["After=network-online.target", "Wants=network-online.target"]
    unit += [
        f"# A crash loop gives up after {START_LIMIT_BURST} starts in {START_LIMIT_INTERVAL} s;"
        " `systemctl reset-failed` to try again.",
        f"StartLimitIntervalSec={START_LIMIT_INTERVAL}",
        f"StartLimitBurst={START_LIMIT_BURST}",
        "",
        "[Service]",
        "Type=exec",
    ]
    if run_as is not None:
        unit.append(f"User={_no_control(run_as)}")
    unit += [
        f"WorkingDirectory={home_text}",
        "Environment=" + _quoted(f"HERMES_HOME={home_text}"),
        "Environment=PYTHONUNBUFFERED=1",
        "ExecStart="
        + " ".join(_exec_word(w) for w in (executable, "-P", "-m", "hermes.cli.main", "serve")),
        "# serve exits 75 to be restarted; 2 is a bad config.yaml, which a restart would not fix.",
        "Restart=on-failure",
        f"RestartSec={RESTART_SEC}",
        "RestartForceExitStatus=75",
        "RestartPreventExitStatus=2",
        "# SIGTERM to serve alone: it drains and kills its own process trees; at the",
        "# timeout, SIGKILL to everything left in the unit.",
        "KillMode=mixed",
        "KillSignal=SIGTERM",
        f"# gateway.drain_timeout ({drain_timeout:g} s) + {STOP_MARGIN} s to flush and exit.",
        f"TimeoutStopSec={stop_timeout(drain_timeout)}",
        "",
        "[Install]",
        f"WantedBy={'default.target' if run_as is None else 'multi-user.target'}",
    ]
    return "\n".join(unit) + "\n"


def enabled_links(path: Path) -> list[Path]:
    """The `*.wants/` and `*.requires/` links that `systemctl enable` made for this unit.

    Removing the unit file first would strand them: `systemctl disable` needs the file.
    """
    found = []
    for pattern in (f"*.wants/{path.name}", f"*.requires/{path.name}"):
        found += [link for link in path.parent.glob(pattern) if link.is_symlink()]
    return sorted(found)


def write_unit(path: Path, text: str) -> None:
    """Write the unit in one step (a temp file renamed over it), mode 0644 as systemd expects."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w") as f:
        os.fchmod(f.fileno(), 0o644)
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
