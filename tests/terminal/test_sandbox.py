"""The sandbox with real bubblewrap: what a user's command sees, reaches and leaves behind.

A command placed in the sandbox (as a user's always is) cannot read HERMES_HOME's
secrets by path, by a symlink it makes, or through /proc; cannot write outside its own
directory; cannot reach serve's ports, the ops port or a private address; sees none of
serve's variables; and its whole tree, setsid'd members and SIGTERM-ignoring ones
included, is gone when it is cancelled."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

import pytest
import trio

from hermes.config import ConfigError
from hermes.terminal.env import EnvPolicy
from hermes.terminal.placement import Backends, backends_for
from hermes.terminal.session import TerminalSession, own_directory
from hermes.terminal.settings import NetworkConfig, SandboxConfig, TerminalConfig
from hermes.terminal.tree import ProcessId

SECRET = "sk-live-sandbox-0123456789"
ENVIRON = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "OPENAI_API_KEY": SECRET,
    "SECRET_KEY": "django-0123456789abc",
    "DATABASE_URL": "postgres://u:hunter22@db/app",
    "GITHUB_TOKEN": "ghp_the_owners_own_0123",  # pass_env names it: the owner's commands'
}


def sandbox_backends(home, **terminal) -> Backends:
    backends = backends_for(TerminalConfig(**terminal), home.root)
    assert backends.sandbox is not None, backends.sandbox_problem
    return backends


@pytest.fixture
def backends(home, require_system):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    home.env_path.write_text(f"OPENAI_API_KEY={SECRET}\n")
    home.serve_token.write_text("serve-token-0123456789\n")
    home.state_db.write_bytes(b"SQLite format 3\x00" + SECRET.encode())
    return sandbox_backends(home)


async def session(home, backends: Backends, name: str = "telegram_1") -> TerminalSession:
    own = await own_directory(home.workspace, name)
    policy = EnvPolicy(allow=frozenset({"GITHUB_TOKEN"}), hidden=(SECRET,))
    return TerminalSession(own, own=own, state_dir=home.root / ".terminal", policy=policy,
                           environ=ENVIRON, backends=backends)  # fmt: skip


async def user_runs(terminal: TerminalSession, command: str):
    placement = terminal.backends.place("user")
    assert placement.confined
    return await terminal.run(command, placement=placement, timeout=30)


async def test_a_users_command_cannot_read_serves_secrets(home, backends):
    terminal = await session(home, backends)
    for path in (home.env_path, home.serve_token, home.state_db):
        result = await user_runs(terminal, f"cat {path}; echo status=$?")
        assert "No such file or directory" in result.output, result.output
        assert result.output.rstrip().endswith("status=1")
    linked = await user_runs(terminal, f"ln -s {home.env_path} env-link; cat env-link; ls -l")
    assert "No such file or directory" in linked.output and "env-link ->" in linked.output
    assert SECRET not in linked.output
    # /proc is the sandbox's own: serve is not in it, nor its environment
    proc = await user_runs(
        terminal, "ls /proc | grep -c '^[0-9]'; cat /proc/*/environ | tr '\\0' '\\n'"
    )
    assert int(proc.output.split()[0]) < 10
    assert SECRET not in proc.output and "[REDACTED]" not in proc.output
    assert not (await user_runs(terminal, f"ls {home.root}")).output.count("state.db")
    other = await own_directory(home.workspace, "telegram_2")
    (other / "theirs.txt").write_text("another user's file")
    assert "No such file" in (await user_runs(terminal, f"cat {other}/theirs.txt")).output


async def test_a_users_command_writes_only_its_own_directory(home, backends, tmp_path):
    terminal = await session(home, backends)
    outside = tmp_path / "written-by-the-sandbox"
    result = await user_runs(
        terminal,
        f"touch /usr/x; touch {home.root}/x; touch {outside}; echo private > /tmp/f; cat /tmp/f;"
        " echo mine > mine.txt; pwd; echo HOME=$HOME",
    )
    assert "cannot touch '/usr/x': Read-only file system" in result.output
    # HERMES_HOME and the test's directory lie under /tmp here, which is the sandbox's own:
    # what it wrote there is gone with it, never on this machine
    assert "private" in result.output
    assert not outside.exists() and not (home.root / "x").exists()
    assert not Path("/tmp/f").exists() or Path("/tmp/f").read_text() != "private\n"
    assert (terminal.own / "mine.txt").read_text() == "mine\n"
    assert f"\n{terminal.own}\nHOME={terminal.own}" in result.output


async def test_a_users_command_sees_none_of_serves_variables(home, backends):
    terminal = await session(home, backends)
    result = await user_runs(terminal, "env")
    names = {line.split("=", 1)[0] for line in result.output.splitlines() if "=" in line}
    assert not names & {"OPENAI_API_KEY", "SECRET_KEY", "DATABASE_URL", "HERMES_HOME"}
    assert "GITHUB_TOKEN" not in names  # what pass_env lets through is the owner's
    assert "hunter22" not in result.output and SECRET not in result.output
    owners = terminal.backends.place("owner", untrusted="web_fetch of example.org")
    assert owners.confined
    mine = await terminal.run("echo $GITHUB_TOKEN", placement=owners)
    assert mine.output.strip() == "ghp_the_owners_own_0123"


@pytest.fixture
def listening():
    """A port serving on 127.0.0.1, as serve's endpoint and the ops server do."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


async def test_with_no_network_nothing_is_reachable(home, backends, listening):
    terminal = await session(home, backends)
    result = await user_runs(
        terminal, f"(echo > /dev/tcp/127.0.0.1/{listening}) 2>&1; echo status=$?; hostname"
    )
    assert "Connection refused" in result.output and "status=1" in result.output
    assert "hermes-sandbox" in result.output


async def test_public_network_reaches_no_loopback_private_or_metadata_address(home, listening):
    backends = sandbox_backends(home, network=NetworkConfig(users="public"))
    terminal = await session(home, backends)
    assert terminal.backends.place("user").network == "public"
    result = await user_runs(
        terminal,
        f"(echo > /dev/tcp/127.0.0.1/{listening}) 2>&1; echo direct=$?;"
        f" curl -s -S -m 10 http://127.0.0.1:{listening}/; echo;"
        " curl -s -S -m 10 http://10.1.2.3/; echo;"
        " curl -s -S -m 10 https://169.254.169.254/latest/meta-data/ 2>&1; echo;"
        " curl -s -S -m 10 http://[::1]:80/; echo",
    )
    out = result.output
    assert "Connection refused" in out and "direct=1" in out  # its loopback is its own
    assert "127.0.0.1 is loopback" in out
    assert "10.1.2.3 is private" in out
    assert "403" in out  # CONNECT to the metadata address refused
    assert "::1 is loopback" in out


MEMBERS = ("escaped", "stubborn", "leader")  # STUBBORN's, each named `<marker>-<member>`


def sandboxed_pids(marker: str) -> list[ProcessId]:
    """The members of STUBBORN's tree for `marker` running on this machine, by the name
    `exec -a` gave each (not the shells and bwrap whose arguments merely hold it, nor a
    `setsid -f` that is about to exit)."""
    names = {f"{marker}-{member}".encode() for member in MEMBERS}
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv0 = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0 in names and (proc := ProcessId.of(int(name))) is not None:
            found.append(proc)
    return found


# A tree that ignores SIGTERM, with a member that escaped into a session of its own.
STUBBORN = """\
trap '' TERM
setsid -f bash -c "trap '' TERM; exec -a {marker}-escaped sleep 300"
bash -c "trap '' TERM; exec -a {marker}-stubborn sleep 300" | (exec -a {marker}-leader cat)
"""


async def test_cancelling_a_sandboxed_tree_kills_all_of_it(home, backends):
    terminal = await session(home, backends)
    marker = f"hermes-test-{secrets.token_hex(4)}"
    with trio.move_on_after(60):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(user_runs, terminal, STUBBORN.format(marker=marker))
                while len(sandboxed_pids(marker)) < 3:  # noqa: ASYNC110 (a tree of processes)
                    await trio.sleep(0.05)
                tree = sandboxed_pids(marker)
                assert all(os.getsid(p.pid) != os.getsid(0) for p in tree)
                scope.cancel()
    assert scope.cancelled_caught
    assert not [p for p in tree if p.alive()]
    assert not sandboxed_pids(marker)


async def test_an_owner_gets_the_host_and_a_user_no_terminal_without_a_sandbox(home):
    missing = "bubblewrap is not installed (apt-get install bubblewrap)"
    backends = Backends(TerminalConfig(), backends_for(TerminalConfig(), home.root).unconfined,
                        None, missing)  # fmt: skip
    assert backends.place("owner").backend.name == "host"
    nowhere = backends.place("user")
    assert nowhere.backend is None and "bubblewrap is not installed" in nowhere.why
    asked = backends.place("owner", untrusted="web_fetch of example.org")
    assert asked.ask and "there is no sandbox" in asked.why


def test_read_only_never_shows_hermes_home(home, tmp_path):
    """Not a part of it, not a directory holding it, not one by way of a link."""
    link = tmp_path / "looks-harmless"
    link.symlink_to(home.root.parent)
    for path in (home.root / "cache", home.root.parent, link):
        config = TerminalConfig(sandbox=SandboxConfig(read_only=(str(path),)))
        with pytest.raises(ConfigError, match="read_only: .* holds or is inside HERMES_HOME"):
            backends_for(config, home.root)


async def test_a_sandboxed_command_cannot_name_where_the_next_starts(home, backends):
    """It can read its own mark and print it: only its own directory and /tmp are taken."""
    terminal = await session(home, backends)
    placement = terminal.backends.place("user")
    forge = (
        "mark=$(tr '\\0' '\\n' < /proc/$$/cmdline | grep -o 'HERMES-CWD-[0-9a-f]*:' | head -1);"
        " trap - EXIT; printf '\\n%s%s\\n' \"$mark\" /home/owner/safe"
    )
    await terminal.run(forge, placement=placement)
    assert terminal.cwd_in(placement.backend) == str(terminal.own)
    await terminal.run("mkdir -p sub && cd sub", placement=placement)
    assert terminal.cwd_in(placement.backend) == str(terminal.own / "sub")
