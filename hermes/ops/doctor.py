"""The checks of `hermes doctor`: what an operator asks before (or instead of) reading logs.

Each check is a plain function returning a CheckResult (name, ok, detail, and for a
failure the fix), so the command only prints them. The token checks ask each
enabled platform's auth endpoint with the adapter's own code (`check_token`), so
doctor fails exactly where `hermes serve` would. Nothing here writes: state.db is
opened read-only, a missing one is not created, and token values are never put in
a result.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import apsw
import attrs
import httpx
import trio

from hermes.actors.errors import HermesError
from hermes.adapters.base import AdapterFatal
from hermes.adapters.platform import Platform
from hermes.adapters.registry import SECTIONS, chat_platforms
from hermes.adapters.settings import PlatformConfig
from hermes.agent.browser.browsers import Browsers
from hermes.agent.browser.chromium import INSTALL as INSTALL_CHROMIUM
from hermes.agent.browser.chromium import BrowserUnavailable, find_chromium
from hermes.agent.context_files import SOUL_CHARS, ContextFiles, read_context_file
from hermes.agent.mcp.settings import McpServerConfig
from hermes.agent.skills.library import SkillLibrary
from hermes.agent.tools.catalog import web_tools
from hermes.config import ConfigError, Secrets, load_config
from hermes.cron.jobs import Job
from hermes.cron.settings import CronConfig
from hermes.cron.store import list_jobs
from hermes.delivery.outbox_store import DEAD, OutboxRow, listing
from hermes.gateway.pidfile import holder_pid
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.state import maintenance
from hermes.state.errors import SchemaTooNew, StateError
from hermes.state.writer import WAL_WARN_BYTES
from hermes.terminal.addresses import AllowList
from hermes.terminal.backends.base import BackendUnavailable
from hermes.terminal.backends.sandbox import INSTALL
from hermes.terminal.backends.ssh import Ssh
from hermes.terminal.placement import backends_for

T = TypeVar("T")

TOKEN_TIMEOUT = 10.0  # seconds a platform's auth endpoint gets to answer
SESSION_DIRS = 500  # the sessions' directories (latest first) whose project files doctor scans
FIX_CORRUPT = (
    "stop hermes serve and copy state.db aside; restore a backup (`hermes db backup PATH`"
    " makes one) or salvage it with `sqlite3 state.db .recover | sqlite3 new.db`"
)


@attrs.frozen
class CheckResult:
    """One line of `hermes doctor`: what was checked, whether it passed, what was found,
    and for a failure what to do about it."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def passed(name: str, detail: str) -> CheckResult:
    return CheckResult(name, True, detail)


def failed(name: str, detail: str, fix: str) -> CheckResult:
    return CheckResult(name, False, detail, fix)


@attrs.frozen
class Loaded:
    """What the config check read, for the checks that need it."""

    config: Config
    secrets: Secrets = attrs.field(repr=False)


# -- config ---------------------------------------------------------------------------


def check_config(home: HermesHome) -> tuple[CheckResult, Loaded | None]:
    """config.yaml and .env load (a missing config.yaml is the embedded default)."""
    try:
        config = load_config(home.config_path, Config, SECTIONS)
        secrets = Secrets.load(home.env_path)
    except ConfigError as exc:
        fix = "correct the key it names; `hermes config show` prints what hermes reads"
        return failed("config", str(exc), fix), None
    if home.config_path.exists():
        where = str(home.config_path)
    else:
        where = f"no {home.config_path}: the embedded default"
    return passed("config", where), Loaded(config, secrets)


# -- platform tokens ----------------------------------------------------------------------


async def check_platform(
    name: str,
    settings: PlatformConfig,
    secrets: Secrets,
    env_path: Path,
    timeout: float = TOKEN_TIMEOUT,
) -> CheckResult:
    """The platform's token answers its auth endpoint, asked by the adapter's own code."""
    label = f"{name} token"
    known = chat_platforms()
    platform = known.get(name)
    if platform is None:
        have = ", ".join(sorted(known))
        return failed(
            label,
            f"hermes has no adapter for {name!r} (built in: {have})",
            f"remove platforms.{name} from config.yaml or set its enabled: false",
        )
    if platform.tokens and not settings.login_named():
        return failed(
            label,
            f"platforms.{name}.{settings.login_setting} is not set",
            f"set platforms.{name}.{settings.login_setting} to the variable holding its token",
        )
    missing = [v for v in settings.token_names() if not secrets.get(v)]
    if missing:
        return failed(
            label,
            f"{', '.join(missing)} not set",
            f"set {missing[0]} in {env_path} (or the environment)",
        )
    result = await _ask(label, platform, settings, secrets, env_path, timeout)
    return _redacted(result, [secrets.get(v) or "" for v in settings.token_names()])


async def _ask(
    label: str,
    platform: Platform,
    settings: PlatformConfig,
    secrets: Secrets,
    env_path: Path,
    timeout: float,
) -> CheckResult:
    name = platform.name
    where = settings.base_url or "the platform's default URL"
    unreachable = f"check the network and platforms.{name}.base_url ({where})"
    try:
        with trio.fail_after(timeout):
            identity = await platform.factory.check_token(settings, secrets)
    except AdapterFatal as exc:
        return failed(
            label,
            f"rejected: {exc.reason}",
            f"set {settings.token_env} in {env_path} to {platform.token_hint}",
        )
    except trio.TooSlowError:
        return failed(label, f"no answer within {timeout:g} s", unreachable)
    except httpx.TransportError as exc:
        return failed(label, f"cannot reach it: {_describe(exc)}", unreachable)
    except Exception as exc:  # an answer that is not the auth endpoint's
        return failed(label, f"unexpected answer: {_describe(exc)}", unreachable)
    return passed(label, identity)


async def check_platforms(
    loaded: Loaded,
    env_path: Path,
    timeout: float = TOKEN_TIMEOUT,
) -> list[CheckResult]:
    """Every enabled platform, asked at once (results in config order)."""
    enabled = loaded.config.enabled_platforms()
    results: dict[str, CheckResult] = {}

    async def one(name: str, settings: PlatformConfig) -> None:
        results[name] = await check_platform(name, settings, loaded.secrets, env_path, timeout)

    async with trio.open_nursery() as nursery:
        for name, settings in enabled.items():
            nursery.start_soon(one, name, settings)
    return [results[name] for name in enabled]


def _redacted(result: CheckResult, secrets: Sequence[str]) -> CheckResult:
    """The result with every secret value blanked, wherever an error message put it."""

    def clean(text: str | None) -> str | None:
        for secret in secrets:
            if text and secret:
                text = text.replace(secret, "***")
        return text

    return attrs.evolve(result, detail=clean(result.detail), fix=clean(result.fix))


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# -- tools from outside -------------------------------------------------------------------


def check_outside_tools(loaded: Loaded, env_path: Path) -> list[CheckResult]:
    """Each enabled MCP server can be started as configured (its program found, its
    directory there, its variables set), and the web tools build as serve builds them
    (the search key set, `allow_private` readable). The servers are not started here:
    serve shows whether they come up (`hermes status`)."""
    results = []
    for name, server in loaded.config.mcp.servers.items():
        if server.enabled:
            results.append(_check_mcp_server(name, server, loaded.secrets, env_path))
    web = loaded.config.web
    if web.search.provider is not None or web.allow_private:
        try:  # built as serve builds them: the same errors
            offered = web_tools(web, loaded.secrets)
        except ConfigError as exc:
            fix = f"set the variable in {env_path} (or the environment), or correct web"
            results.append(failed("web tools", str(exc), fix))
        else:
            results.append(passed("web tools", ", ".join(sorted(offered))))
    return results


def _check_mcp_server(
    name: str, server: McpServerConfig, secrets: Secrets, env_path: Path
) -> CheckResult:
    label = f"mcp {name}"
    missing = [v for v in server.secret_names() if not secrets.get(v)]
    if missing:
        return failed(
            label,
            f"{', '.join(missing)} not set",
            f"set {missing[0]} in {env_path} (or the environment)",
        )
    if server.command is None:
        return passed(label, f"HTTP {server.url}")
    if shutil.which(server.command) is None:
        return failed(
            label,
            f"{server.command!r} is not a program on PATH",
            f"install it, or give mcp.servers.{name}.command as a full path",
        )
    if server.cwd is not None and not Path(server.cwd).is_dir():
        return failed(
            label,
            f"{server.cwd} is not a directory",
            f"create it, or correct mcp.servers.{name}.cwd",
        )
    return passed(label, f"stdio {server.command}")


# -- state.db -----------------------------------------------------------------------------


def check_state_db(path: Path) -> CheckResult:
    """Integrity, a schema this hermes knows, and a WAL that checkpoints keep small."""
    if not path.exists():
        return passed("state.db", f"not created yet ({path}; hermes serve creates it)")
    try:
        report = maintenance.check(path)
    except (apsw.Error, StateError) as exc:
        return failed("state.db", f"cannot be read: {_describe(exc)}", FIX_CORRUPT)
    if isinstance(report.schema_error, SchemaTooNew):
        return failed("state.db", str(report.schema_error), "upgrade hermes")
    if report.schema_error is not None:  # not made by the baseline: nothing migrates it
        return failed("state.db", str(report.schema_error), "move state.db aside")
    if not report.ok:
        problem = report.integrity if report.integrity != "ok" else report.quick
        return failed("state.db", f"integrity check: {problem[:200]}", FIX_CORRUPT)
    wal = f"WAL {_mb(report.wal_bytes)}"
    if report.wal_bytes > WAL_WARN_BYTES:
        return failed(
            "state.db",
            f"integrity ok, {wal}: over {_mb(WAL_WARN_BYTES)}",
            "run `hermes db checkpoint --truncate`; if it grows back, a long-lived"
            " reader in another process holds the WAL open",
        )
    return passed("state.db", f"integrity ok, {wal} ({path})")


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _read(path: Path, table: str, query: Callable[[apsw.Connection], T], empty: T) -> T:
    """`query` on a read-only connection; `empty` when there is no state.db or no such
    table yet (doctor creates nothing)."""
    if not path.exists():
        return empty
    conn = maintenance.open_plain(path)
    try:
        return query(conn) if maintenance.has_table(conn, table) else empty
    finally:
        conn.close()


def check_dead_letters(path: Path) -> CheckResult:
    """Outbox rows that will not go out by themselves: dead, or possibly delivered."""
    try:
        rows: list[OutboxRow] = _read(path, "outbox", lambda c: listing(c, dead_only=True), [])
    except (apsw.Error, StateError) as exc:
        return failed("dead letters", f"cannot read state.db: {_describe(exc)}", FIX_CORRUPT)
    if not rows:
        return passed("dead letters", "none")
    dead = sum(r.state == DEAD for r in rows)
    last = rows[-1]
    detail = (
        f"{len(rows)} not delivered ({dead} dead, {len(rows) - dead} possibly"
        f" delivered); last: {last.target}: {last.last_error or last.state}"
    )
    fix = (
        "see them with `hermes outbox --dead`; send one again with `hermes outbox retry"
        " ID`, or drop them with `hermes outbox purge --dead`"
    )
    return failed("dead letters", detail[:300], fix)


def check_jobs(path: Path, cron: CronConfig) -> CheckResult:
    """Scheduled jobs failing in a row, from the streak at which their owner is nudged
    (`cron.failure_nudge_threshold`; with nudges off, from the first failure)."""
    threshold = max(1, cron.failure_nudge_threshold)
    try:
        jobs: list[Job] = _read(path, "cron_jobs", list_jobs, [])
    except (apsw.Error, StateError) as exc:
        return failed("cron jobs", f"cannot read state.db: {_describe(exc)}", FIX_CORRUPT)
    failing = [j for j in jobs if j.state == "scheduled" and j.failure_streak >= threshold]
    if not failing:
        return passed("cron jobs", f"{len(jobs)} scheduled or paused, none failing in a row")
    worst = max(failing, key=lambda j: j.failure_streak)
    detail = (
        f"{len(failing)} failing in a row; {worst.name} ({worst.id}): "
        f"{worst.failure_streak} times, last: {worst.last_error or '?'}"
    )
    fix = (
        f"`hermes cron history {worst.id}` shows why; then `hermes cron edit {worst.id}`"
        f" or `hermes cron pause {worst.id}`"
    )
    return failed("cron jobs", detail[:300], fix)


# -- ports --------------------------------------------------------------------------------


def check_ports(home: HermesHome, config: Config) -> list[CheckResult]:
    """The local endpoint's port, the operator surfaces' port, and the webhook listener's
    where a platform that is pushed to (WhatsApp) is enabled."""
    pid = holder_pid(home.serve_pid)
    local = config.gateway.local
    results = [
        check_port("local port", "gateway.local", local.host, local.port, home.serve_port, pid)
    ]
    if config.ops.enabled:
        results.append(
            check_port(
                "ops port", "ops", config.ops.bind_host(), config.ops.port, home.ops_port, pid
            )
        )
    else:
        results.append(passed("ops port", "off (ops.enabled: false)"))
    platforms = chat_platforms()
    if any(platforms[n].webhook for n in config.enabled_platforms() if n in platforms):
        hooks = config.gateway.webhooks
        results.append(
            check_port(
                "webhooks port", "gateway.webhooks", hooks.host, hooks.port, home.webhooks_port, pid
            )
        )
    return results


def check_port(
    name: str, key: str, host: str, port: int, port_file: Path, pid: int | None
) -> CheckResult:
    """Free (serve can bind it), or held by this home's running serve: `pid` lives and
    `port_file`, where that serve wrote the port it bound, names this port."""
    where = f"{host}:{port}"
    if port == 0:
        return passed(name, f"{host}:0 (serve picks a free port at start)")
    problem = _bind_error(host, port)
    if problem is None:
        return passed(name, f"{where} free")
    if problem.errno != errno.EADDRINUSE:
        return failed(
            name,
            f"cannot bind {where}: {problem.strerror or problem}",
            f"set {key}.host to an address of this machine",
        )
    if pid is not None and _port_in(port_file) == port:
        return passed(name, f"{where} held by this home's serve (pid {pid})")
    return failed(
        name,
        f"{where} is in use by another process",
        f"stop what holds it (`ss -ltnp 'sport = :{port}'` names it) or set"
        f" {key}.port to a free port (0 picks one)",
    )


def _bind_error(host: str, port: int) -> OSError | None:
    """Bind (and let go) every address serve would listen on; the first refusal."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return exc
    for family, kind, proto, _name, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as trio's listeners
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                return exc
    return None


def _port_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


# -- where commands run -------------------------------------------------------------------


def check_commands(home: HermesHome, config: Config) -> list[CheckResult]:
    """The sandbox works (a trivial command runs in it, as serve tries at start), the
    backend answers, and what each role's commands get (blocking: it runs them)."""
    try:
        backends = backends_for(config.terminal, home.root)
    except ConfigError as exc:
        return [failed("sandbox", str(exc), f"correct it in {home.config_path}")]
    said = backends.describe()
    if backends.sandbox is not None:
        sandbox = passed("sandbox", "bubblewrap runs commands confined (tried: true)")
    else:
        problem = said["sandbox"]
        fix = INSTALL if "not installed" in problem else "do what bubblewrap's message says"
        sandbox = failed("sandbox", f"{problem}: users get no terminal", fix)
    results = [sandbox]
    if isinstance(backends.unconfined, Ssh):
        try:
            backends.unconfined.probe()
        except BackendUnavailable as exc:
            fix = "correct terminal.ssh in config.yaml, or the machine, as the message says"
            results.append(failed("ssh", str(exc), fix))
        else:
            results.append(passed("ssh", f"{backends.unconfined.config.host} runs commands"))
    roles = passed(
        "commands",
        f"backend {said['backend']}; an owner's run on {said['owner']}, after untrusted"
        f" text {said['owner_after_untrusted_text']}; a user's {said['user']}",
    )
    return [*results, roles]


# -- the agent's context ------------------------------------------------------------------


def check_context(home: HermesHome, config: Config) -> list[CheckResult]:
    """The persona, the skills by state, and the project files the prompts load (in
    agent.workdir and the latest SESSION_DIRS sessions' directories; a link is never
    read), with what their scan found: those lines are left out of the prompt until the
    file is mended."""
    soul = read_context_file(home.soul, scan=False)
    if soul is not None and soul.text.strip():
        cut = f"; the prompt keeps {SOUL_CHARS}" if soul.size > SOUL_CHARS else ""
        results = [passed("persona", f"{home.soul} ({soul.size} characters{cut})")]
    else:
        results = [passed("persona", f"the built-in one ({home.soul} replaces it)")]
    library = SkillLibrary(home.skills, config.skills)
    counts = {state: len(library.shared(state)) for state in ("enabled", "quarantined", "disabled")}
    said = ", ".join(f"{n} {state}" for state, n in counts.items())
    broken = library.broken()
    if broken:
        results.append(
            failed(
                "skills",
                f"{said}; no valid SKILL.md in {', '.join(map(str, broken[:5]))}",
                "mend or remove them (docs/skills.md says the format)",
            )
        )
    elif counts["quarantined"]:
        waiting = ", ".join(s.name for s in library.shared("quarantined"))
        results.append(
            failed(
                "skills",
                f"{said}: {waiting} wait(s) in quarantine",
                "hermes skills show NAME, then enable or remove it",
            )
        )
    else:
        results.append(passed("skills", said))
    directories = [home.workspace / d for d in _session_dirs(home.workspace)]
    workdir = config.agent.workdir_path()
    if workdir is not None:
        directories.insert(0, workdir)
    flagged = [f for f in ContextFiles().project(directories) if f.findings]
    for loaded in flagged:
        first = loaded.findings[0]
        more = f" and {len(loaded.findings) - 1} more" if len(loaded.findings) > 1 else ""
        results.append(
            failed(
                "context",
                f"{loaded.path}: the prompt leaves out what the scan"
                f" flagged: {first.where}: {first.kind}: {first.what}{more}",
                "read those lines and mend the file",
            )
        )
    if not flagged:
        results.append(
            passed(
                "context",
                f"project files in {len(directories)} directories; the scan flagged nothing",
            )
        )
    return results


def _session_dirs(workspace: Path) -> list[str]:
    """The sessions' directories, the latest changed first (SESSION_DIRS of them); links
    are not directories here."""
    try:
        found = [e for e in os.scandir(workspace) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    found.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    return [e.name for e in found[:SESSION_DIRS]]


BROWSER_SECONDS = 30.0

# -- the browser ---------------------------------------------------------------------------


async def check_browser(config: Config) -> CheckResult:
    """Chromium is there and works: a browser as the tools start one opens a blank page
    (in a directory of its own, removed after)."""
    try:
        find_chromium(config.browser.executable)
    except BrowserUnavailable as exc:
        return failed("browser", f"{exc}: the browser tools cannot run", INSTALL_CHROMIUM)
    browsers = Browsers(config.browser, AllowList(), config.media.max_file_bytes)
    problems: list[BaseException] = []
    version: dict[str, str] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hermes-browser-") as directory:
            version = await _blank_page(browsers, Path(directory))
    except* (HermesError, trio.TooSlowError, OSError) as group:
        problems += group.exceptions
    if problems:
        return failed(
            "browser",
            f"Chromium did not open a page: {_describe(problems[0])}",
            "run it by hand to see why: chromium --headless=new about:blank",
        )
    return passed(
        "browser", f"{version.get('product', 'Chromium')} opens a page (tried: about:blank)"
    )


async def _blank_page(browsers: Browsers, directory: Path) -> dict[str, str]:
    """Open a browser in `directory`, a blank page in it, and close it; its version."""
    async with browsers.running():
        with trio.fail_after(BROWSER_SECONDS):
            browser = await browsers.get("doctor", directory)
            assert browser.page is not None
            await browser.page.open("about:blank")
            version = await browser.page.cdp.send("Browser.getVersion")
            await browsers.close("doctor")
    return version


# -- all of them --------------------------------------------------------------------------


def local_checks(home: HermesHome, config: Config | None) -> list[CheckResult]:
    """The checks on this machine (blocking: files, SQLite, sockets). Without a valid
    config the ports are not checked, and cron uses the default threshold."""
    results = [check_state_db(home.state_db)]
    if config is not None:
        results += check_commands(home, config)
        results += check_context(home, config)
        results += check_ports(home, config)
    results.append(check_dead_letters(home.state_db))
    results.append(check_jobs(home.state_db, config.cron if config else CronConfig()))
    return results


async def diagnose(
    home: HermesHome,
    timeout: float = TOKEN_TIMEOUT,
) -> list[CheckResult]:
    """Every check, in the order printed: config, platform tokens (asked concurrently,
    while the local checks run in a thread), MCP servers and web search, state.db, where
    commands run, ports, dead letters, cron."""
    config_result, loaded = await trio.to_thread.run_sync(check_config, home)
    platforms: list[CheckResult] = []
    browser: list[CheckResult] = []

    async def browser_check(config: Config) -> None:
        browser.append(await check_browser(config))

    async def ask_platforms() -> None:
        if loaded is not None:
            platforms.extend(await check_platforms(loaded, home.env_path, timeout))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask_platforms)
        config = loaded.config if loaded is not None else None
        if config is not None:
            nursery.start_soon(browser_check, config)
        local = await trio.to_thread.run_sync(local_checks, home, config)
        outside = []
        if loaded is not None:
            outside = await trio.to_thread.run_sync(check_outside_tools, loaded, home.env_path)
    return [config_result, *platforms, *outside, *local, *browser]
