"""The root of the serve tree: its children in start order and what each is given.

rest_for_one: a child that crashes restarts everything started after it,
which is everything that was given its address. Children reach each other
through one Services record of Refs, which the supervisors re-point on every
restart. Adapters start before the router and hand it events through the
journal, so they read the router's Ref at call time (and the router takes
from the journal what arrived while it was down).
"""

from __future__ import annotations

import contextlib
import functools
import math
import secrets
from collections.abc import Callable
from pathlib import Path

import attrs

from hermes.actors.actor import Actor
from hermes.actors.backoff import Backoff
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.actors.link import LinkStatus
from hermes.actors.supervisor import ChildSpec, Restart, Strategy, Supervisor
from hermes.adapters.base import AdapterSetup, PlatformAdapter
from hermes.adapters.contract import DeliveryFailed
from hermes.adapters.cursors import Cursors
from hermes.adapters.local.endpoint import LocalEndpoint
from hermes.adapters.media import MediaLimits
from hermes.adapters.registry import PLATFORMS, SECTIONS, chat_platforms
from hermes.agent.browser.browsers import Browsers
from hermes.agent.cron_runner import cron_fire_context
from hermes.agent.mcp.servers import McpServers
from hermes.agent.mcp.setup import McpSetup
from hermes.agent.providers import build_agent
from hermes.agent.speech import Speech
from hermes.config import ConfigError, Secrets, load_config
from hermes.cron.scheduler import Scheduler
from hermes.delivery.live import progress_modes
from hermes.delivery.outbox import Outbox
from hermes.delivery.outbox_store import mark_undelivered
from hermes.delivery.replies import OutboxReplies
from hermes.delivery.session_keys import Keying
from hermes.gateway.admission import Admission
from hermes.gateway.collector import Collector
from hermes.gateway.journal import new_owner
from hermes.gateway.live import ServeLive
from hermes.gateway.local_methods import Methods
from hermes.gateway.redaction import serve_policy, serve_redactor
from hermes.gateway.retention import Files, Retention
from hermes.gateway.router import Router
from hermes.gateway.router_messages import Mirrored
from hermes.gateway.services import Services
from hermes.gateway.session_host import SessionServices
from hermes.gateway.settings import Config
from hermes.home import HermesHome, write_secret_file
from hermes.operations.context import Live
from hermes.state.db import Db
from hermes.state.registry import Registry
from hermes.terminal.addresses import AllowList
from hermes.terminal.background import BackgroundProcesses
from hermes.terminal.env import EnvPolicy, Redactor
from hermes.terminal.placement import backends_for

ADAPTER_BACKOFF = Backoff(minimum=1.0, maximum=60.0)
# Children a layer above the gateway adds after the rest, given the services and the
# operator actions' way to the live actors.
Surfaces = Callable[[Services, Live], list[ChildSpec]]


def serve_token(home: HermesHome) -> str:
    """The local endpoint's token, created (0600) on first start."""
    try:
        token = home.serve_token.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(32)
        write_secret_file(home.serve_token, token + "\n")
    return token


def check_platforms(config: Config, secrets_: Secrets, env_path: Path) -> None:
    """Every enabled platform has an adapter, its token variables are set and the
    platforms its answers go to are enabled; else a ConfigError naming the platform and
    the variable (or key), before anything starts."""
    known = chat_platforms()
    for name, platform in config.enabled_platforms().items():
        if name not in known:
            have = ", ".join(sorted(known)) or "none yet"
            raise ConfigError(f"platforms.{name}: hermes has no adapter for {name!r} ({have})")
        if known[name].tokens and not platform.login_named():
            setting = f"platforms.{name}.{platform.login_setting}"
            raise ConfigError(f"{setting}: name the variable holding its token")
        for variable in platform.token_names():
            if not secrets_.get(variable):
                raise ConfigError(
                    f"platforms.{name}: the token variable {variable} is not set"
                    f" (set it in the environment or in {env_path})"
                )
        for key, target in platform.answers_to().items():
            if target not in config.enabled_platforms():
                raise ConfigError(
                    f"platforms.{name}.{key}: its answers go to {target}, which is not"
                    f" enabled (add platforms.{target})"
                )


@attrs.frozen
class ServeKeys:
    """Every secret serve holds: the variables' values, the serve token, and the policy
    that keeps them out of commands and redacts them everywhere."""

    secrets: Secrets = attrs.field(repr=False)
    token: str = attrs.field(repr=False)
    policy: EnvPolicy = attrs.field(repr=False)
    redact: Redactor = attrs.field(repr=False)  # the one redactor: tool results, logs

    @classmethod
    def load(cls, home: HermesHome, config: Config) -> ServeKeys:
        secrets_ = Secrets.load(home.env_path)
        token = serve_token(home)
        policy = serve_policy(config, secrets_, token)
        return cls(secrets_, token, policy, serve_redactor(policy))


def build_root(
    home: HermesHome,
    config: Config,
    keys: ServeKeys,
    on_bound: Callable[[int], None],
    surfaces: Surfaces | None = None,
    clock: Clock | None = None,
    watch_other_writers: float | None = None,
) -> Supervisor:
    """The serve tree, children in start order (they stop in reverse), wired through one
    Services record.

    The state registry holds HERMES_HOME/state.db open from the start and,
    being first, stops last; the gateway (the router), last, stops first: its
    turns finish while all else still runs, adapters included. `on_bound(port)`
    is told the endpoint's port each time it binds. `surfaces` adds children after
    the gateway (they start last and stop first). `watch_other_writers`: how often the
    scheduler and the outbox look at state.db unasked, when another serve (--no-lock)
    writes to it too; None: only when told.
    """
    secrets_, token, policy = keys.secrets, keys.token, keys.policy
    check_platforms(config, secrets_, home.env_path)
    platforms = chat_platforms()
    workdir = config.agent.workdir_path()
    if workdir is not None and workdir.resolve() == home.root.resolve():
        raise ConfigError("agent.workdir: not HERMES_HOME itself, where serve keeps its secrets")
    mcp = McpServers(
        config.mcp,
        McpSetup(secrets_, policy, home.workspace, keys.redact),
        lambda: load_config(home.config_path, Config, SECTIONS).mcp,
    )
    backends = backends_for(config.terminal, home.root)
    browsers = Browsers(
        config.browser, AllowList.parse(config.web.allow_private), config.media.max_file_bytes
    )
    agent = build_agent(
        config, secrets_, home, keys.redact, mcp, backends.sandbox_problem, browsers
    )
    speech = Speech.of(config.media, secrets_)  # a key named and unset: refused here
    tz = config.zone()
    names = ["local", *config.enabled_platforms()]
    statuses = {name: LinkStatus() for name in names}
    services = Services.for_platforms(clock or Clock(), names)
    live = ServeLive(services, agent.context_files)

    def registry() -> Registry:
        return services.state.get()

    async def mirrored(session_ids: list[str]) -> None:
        """A brief was written into these sessions: live ones read them again (the
        outbox's sender for that chat waits for room in the router's mailbox)."""
        intake = services.gateway.current()
        if intake is not None:
            with contextlib.suppress(ActorStopped):
                await intake.address.cast(Mirrored(tuple(session_ids)))

    def admission() -> Admission:
        return Admission(
            registry(), home.state_db, services.gateway.current, services.clock, config.platforms
        )

    def endpoint() -> LocalEndpoint:
        local = config.gateway.local
        methods = Methods(registry(), home.state_db, services.clock, config, live)

        def bound(port: int) -> None:
            write_secret_file(home.serve_port, f"{port}\n")  # where clients look
            on_bound(port)

        return LocalEndpoint(
            local.host, local.port, token, methods, statuses["local"], admission(), bound
        )

    async def undelivered(failed: DeliveryFailed) -> None:
        """A send the platform took and later failed: its row dead, committed before the
        adapter acknowledges the report."""
        async with Db(registry(), home.state_db) as db:
            await db.write(
                mark_undelivered,
                failed.platform,
                failed.message_id,
                failed.reason,
                services.clock.now(),
            )

    media = config.media
    media_limits = MediaLimits(
        media.max_file_bytes, int(media.cache_mb * 2**20), media.cache_days * 86400.0
    )

    def platform_spec(name: str, factory: Callable[[AdapterSetup], PlatformAdapter]) -> ChildSpec:
        settings = config.platforms[name]
        # Its own tokens only: an adapter never holds the model's keys or another's token.
        own = Secrets({v: secrets_.get(v) or "" for v in settings.token_names()}, frozenset())

        def bound(port: int) -> None:
            write_secret_file(home.listener_port(name), f"{port}\n")  # where clients look

        def build() -> PlatformAdapter:
            admit = admission()
            return factory(
                AdapterSetup(
                    name,
                    settings,
                    own,
                    statuses[name],
                    admit,
                    Cursors(registry(), home.state_db, services.clock),
                    home.cache / name,
                    media_limits,
                    undelivered,
                    config.retention.journal_days,
                    config.gateway.owners_on(name) | config.gateway.allowed_on(name),
                    recorded=functools.partial(admit.recorded, name),
                    bound=bound,
                    model=config.model.model,
                )
            )

        return ChildSpec(
            name,
            build,
            restart=Restart.TRANSIENT,  # a fatal error ends it normally: not restarted
            shutdown=5.0,
            ref=services.adapters[name],
        )

    hooked = frozenset(n for n in config.enabled_platforms() if platforms[n].webhook)

    def webhooks() -> Actor:
        from hermes.adapters.webhooks import WebhookListener  # its HTTP server, when used

        settings = config.gateway.webhooks

        def bound(port: int) -> None:
            write_secret_file(home.webhooks_port, f"{port}\n")  # where tests look

        return WebhookListener(
            settings.host, settings.port, hooked, services.adapter_of, settings.max_body, bound
        )

    def adapters() -> Supervisor:
        children = [ChildSpec("local", endpoint, shutdown=5.0, ref=services.adapters["local"])]
        children += [platform_spec(n, platforms[n].factory) for n in config.enabled_platforms()]
        if hooked:  # after the adapters it hands deliveries to (it stops before them)
            children.append(ChildSpec("webhooks", webhooks, shutdown=3.0))
        # One platform's outage never stops the others, nor the serve: no give-up.
        return Supervisor(
            "adapters",
            children,
            strategy=Strategy.ONE_FOR_ONE,
            max_restarts=math.inf,
            period=600.0,
            backoff=ADAPTER_BACKOFF,
        )

    def scheduler() -> Scheduler:
        outbox = services.outbox.current
        ctx = cron_fire_context(
            agent, registry(), home, tz, config, policy, outbox, services.clock, backends
        )
        return Scheduler(
            registry(), home.state_db, ctx, tz, watch_other_writers=watch_other_writers
        )

    def gateway() -> Router:
        session_services = SessionServices(
            background=services.terminal.get(),
            scheduler=services.scheduler.get(),
            tz=tz,
            outbox=services.outbox.current(),
            policy=policy,
            backends=backends,
            adapter_of=services.adapter_of,
            speech=speech,
        )
        holds = config.media.speak.holds()
        replies = OutboxReplies(
            registry(),
            home.state_db,
            services.adapter_of,
            services.outbox.current,
            services.clock,
            streamed=frozenset(n for n in names if PLATFORMS[n].streams),
            progress=progress_modes(config.enabled_platforms(), holds),
            interval=config.gateway.progress_interval,
            holds=holds,
        )
        return Router(
            registry(),
            home.state_db,
            home.root,
            home.memories,
            agent,
            config,
            replies,
            new_owner(),
            services.clock,
            session_services,
            approval_waits=services.approval_waits,
            live=live,
        )

    dedup = frozenset(n for n in config.enabled_platforms() if platforms[n].deduplicates)
    drain = config.gateway.drain_timeout
    root = Supervisor(
        "serve",
        [
            ChildSpec(
                "state",
                lambda: Registry(keep_open=[home.state_db]),
                shutdown=30.0,
                ref=services.state,
            ),
            ChildSpec("terminal", BackgroundProcesses, shutdown=10.0, ref=services.terminal),
            # Before everything that runs turns (it stops after them): each server under
            # its own supervisor, restarted for ever; it reports ready before they connect.
            ChildSpec("mcp", mcp.tree, shutdown=15.0),
            # Before everything that runs turns, as mcp: a drain closes every browser (its
            # whole process tree) after the turns that used them stopped.
            ChildSpec("browsers", browsers.node, shutdown=10.0),
            ChildSpec("adapters", adapters, shutdown=10.0, grace=3.0),
            # After the adapters: it stops before them, so a send in flight can finish.
            ChildSpec(
                "outbox",
                lambda: Outbox(
                    registry(),
                    home.state_db,
                    services.adapter_of,
                    dedup,
                    keying=Keying.of(config.platforms, config.gateway),
                    progress_interval=config.gateway.progress_interval,
                    mirrored=mirrored,
                    watch_other_writers=watch_other_writers,
                ),
                shutdown=drain,
                grace=3.0,
                ref=services.outbox,
            ),
            ChildSpec("scheduler", scheduler, shutdown=drain, ref=services.scheduler),
            ChildSpec("gateway", gateway, shutdown=drain, ref=services.gateway),
            *(surfaces(services, live) if surfaces else ()),
            # Last: it needs only the registry, and under rest_for_one its crash restarts
            # only the children after it, so here nothing else (a failed pass is logged).
            ChildSpec(
                "retention",
                lambda: Retention(
                    registry(),
                    home.state_db,
                    config.retention,
                    services.clock,
                    files=Files(home.cache, home.outgoing, media_limits),
                ),
            ),
            # After all the rest: it freezes what starting the tree made.
            ChildSpec("collector", Collector),
        ],
        strategy=Strategy.REST_FOR_ONE,
        max_restarts=5,
        period=60.0,
    )
    services.root.point(root)
    return root
