"""`hermes service install | uninstall`: the systemd unit that keeps serve running.

The commands run as real subprocesses against a unit directory under tmp_path
(XDG_CONFIG_HOME). A system unit (/etc/systemd/system) is only ever printed, or
written in-process with SYSTEM_UNIT_DIR patched to tmp_path: never into /etc.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermes.cli import exit_codes
from hermes.cli.main import main
from hermes.home import HermesHome
from hermes.ops import systemd
from hermes.ops.systemd import render_unit, stop_timeout
from tests.processes import hermes

DRAIN = 40.5


@pytest.fixture
def units(tmp_path: Path, home: HermesHome, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user unit directory, under tmp_path; the home's drain timeout is DRAIN."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SUDO_USER", raising=False)
    home.config_path.write_text(f"gateway:\n  drain_timeout: {DRAIN}\n")
    return tmp_path / "xdg" / "systemd" / "user"


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> values, in order (Environment= repeats, so no configparser)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def one(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    [value] = unit[section][key]
    return value


def assert_serve_contract(unit: dict[str, dict[str, list[str]]], home: HermesHome) -> None:
    service = unit["Service"]
    assert one(unit, "Service", "Restart") == "on-failure"
    assert "2" in one(unit, "Service", "RestartPreventExitStatus").split()
    assert "75" in one(unit, "Service", "RestartForceExitStatus").split()
    assert one(unit, "Service", "KillMode") == "mixed"
    assert one(unit, "Service", "KillSignal") == "SIGTERM"
    assert int(one(unit, "Service", "TimeoutStopSec")) > DRAIN
    assert f"HERMES_HOME={home.root}" in service["Environment"]
    assert one(unit, "Service", "WorkingDirectory") == str(home.root)
    exec_start = shlex.split(one(unit, "Service", "ExecStart"))
    assert exec_start == [sys.executable, "-P", "-m", "hermes.cli.main", "serve"]
    assert int(one(unit, "Unit", "StartLimitBurst")) > 0


def verify(path: Path) -> None:
    """systemd's own check of the unit, where systemd-analyze is installed."""
    if shutil.which("systemd-analyze") is None:
        return
    done = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr


def test_print_shows_the_unit_and_writes_nothing(units: Path, home: HermesHome) -> None:
    done = hermes("service", "install", "--user", "--print")
    assert done.returncode == exit_codes.OK, done.stderr
    unit = parse_unit(done.stdout)
    assert_serve_contract(unit, home)
    assert one(unit, "Install", "WantedBy") == "default.target"
    assert "User" not in unit["Service"]
    assert not units.parent.parent.exists()


def test_install_user_writes_the_unit_and_says_what_to_run(
    units: Path, home: HermesHome, tmp_path: Path
) -> None:
    done = hermes("service", "install", "--user")
    assert done.returncode == exit_codes.OK, done.stderr
    path = units / "hermes.service"
    text = path.read_text()
    assert text == hermes("service", "install", "--user", "--print").stdout
    assert_serve_contract(parse_unit(text), home)
    assert "systemctl --user daemon-reload" in done.stdout
    assert "systemctl --user enable --now hermes" in done.stdout
    assert path.stat().st_mode & 0o777 == 0o644
    verify(path)

    again = hermes("service", "install", "--user")
    assert again.returncode == exit_codes.OK, again.stderr
    assert "unchanged" in again.stdout
    assert path.read_text() == text


def test_the_units_command_line_runs_this_hermes(units: Path, home: HermesHome) -> None:
    """ExecStart as systemd would run it (in the home, with its environment) reaches serve."""
    unit = parse_unit(hermes("service", "install", "--user", "--print").stdout)
    argv = shlex.split(one(unit, "Service", "ExecStart"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for assignment in unit["Service"]["Environment"]:
        key, _, value = assignment.partition("=")
        env[key] = value
    done = subprocess.run(
        [*argv, "--help"],
        cwd=one(unit, "Service", "WorkingDirectory"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: hermes serve" in done.stdout


def test_a_different_unit_is_replaced_only_with_force(units: Path, home: HermesHome) -> None:
    assert hermes("service", "install", "--user").returncode == exit_codes.OK
    path = units / "hermes.service"
    before = path.read_text()
    home.config_path.write_text("gateway:\n  drain_timeout: 100\n")

    refused = hermes("service", "install", "--user")
    assert refused.returncode == exit_codes.FAILED
    assert "--force" in refused.stderr
    assert path.read_text() == before

    forced = hermes("service", "install", "--user", "--force")
    assert forced.returncode == exit_codes.OK, forced.stderr
    assert one(parse_unit(path.read_text()), "Service", "TimeoutStopSec") == "115"


def test_a_bad_config_writes_no_unit(units: Path, home: HermesHome) -> None:
    home.config_path.write_text("gateway:\n  drain_timeout: -1\n")
    done = hermes("service", "install", "--user")
    assert done.returncode == exit_codes.USAGE
    assert "Traceback" not in done.stderr
    assert not units.exists()


def test_uninstall_removes_the_unit(units: Path, home: HermesHome) -> None:
    assert hermes("service", "install", "--user").returncode == exit_codes.OK
    done = hermes("service", "uninstall", "--user")
    assert done.returncode == exit_codes.OK, done.stderr
    assert not (units / "hermes.service").exists()
    assert "systemctl --user daemon-reload" in done.stdout


def test_uninstall_without_a_unit_fails_clearly(units: Path) -> None:
    done = hermes("service", "uninstall", "--user")
    assert done.returncode == exit_codes.FAILED
    assert "nothing to uninstall" in done.stderr
    assert "Traceback" not in done.stderr


def test_uninstall_refuses_while_enabled(units: Path, home: HermesHome) -> None:
    """Removing the file first would strand the links `systemctl disable` has to remove."""
    assert hermes("service", "install", "--user").returncode == exit_codes.OK
    wants = units / "default.target.wants"
    wants.mkdir()
    (wants / "hermes.service").symlink_to(units / "hermes.service")
    done = hermes("service", "uninstall", "--user")
    assert done.returncode == exit_codes.FAILED
    assert "systemctl --user disable --now hermes" in done.stderr
    assert (units / "hermes.service").exists()


def test_uninstall_leaves_a_foreign_unit_alone_without_force(units: Path) -> None:
    units.mkdir(parents=True)
    (units / "hermes.service").write_text("[Service]\nExecStart=/bin/true\n")
    refused = hermes("service", "uninstall", "--user")
    assert refused.returncode == exit_codes.FAILED
    assert (units / "hermes.service").exists()
    assert hermes("service", "uninstall", "--user", "--force").returncode == exit_codes.OK
    assert not (units / "hermes.service").exists()


def test_a_second_home_takes_its_own_name(units: Path, home: HermesHome) -> None:
    done = hermes("service", "install", "--user", "--name", "hermes-work")
    assert done.returncode == exit_codes.OK, done.stderr
    assert (units / "hermes-work.service").exists()
    assert "enable --now hermes-work" in done.stdout
    bad = hermes("service", "install", "--user", "--name", "../evil")
    assert bad.returncode == exit_codes.FAILED
    assert "unit name" in bad.stderr
    assert hermes("service", "uninstall", "--user", "--name", "hermes-work.service").returncode == 0
    assert not (units / "hermes-work.service").exists()


def test_an_unusable_unit_directory_fails_without_a_traceback(
    home: HermesHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(not_a_dir))
    done = hermes("service", "install", "--user")
    assert done.returncode == exit_codes.FAILED
    assert "hermes service: cannot" in done.stderr
    assert "Traceback" not in done.stderr


def test_system_unit_runs_as_the_invoking_user(units: Path, home: HermesHome) -> None:
    done = hermes("service", "install", "--print")
    assert done.returncode == exit_codes.OK, done.stderr
    unit = parse_unit(done.stdout)
    assert_serve_contract(unit, home)
    assert one(unit, "Service", "User") == pwd.getpwuid(os.geteuid()).pw_name
    assert one(unit, "Install", "WantedBy") == "multi-user.target"
    assert one(unit, "Unit", "After") == "network-online.target"
    assert one(unit, "Unit", "Wants") == "network-online.target"


@pytest.mark.skipif(os.geteuid() != 0, reason="sudo's SUDO_USER is honoured only for root")
def test_system_unit_refuses_a_home_its_user_cannot_use(
    units: Path, home: HermesHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through sudo, HERMES_HOME easily resolves to root's home: say so, not a restart loop."""
    monkeypatch.setenv("SUDO_USER", "nobody")
    done = hermes("service", "install", "--print")
    assert done.returncode == exit_codes.FAILED
    assert "belongs to root" in done.stderr
    assert done.stdout == ""


def test_system_install_writes_to_the_system_directory(
    units: Path, home: HermesHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    system = tmp_path / "etc-systemd-system"
    system.mkdir()
    monkeypatch.setattr(systemd, "SYSTEM_UNIT_DIR", system)
    assert main(["service", "install"]) == exit_codes.OK
    assert "systemctl enable --now hermes" in capsys.readouterr().out
    path = system / "hermes.service"
    assert one(parse_unit(path.read_text()), "Install", "WantedBy") == "multi-user.target"
    verify(path)
    assert main(["service", "uninstall"]) == exit_codes.OK
    assert not path.exists()


def test_system_install_without_systemd_or_rights_refuses(
    units: Path, home: HermesHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(systemd, "SYSTEM_UNIT_DIR", tmp_path / "missing")
    assert main(["service", "install"]) == exit_codes.FAILED
    assert "does not exist" in capsys.readouterr().err
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        monkeypatch.setattr(systemd, "SYSTEM_UNIT_DIR", locked)
        assert main(["service", "install"]) == exit_codes.FAILED
        assert "sudo" in capsys.readouterr().err


def test_render_quotes_what_systemd_would_split(tmp_path: Path) -> None:
    home = tmp_path / "a home with 100% spaces"
    unit = parse_unit(render_unit(home, 30, "/opt/py thon/bin/python", run_as=None))
    [env] = unit["Service"]["Environment"][:1]
    assert shlex.split(env.replace("%%", "%")) == [f"HERMES_HOME={home}"]
    assert shlex.split(one(unit, "Service", "ExecStart"))[0] == "/opt/py thon/bin/python"
    assert one(unit, "Service", "TimeoutStopSec") == str(stop_timeout(30)) == "45"
