"""The ssh backend against a real OpenSSH server (tests/fakes/sshd.py) on 127.0.0.1.

The remote machine is this one, so a test sees what a command left running there in
/proc, by a marker in its command line; and sshd being the test process's child, a remote
process left behind also fails the check for leftover processes (tests/conftest.py).
Members of a remote tree say they run by writing their name and pid into a fifo the test
reads: that is the event a test waits on."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
import trio

from hermes.adapters.settings import PlatformConfig
from hermes.gateway.settings import Config
from hermes.terminal.backends.base import BackendUnavailable
from hermes.terminal.backends.ssh import Ssh
from hermes.terminal.background import BackgroundProcesses, Kill, Poll, Start, WriteStdin, wait_for
from hermes.terminal.command import RunOptions
from hermes.terminal.env import EnvPolicy
from hermes.terminal.placement import Backends, backends_for
from hermes.terminal.session import TerminalSession
from hermes.terminal.settings import SshConfig, TerminalConfig
from hermes.terminal.tree import ProcessId
from tests.fakes.openai import tool_answer
from tests.fakes.sshd import Sshd, make_key
from tests.gateway.router_harness import running_router
from tests.terminal.test_background import read_until
from tests.terminal.test_sandbox import sandboxed_pids

PASSED = "project-token-0123456789"  # a pass_env value: reaches the remote command only
ENVIRON = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.environ.get("HOME", "/root"),  # the ssh client's own ~/.ssh
    "LANG": "C.UTF-8",
    "PROJECT_TOKEN": PASSED,
    "OPENAI_API_KEY": "sk-live-not-for-commands-0123",
}
GRACE = 0.5
TIMEOUT = 4.0  # real seconds: the remote tree is up well before (its fifo says so)

# A tree that ignores SIGTERM, with a member that escaped into a session of its own; each
# member says it runs (its name and pid, into the fifo) before it becomes a marked sleep.
STUBBORN = """\
trap '' TERM
setsid -f bash -c 'trap "" TERM; echo escaped $$ > {fifo}; exec -a {marker}-escaped sleep 300'
bash -c 'trap "" TERM; echo stubborn $$ > {fifo}; exec -a {marker}-stubborn sleep 300' \
  | (exec -a {marker}-leader cat)
"""


@pytest.fixture
def sshd(tmp_path, require_system):
    require_system("/usr/sbin/sshd", packages=("openssh-server",))
    with Sshd(tmp_path) as server:
        yield server


@pytest.fixture
def remote(tmp_path) -> Path:
    """The remote working directory (terminal.ssh.workdir)."""
    where = tmp_path / "remote"
    where.mkdir()
    return where


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "up"
    os.mkfifo(path)
    return path


def ssh_config(sshd: Sshd, workdir: Path | None = None, **changes) -> SshConfig:
    fields = dict(host=sshd.host, port=sshd.port, user=sshd.user, key=str(sshd.key),
                  known_hosts=str(sshd.known_hosts),
                  workdir=None if workdir is None else str(workdir))  # fmt: skip
    return SshConfig(**{**fields, **changes})


def terminal_config(sshd: Sshd, workdir: Path | None) -> TerminalConfig:
    return TerminalConfig(backend="ssh", ssh=ssh_config(sshd, workdir))


def session(tmp_path: Path, backends: Backends) -> TerminalSession:
    local = tmp_path / "local"
    local.mkdir(exist_ok=True)
    policy = EnvPolicy(allow=frozenset({"PROJECT_TOKEN"}))
    return TerminalSession(local, state_dir=tmp_path / ".terminal", policy=policy,
                           environ=ENVIRON, backends=backends,
                           options=RunOptions(grace=GRACE, spill_dir=tmp_path / "out"))  # fmt: skip


async def members_up(fifo: Path, count: int) -> dict[str, ProcessId]:
    """The members of a remote tree, once `count` of them said (in `fifo`) they run."""
    found: dict[str, ProcessId] = {}
    pending = b""
    # Opened read-write: the fifo never reads as ended between two members' writes.
    async with trio.lowlevel.FdStream(os.open(fifo, os.O_RDWR)) as stream:
        with trio.fail_after(30):
            while len(found) < count:
                *lines, pending = (pending + await stream.receive_some()).split(b"\n")
                for line in lines:
                    name, pid = line.decode().split()
                    proc = ProcessId.of(int(pid))
                    assert proc is not None, f"{name} ended at once"
                    found[name] = proc
    return found


def assert_gone(marker: str, members: dict[str, ProcessId]) -> None:
    assert set(members) == {"escaped", "stubborn"}
    assert not [name for name, proc in members.items() if proc.alive()]
    assert not sandboxed_pids(marker)


async def test_a_command_runs_there_with_its_status_output_and_cd(sshd, remote, home, tmp_path):
    backends = backends_for(terminal_config(sshd, remote), home.root)
    placement = backends.place("owner")
    assert isinstance(placement.backend, Ssh)
    user = backends.place("user")  # a user's command never goes there: the sandbox or nowhere
    assert user.backend is not placement.backend
    assert user.backend is None or user.backend.confined
    terminal = session(tmp_path, backends)
    secret_file = tmp_path / "passed-value"
    secret_file.write_text(PASSED + "\n")

    ran = await terminal.run(
        "echo out; echo err >&2; echo from=${SSH_CONNECTION%% *}; echo token=$PROJECT_TOKEN;"
        " echo openai=${OPENAI_API_KEY-unset}; echo tree=${HERMES_SSH_TREE:+tagged};"
        # no command line on the machine holds the passed value: not ssh's, not bash's
        # (a process may end between the glob and grep: its error is no finding)
        f" echo grep=$(grep -l -a -F -f {secret_file} /proc/[0-9]*/cmdline 2>/dev/null | wc -l);"
        " mkdir -p sub && cd sub; exit 7",
        placement=placement,
        timeout=30,
    )
    assert ran.exit_code == 7, ran.output
    assert ran.output == (
        f"out\nerr\nfrom=127.0.0.1\ntoken={PASSED}\nopenai=unset\ntree=tagged\ngrep=0\n"
    )
    again = await terminal.run("pwd", placement=placement, timeout=30)
    assert (again.exit_code, again.output) == (0, f"{remote}/sub\n")
    assert terminal.cwd_in(placement.backend) == f"{remote}/sub"
    assert sshd.logins() == 2  # one connection each, none to stop anything


async def test_without_a_workdir_a_command_starts_in_the_login_directory(sshd, home, tmp_path):
    backends = backends_for(terminal_config(sshd, None), home.root)
    terminal = session(tmp_path, backends)
    ran = await terminal.run("pwd", placement=backends.place("owner"), timeout=30)
    assert (ran.exit_code, ran.output) == (0, f"{os.path.realpath(sshd.home)}\n")


async def test_what_a_finished_command_left_running_there_is_killed(sshd, remote, home, tmp_path):
    backends = backends_for(terminal_config(sshd, remote), home.root)
    terminal = session(tmp_path, backends)
    marker = f"hermes-test-{secrets.token_hex(4)}"
    ran = await terminal.run(
        f"(exec -a {marker}-child sleep 300) & setsid -f bash -c 'exec -a {marker}-escaped"
        " sleep 300'; echo left two",
        placement=backends.place("owner"),
        timeout=30,
    )
    assert (ran.exit_code, ran.output) == (0, "left two\n")
    assert not sandboxed_pids(marker)
    assert sshd.logins() == 1  # the remote program did it, on the command's own connection


async def test_a_timeout_gives_124_and_kills_the_remote_tree(sshd, remote, home, tmp_path, fifo):
    backends = backends_for(terminal_config(sshd, remote), home.root)
    terminal = session(tmp_path, backends)
    marker = f"hermes-test-{secrets.token_hex(4)}"
    members: dict[str, ProcessId] = {}

    async def watch() -> None:
        members.update(await members_up(fifo, 2))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        ran = await terminal.run(STUBBORN.format(fifo=fifo, marker=marker),
                                 placement=backends.place("owner"), timeout=TIMEOUT)  # fmt: skip
    assert (ran.exit_code, ran.status) == (124, "timeout")
    assert_gone(marker, members)
    assert sshd.logins() == 2  # the command's connection, and the one that stopped it


async def test_a_background_process_streams_reads_its_input_and_is_killed_there(
    sshd, remote, home, tmp_path, fifo
):
    backends = backends_for(terminal_config(sshd, remote), home.root)
    terminal = session(tmp_path, backends)
    placement = backends.place("owner")
    marker = f"hermes-test-{secrets.token_hex(4)}"

    def start(command: str) -> Start:
        launch = terminal.launch(command, placement, stdin=True)
        return Start(command, launch, ran_in="ssh", cwd=terminal.cwd_in(placement.backend))

    actor = BackgroundProcesses(grace=GRACE)
    async with trio.open_nursery() as nursery:
        procs = await nursery.start(actor.run)
        talk = await procs.call(start("echo first; read line; echo got=$line"))
        assert await read_until(procs, talk["id"], "\n") == "first\n"
        assert (await procs.call(Poll(talk["id"])))["status"] == "running"  # still reading
        await procs.call(WriteStdin(talk["id"], "hello there\n"))
        done = await wait_for(procs, talk["id"], timeout=30)
        assert (done["status"], done["exit_code"]) == ("exited", 0)
        assert done["output_tail"] == "first\ngot=hello there\n"

        long = await procs.call(start(STUBBORN.format(fifo=fifo, marker=marker)))
        members = await members_up(fifo, 2)
        with trio.fail_after(30):
            await (await procs.call(Kill(long["id"]))).wait()
        assert (await procs.call(Poll(long["id"])))["status"] == "killed"
        actor.stop()
    assert_gone(marker, members)
    assert sshd.logins() == 3  # two commands, one stop


async def test_stop_kills_the_remote_tree_of_a_turns_command(
    sshd, remote, registry, home, fake, fifo
):
    config = Config(
        platforms={"telegram": PlatformConfig(allowed_users=("alice",), owner="alice")},
        terminal=terminal_config(sshd, remote),
    )
    marker = f"hermes-test-{secrets.token_hex(4)}"
    command = STUBBORN.format(fifo=fifo, marker=marker)
    fake.script(tool_answer(("terminal", {"command": command, "timeout": 600})))
    async with running_router(registry, home, fake, config, timeout=30) as h:
        talk = await h.send("alice", "run the long one")
        members = await members_up(fifo, 2)
        stop = await h.send("alice", "/stop")
        assert (await h.answer_to(stop)).text == "Stopped the running turn."
        assert (await h.final(talk)).kind == "interrupted"
        assert_gone(marker, members)
    assert sshd.logins() == 2


def test_probe_works_against_the_server(sshd):
    Ssh(ssh_config(sshd)).probe()
    assert sshd.logins() == 1


def test_probe_names_a_key_the_server_refuses(sshd, tmp_path):
    other = make_key(tmp_path / "not-authorized")
    with pytest.raises(BackendUnavailable, match=r"Permission denied.*authorized_keys"):
        Ssh(ssh_config(sshd, key=str(other))).probe()
    with pytest.raises(BackendUnavailable, match="does not exist here"):
        Ssh(ssh_config(sshd, key=str(tmp_path / "no-such-key"))).probe()


def test_probe_names_an_unknown_host_key(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(BackendUnavailable, match=r"Host key verification failed.*ssh-keyscan"):
        Ssh(ssh_config(sshd, known_hosts=str(empty))).probe()
    assert empty.read_text() == ""  # nothing learnt on the way
