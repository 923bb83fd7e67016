"""`hermes cron run` with no serve running: the job fires in this process, with the
configured model, MCP servers and backends, through the same fire lifecycle as serve's
scheduler (lease, heartbeat, fenced result, delivery). Its own module: it loads the agent
and serve's keys, which no other cron command needs."""

from __future__ import annotations

import argparse
import os
import signal

import trio

from hermes.actors.clock import Clock
from hermes.agent.cron_runner import cron_fire_context
from hermes.agent.loop import Agent
from hermes.agent.mcp.servers import McpServers
from hermes.agent.mcp.setup import McpSetup
from hermes.agent.providers import build_agent
from hermes.cli import exit_codes
from hermes.cli.act import open_state
from hermes.cron.fire import Fire, run_fire
from hermes.cron.injection import check as injection_check
from hermes.cron.lifecycle import Cause
from hermes.cron.store import claim_now, get_job, run_history
from hermes.gateway.settings import Config
from hermes.gateway.tree import ServeKeys
from hermes.home import HermesHome
from hermes.state.db import Db
from hermes.state.registry import Registry
from hermes.terminal.env import EnvPolicy
from hermes.terminal.leftovers import kill_leftovers, mark_trees
from hermes.terminal.placement import Backends, backends_for
from hermes.terminal.reaper import become_subreaper


def run_here(args: argparse.Namespace, home: HermesHome, config: Config) -> int:
    """No serve runs: fire now, in this process, with the configured model (its state.db
    writer is this process's only one)."""
    injection_check(args.prompt, "run context")
    keys = ServeKeys.load(home, config)  # what serve holds: kept out, redacted, as in serve
    home.ensure()
    # The MCP servers serve would run, run here for the fire: the same tools as in serve.
    mcp = McpServers(config.mcp, McpSetup(keys.secrets, keys.policy, home.workspace, keys.redact))
    backends = backends_for(config.terminal, home.root)
    agent = build_agent(config, keys.secrets, home, keys.redact, mcp, backends.sandbox_problem)
    become_subreaper()  # a script's double-forked children stay ours to kill
    mark_trees(home.root)
    return trio.run(_fire_now, args, home, config, agent, keys.policy, mcp, backends)


async def _fire_now(
    args: argparse.Namespace,
    home: HermesHome,
    config: Config,
    agent: Agent,
    policy: EnvPolicy,
    mcp: McpServers,
    backends: Backends,
) -> int:
    async with open_state(home) as db:
        await kill_leftovers(home.root)
        async with mcp.running():
            return await _fire_with(db, db.registry, args, home, config, agent, policy, backends)


async def _fire_with(
    db: Db, registry: Registry, args, home, config, agent, policy, backends: Backends
) -> int:
    owner = f"cli:{os.getpid()}"
    lease = config.cron.lease_seconds
    claim = await db.write(claim_now, args.job, owner, Clock().now(), lease, args.prompt)
    ctx = cron_fire_context(agent, registry, home, config.zone(), config, policy, backends=backends)
    fire = Fire(claim)
    print(f"firing {claim.job.id} (run {claim.fence}) ...", flush=True)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    fire.cancel(Cause.SHUTDOWN, f"interrupted: hermes cron run got {name}")

            nursery.start_soon(on_signal)
            status = await run_fire(fire, ctx, db)
            nursery.cancel_scope.cancel()
    job = await db.read(get_job, claim.job.id)
    run = next(r for r in await db.read(run_history, claim.job.id) if r.fence == claim.fence)
    if status in ("ok", "error") and run.output_path:
        print(await trio.Path(run.output_path).read_text(encoding="utf-8"))
    print(
        f"[{run.status}; run {claim.fence} of {job.id if job else claim.job.id}]"
        + (f" {run.error}" if run.error and status != "error" else "")
    )
    return exit_codes.OK if status == "ok" else exit_codes.FAILED
