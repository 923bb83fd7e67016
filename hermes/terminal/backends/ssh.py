"""The ssh backend: a command runs on another machine, through this machine's OpenSSH
client (`terminal.backend: ssh`).

What reaches the remote machine: one fixed command line for its login shell (`READER`:
bash reading a program from its standard input up to a NUL byte, then running it), then,
on the connection's standard input, the program: the variables `shell.env` holds beyond
the allow-list basics (`agent.tools.pass_env`), a random tag in `HERMES_SSH_TREE`, and
`shell.script` started with `setsid` in a session of its own. Nothing of it is on a
command line: not on the remote machine, where other users could read it in `ps`, nor in
the local ssh client's arguments. The program is handed to ssh from a memfd, by a local
bash that then `exec`s ssh (and, for a background process, goes on forwarding what
hermes writes: `cat`, a member of the local tree). The remote machine keeps its own
PATH, HOME and locale.

Stopping: the tree kill of hermes.terminal.command kills the local ssh client, then calls
`stop_remote`: a second short connection that SIGTERMs every remote process carrying the
tag (setsid'd ones too) and their process groups, waits up to the grace, then SIGKILLs
what is left. When the command ends by itself, the remote program does the same to what
it left running, with the short grace used locally, on the same connection.

Needs on the remote machine: Linux (/proc), bash, setsid (util-linux), GNU grep, and a
POSIX-like login shell.
"""

from __future__ import annotations

import logging
import math
import os
import re
import secrets
import shlex
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import attrs

from hermes.terminal.backends.base import BackendUnavailable, Launch, Shell
from hermes.terminal.command import LEFTOVER_GRACE, RunOptions, run_command
from hermes.terminal.env import BASE_VARIABLES, EnvPolicy
from hermes.terminal.settings import SshConfig
from hermes.terminal.tree import KILL_WAIT

log = logging.getLogger(__name__)

TAG_VARIABLE = "HERMES_SSH_TREE"  # in the environment of every remote process of a command
READER = """exec bash -c 'IFS= read -r -d "" p && eval "$p"'"""
TICK = 0.05  # seconds between two looks at what is left of a remote tree
STOP_MARGIN = 5.0  # the stop connection's bound, beyond connecting, the grace and KILL_WAIT
PROBE_MARGIN = 10.0
SERVER_ALIVE = ("ServerAliveInterval=15", "ServerAliveCountMax=4")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# bash, on the remote machine: find and kill the processes tagged `$t`, and their groups.
KILL_FUNCTIONS = r"""
read -r hermes_s < /proc/$$/stat; hermes_s=${hermes_s##*) }; set -- $hermes_s; hermes_own=$3
hermes_groups=
hermes_seen=
hermes_find() {
  local f p s
  hermes_found=
  for f in $(grep -lzxF -- "$t" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    read -r s 2>/dev/null < "/proc/$p/stat" || continue
    s=${s##*) }; set -- $s
    hermes_found="$hermes_found $p"
    case " $hermes_seen " in *" $p "*) ;; *) hermes_seen="$hermes_seen $p";; esac
    if [ "$3" -gt 1 ] && [ "$3" != "$hermes_own" ]; then
      case " $hermes_groups " in *" -$3 "*) ;; *) hermes_groups="$hermes_groups -$3";; esac
    fi
  done
}
hermes_stop() {
  local n=$1 p
  hermes_find
  [ -n "$hermes_found$2" ] || return 0
  kill -s TERM -- $hermes_found $hermes_groups $2 2>/dev/null
  while [ -n "$hermes_found" ] && [ "$n" -gt 0 ]; do
    sleep 0.05; n=$((n - 1)); hermes_find
  done
  kill -s KILL -- $hermes_found $hermes_groups $2 2>/dev/null
  n=$hermes_kill_wait  # a signal is sent at once, not yet taken: gone when this returns
  while hermes_find; [ -n "$hermes_found" ] && [ "$n" -gt 0 ]; do sleep 0.05; n=$((n - 1)); done
  # A dying process loses its environment before it is gone: wait for each one seen to
  # be a zombie or nothing (the same pid soon after is its own, not another's).
  for p in $hermes_seen; do
    while [ "$n" -gt 0 ] && hermes_running "$p"; do sleep 0.05; n=$((n - 1)); done
  done
  return 0
}
hermes_running() {
  local s
  read -r s 2>/dev/null < "/proc/$1/stat" || return 1
  s=${s##*) }
  case ${s%% *} in Z|X) return 1;; esac
}
"""


def _ticks(grace: float) -> int:
    return max(1, math.ceil(grace / TICK))


def _tagged(tag: str) -> str:
    """The variables KILL_FUNCTIONS reads: the tag to look for, the wait after SIGKILL."""
    return f"t={shlex.quote(f'{TAG_VARIABLE}={tag}')}; hermes_kill_wait={_ticks(KILL_WAIT)}"


def command_program(tag: str, env: Mapping[str, str], script: str) -> str:
    """The remote program for one command: `script` in a session of its own, with `env`
    and the tag; what it leaves running is killed when it ends; its status is ssh's."""
    exports = [f"  export {name}={shlex.quote(value)}" for name, value in env.items()]
    return "\n".join(
        [
            KILL_FUNCTIONS,
            _tagged(tag),
            "exec 2>&1",  # one stream, in the order it was written, as a local command's
            "(",  # the variables are the command's only, not this program's
            *exports,
            f"  export {TAG_VARIABLE}={tag}",
            f"  exec setsid bash -c {shlex.quote(script)}",
            ") <&0 &",
            "hermes_leader=$!",
            'wait "$hermes_leader"; hermes_status=$?',
            f'hermes_stop {_ticks(LEFTOVER_GRACE)} "-$hermes_leader"',
            'exit "$hermes_status"',
        ]
    )


def stop_program(tag: str, grace: float) -> str:
    """The remote program that kills the tree tagged `tag`, waiting up to `grace`."""
    return "\n".join([KILL_FUNCTIONS, _tagged(tag), f"hermes_stop {_ticks(grace)} ''"])


def passed(env: Mapping[str, str]) -> dict[str, str]:
    """What of a command's environment goes to the remote machine: what `pass_env` added
    (the machine has its own PATH, HOME, locale); names no shell can export are left."""
    return {k: v for k, v in env.items() if k not in BASE_VARIABLES and NAME.match(k)}


def _local_dir(path: Path) -> Path:
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


@attrs.frozen
class Ssh:
    """Commands on the machine `config` names, as its user, through `ssh`."""

    config: SshConfig
    ssh: str = "ssh"

    name = "ssh"
    confined = False

    def start_dir(self, workdir: Path) -> str:
        """`terminal.ssh.workdir`, or the login directory there (`.`: where sshd starts a
        command); a relative one (`~/src`, `src`) is taken from the login directory."""
        where = self.config.workdir or "."
        if where.startswith("/"):
            return where
        rest = where.removeprefix("~").lstrip("/")
        return f"./{rest}" if rest and rest != "." else "."

    def ssh_argv(self) -> list[str]:
        """The ssh client's arguments, up to the host: no terminal, no prompt, no unknown
        or changed host key, no forwarding, no multiplexing, only the configured key."""
        config = self.config
        if config.host is None or config.user is None or config.key is None:
            raise BackendUnavailable("ssh: terminal.ssh needs host, user and key")
        options = [
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            "UpdateHostKeys=no",
            f"ConnectTimeout={math.ceil(config.connect_timeout)}",
            "IdentitiesOnly=yes",
            "IdentityAgent=none",
            "ControlMaster=no",
            "ControlPath=none",
            "ClearAllForwardings=yes",
            "ForwardAgent=no",
            "ForwardX11=no",
            "PermitLocalCommand=no",
            "LogLevel=ERROR",  # no banner in every command's output; errors still said
            *SERVER_ALIVE,
        ]
        if config.known_hosts is not None:
            options.append(f"UserKnownHostsFile={os.path.expanduser(config.known_hosts)}")
        argv = [self.ssh, "-T", "-e", "none"]
        for option in options:
            argv += ["-o", option]
        argv += ["-i", os.path.expanduser(config.key), "-p", str(config.port), "-l", config.user]
        return [*argv, "--", config.host, READER]

    def launch(self, shell: Shell) -> Launch:
        if "\0" in shell.script:
            raise ValueError("a command cannot hold a NUL byte")
        tag = secrets.token_hex(8)
        program = command_program(tag, passed(shell.env), shell.script)
        cwd = _local_dir(shell.workdir)

        async def stop_remote(grace: float) -> None:
            await self._stop(tag, grace, shell.env, cwd)

        return self._connection(
            program, shell.env, cwd, forward=shell.stdin, stop_remote=stop_remote
        )

    def _connection(
        self,
        program: str,
        env: Mapping[str, str],
        cwd: Path,
        *,
        forward: bool,
        stop_remote: Callable[[float], Awaitable[None]] | None = None,
    ) -> Launch:
        """ssh, its standard input the `program` (and then, `forward`: what hermes writes
        to the local process's), started by a local bash from a memfd."""
        ssh = self.ssh_argv()
        fd = os.memfd_create("hermes-ssh")
        try:
            data = memoryview(program.encode("utf-8", "surrogateescape") + b"\0")
            while data:
                data = data[os.write(fd, data) :]
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        if forward:
            # in this order; the relay's errors not in the output, which then ends with ssh
            local = f'exec "$@" < <(exec 2>/dev/null; cat <&{fd}; exec cat) {fd}<&-'
        else:
            local = f'exec "$@" <&{fd} {fd}<&-'
        argv = ("bash", "-c", local, "hermes-ssh", *ssh)
        return Launch(argv, cwd, env, stop_remote=stop_remote, pass_fds=(fd,))

    async def _stop(self, tag: str, grace: float, env: Mapping[str, str], cwd: Path) -> None:
        """Kill what is left of the tree tagged `tag` on the machine (a connection of its
        own); bounded, logged when it cannot."""
        bound = self.config.connect_timeout + grace + KILL_WAIT + STOP_MARGIN
        options = RunOptions(timeout=bound, grace=TICK)
        try:
            launch = self._connection(stop_program(tag, grace), env, _local_dir(cwd), forward=False)
            result = await run_command(launch, options=options)
        except OSError as exc:  # called while killing a tree: it says, it does not raise
            log.warning("could not stop a command's processes on %s: %s", self.config.host, exc)
            return
        if result.exit_code != 0:
            said = (result.output.strip().splitlines() or ["no message"])[-1]
            log.warning(
                "could not stop a command's processes on %s (exit %s): %s",
                self.config.host,
                result.exit_code,
                said,
            )

    def probe(self) -> None:
        """Run `true` there, blocking (`hermes doctor`); BackendUnavailable with ssh's own
        last line and what to fix when it cannot."""
        if self.config.key is not None and not os.path.isfile(os.path.expanduser(self.config.key)):
            raise BackendUnavailable(
                f"ssh: the key {self.config.key} does not exist here (terminal.ssh.key)"
            )
        env = EnvPolicy().child_env(os.environ)
        cwd = Path.home() if Path.home().is_dir() else Path("/")
        launch = self.launch(Shell("true", ".", env, cwd))
        try:
            done = subprocess.run(
                launch.argv,
                cwd=launch.cwd,
                env=dict(launch.env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.config.connect_timeout + PROBE_MARGIN,
                check=False,
                pass_fds=launch.pass_fds,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendUnavailable(f"ssh could not run: {exc}") from None
        finally:
            launch.discard()
        if done.returncode != 0:
            said = ((done.stderr + done.stdout).strip().splitlines() or ["no message"])[-1]
            raise BackendUnavailable(f"ssh to {self._where()} failed: {said}{self._hint(said)}")

    def _where(self) -> str:
        return f"{self.config.user}@{self.config.host}:{self.config.port}"

    def _hint(self, said: str) -> str:
        config = self.config
        known = config.known_hosts or "~/.ssh/known_hosts"
        if "Host key verification failed" in said or "host key" in said.lower():
            return (
                f"; the host key of {config.host} is not the one in {known}"
                f" (check its fingerprint, then: ssh-keyscan -p {config.port} {config.host}"
                f" >> {known}; terminal.ssh.known_hosts)"
            )
        if "Permission denied" in said:
            return (
                f"; {config.user} there does not accept the key {config.key}"
                f" (add {config.key}.pub to ~{config.user}/.ssh/authorized_keys there;"
                " a key with a passphrase cannot be used)"
            )
        if any(w in said for w in ("Connection refused", "timed out", "resolve", "No route")):
            return (
                f"; nothing answers on {config.host} port {config.port}"
                " (terminal.ssh.host, terminal.ssh.port; is sshd running there?)"
            )
        if "command not found" in said or "No such file" in said:
            return "; the machine needs bash, setsid and grep"
        return ""
