"""The sandbox backend: a command confined by bubblewrap (Debian's `bubblewrap`).

What the command sees: the system read-only (/usr, /bin, /lib*, /etc less
`terminal.sandbox.hide`, and `read_only`), a private /tmp emptied when it ends, its
session's own directory read-write as its working directory and HOME, a fresh /proc and
/dev, and nothing else: not HERMES_HOME (its .env, serve.token, state.db, other sessions'
directories, the cache), not home directories, not /var, /run or /sys.

It runs in namespaces of its own (user, mount, pid, network, ipc, uts, cgroup), with no
capabilities and a session of its own (no TIOCSTI into a terminal). In its own PID
namespace it cannot leave its tree: when the command ends, the namespace's init ends and
the kernel kills everything left in it, setsid'd or not; hermes's whole-tree kill
(hermes.terminal.tree) reaches every process of it from outside. `--die-with-parent` is
not used: it rests on PR_SET_PDEATHSIG, which fires when the *thread* that started the
process ends, and Trio starts processes from worker threads that end after ten idle
seconds. A serve killed outright leaves the tree to the next serve, which kills it
(hermes.terminal.leftovers) as it does every tree.

Network: `none` is an empty network namespace (only its own loopback). `public` is the
same namespace plus one way out: an HTTP proxy (hermes.terminal.backends.proxy) on a
Unix socket bound into it, which connects only to globally routable addresses
(hermes.terminal.addresses), bridged to 127.0.0.1:3128 inside by a small stdlib script
(bridge.py) and named by `http_proxy`/`https_proxy`. So a sandboxed command reaches the
public internet over HTTP(S) (curl, pip, git over https) and never loopback (serve's
ports, the ops server), a private range or 169.254.169.254; other protocols do not leave.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from hermes.config import ConfigError
from hermes.terminal.backends.base import BackendUnavailable, Handed, Launch, Network, Shell
from hermes.terminal.backends.proxy import Policy, serve_proxy
from hermes.terminal.settings import SandboxConfig

INSTALL = "apt-get install bubblewrap"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PROXY_PORT = 3128  # inside the sandbox's own network namespace: nothing else listens there
INSIDE = Path("/run/hermes")  # where the bridge and the proxy's socket appear inside
BRIDGE = Path(__file__).with_name("bridge.py")
PROBE_SECONDS = 10.0
USERNS_HINT = (
    "this user may not create user namespaces (Debian: sysctl kernel.unprivileged_userns_clone=1;"
    " Ubuntu 24.04: an AppArmor profile for bwrap, or sysctl"
    " kernel.apparmor_restrict_unprivileged_userns=0)"
)


def _python() -> tuple[str, str | None]:
    """The interpreter the bridge runs on inside, and a directory to bind read-only for it
    (None: the system's, under /usr, is seen already)."""
    for candidate in ("/usr/bin/python3", "/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate, None
    base = getattr(sys, "_base_executable", sys.executable)
    return os.path.realpath(base), sys.base_prefix


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@attrs.frozen
class Sandbox:
    """bubblewrap at `bwrap`, confining commands of the home at `home`."""

    config: SandboxConfig
    home: Path  # HERMES_HOME: never seen inside, whatever `read_only` says
    bwrap: str = "bwrap"

    name = "sandbox"
    confined = True

    @classmethod
    def find(cls, config: SandboxConfig, home: Path) -> Sandbox:
        """The sandbox, if bubblewrap is installed; else BackendUnavailable saying how to
        install it. A `read_only` path inside HERMES_HOME: ConfigError."""
        root = str(home.resolve())
        for path in config.read_only:
            real = os.path.realpath(path)  # through links: where the bind really leads
            if _within(real, root) or _within(root, real):
                raise ConfigError(
                    f"terminal.sandbox.read_only: {path} holds or is inside"
                    f" HERMES_HOME ({root}), which a sandboxed command never"
                    " sees"
                )
        found = shutil.which("bwrap")
        if found is None:
            raise BackendUnavailable(f"bubblewrap is not installed ({INSTALL})")
        return cls(config, home.resolve(), found)

    def start_dir(self, workdir: Path) -> str:
        return str(workdir)

    def probe(self) -> None:
        """Run `true` sandboxed, blocking (serve's start, `hermes doctor`); BackendUnavailable
        with bubblewrap's own words and a hint when it cannot."""
        with tempfile.TemporaryDirectory(prefix="hermes-probe-") as workdir:
            launch = self.launch(Shell("true", workdir, {"PATH": PATH}, Path(workdir)))
            assert launch.handed is not None
            try:
                done = subprocess.run(
                    launch.argv,
                    capture_output=True,
                    text=True,
                    timeout=PROBE_SECONDS,
                    check=False,
                    pass_fds=launch.pass_fds,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                launch.discard()
                raise BackendUnavailable(f"bubblewrap could not run: {exc}") from None
            for fd in launch.pass_fds:
                os.close(fd)
            with os.fdopen(launch.handed.fd, "rb") as info:  # bubblewrap has closed its end
                init = _child_pid(info.read())
        if init is not None:  # ours to reap where serve is a subreaper already
            with contextlib.suppress(ChildProcessError):
                os.waitpid(init, 0)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            hint = f"; {USERNS_HINT}" if "namespace" in said or "uid map" in said else ""
            raise BackendUnavailable(f"bubblewrap failed: {said}{hint}")

    def launch(self, shell: Shell) -> Launch:
        return self.confine(
            ["bash", "-c", shell.script],
            shell.workdir,
            shell.env,
            shell.network,
            readable=shell.readable,
        )

    def confine(
        self,
        command: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        network: Network = "none",
        *,
        readable: Sequence[Path] = (),
        policy: Policy | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> Launch:
        """The Launch that runs `command` confined in `workdir`, as every sandboxed command
        runs: a shell's (`launch`) and a user's Chromium (hermes.agent.browser). `policy`:
        the `public` network's proxy rules (default: public addresses only); `pass_fds`:
        descriptors of ours `command` keeps (bubblewrap passes inherited ones through)."""
        argv = [
            self.bwrap,
            "--unshare-all",  # user (where it can), mount, pid, network, ipc, uts, cgroup
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "hermes-sandbox",
            *self._system(),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            *self._mask_home(),
            *(a for f in readable if f.exists() for a in ("--ro-bind", str(f), str(f))),
            "--bind",
            str(workdir),
            str(workdir),
            "--chdir",
            str(workdir),
            "--setenv",
            "HOME",
            str(workdir),
            "--setenv",
            "PATH",
            PATH,
        ]
        beside = None
        command = list(command)
        if network == "public":
            python, prefix = _python()
            real = os.path.realpath(prefix) if prefix is not None else None
            if real is not None and _within(str(self.home), real):
                raise BackendUnavailable(
                    f"the Python at {prefix} holds HERMES_HOME: the sandbox's network cannot use it"
                )
            if prefix is not None and not any(_within(prefix, d) for d in SYSTEM_DIRS):
                argv += ["--ro-bind", prefix, prefix]
            socket_dir = Path(tempfile.gettempdir()) / f"hermes-proxy-{secrets.token_hex(6)}"
            inside_socket = str(INSIDE / "proxy.sock")
            argv += [
                "--ro-bind",
                str(BRIDGE),
                str(INSIDE / "bridge.py"),
                "--bind",
                str(socket_dir / "proxy.sock"),
                inside_socket,
            ]
            proxy = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
                argv += ["--setenv", name, proxy]
            command = [
                python,
                "-I",
                "-S",
                str(INSIDE / "bridge.py"),
                str(PROXY_PORT),
                inside_socket,
                "--",
                *command,
            ]

            def beside() -> contextlib.AbstractAsyncContextManager[object]:
                return _proxy_at(socket_dir, policy or Policy())

        info, info_child = os.pipe()  # bubblewrap says there its namespace init's pid
        argv += ["--info-fd", str(info_child), "--", *command]
        return Launch(
            tuple(argv),
            workdir,
            env,
            beside=beside,
            pass_fds=(info_child, *pass_fds),
            handed=Handed(info, _child_pid),
        )

    def _system(self) -> list[str]:
        """The system read-only, less what `hide` names, plus `read_only`."""
        args: list[str] = []
        for directory in SYSTEM_DIRS:
            if os.path.islink(directory):  # merged /usr: /bin -> usr/bin
                args += ["--symlink", os.readlink(directory), directory]
            elif os.path.isdir(directory):
                args += ["--ro-bind", directory, directory]
        for path in self.config.read_only:
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
        for pattern in self.config.hide:
            for path in sorted(glob.glob(pattern)):
                if os.path.isdir(path) and not os.path.islink(path):
                    args += ["--tmpfs", path]
                elif os.path.lexists(path):
                    args += ["--ro-bind", "/dev/null", path]
        return args

    def _mask_home(self) -> list[str]:
        """An empty tmpfs over HERMES_HOME where a system directory would show it, by its
        path and by its real one (`read_only` may not hold it: `find`)."""
        homes = dict.fromkeys((str(self.home), os.path.realpath(self.home)))
        masked = [h for h in homes if any(_within(h, d) for d in SYSTEM_DIRS)]
        return [a for h in masked for a in ("--tmpfs", h)]


def _child_pid(info: bytes) -> int | None:
    """The namespace init's pid, from what bubblewrap wrote to --info-fd."""
    try:
        pid = json.loads(info).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) else None


@contextlib.asynccontextmanager
async def _proxy_at(directory: Path, policy: Policy) -> AsyncIterator[None]:
    """The proxy on `directory`/proxy.sock (the directory private to serve's user) while
    the command runs, with `policy`'s rules; gone after."""
    await trio.to_thread.run_sync(directory.mkdir, 0o700)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_proxy, directory / "proxy.sock", policy)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(shutil.rmtree, directory, True)
