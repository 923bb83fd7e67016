"""Executing one fire: a script, an agent turn, or a script whose output feeds the agent.

Runs inside the fire's cancel scope: cancelling it kills a script's whole
process tree and interrupts an agent turn.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import attrs

from hermes.cron.output import is_silent
from hermes.cron.runner import AgentRunner
from hermes.cron.store import Claim
from hermes.terminal.command import RunOptions, run_command
from hermes.terminal.env import EnvPolicy, Redactor

SCRIPT_TIMEOUT = 600.0


class FireError(Exception):
    """A fire that failed; the message is what the run history and the notice show."""


@attrs.frozen
class FireResult:
    status: str  # ok | error
    response: str
    prompt: str | None
    error: str | None = None

    @property
    def silent(self) -> bool:
        return self.status == "ok" and is_silent(self.response)


def script_path(scripts: Path, name: str) -> Path:
    """The script, which must live under HERMES_HOME/scripts."""
    root = scripts.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise FireError(f"script {name!r} is outside {root}")
    if not path.is_file():
        raise FireError(f"script {name!r} does not exist in {root}")
    return path


def script_argv(path: Path) -> list[str]:
    if path.suffix in (".sh", ".bash"):
        return ["bash", str(path)]
    return [sys.executable, str(path)]


@attrs.frozen
class FireContext:
    scripts: Path
    spill_dir: Path
    runner: AgentRunner
    environ: Mapping[str, str] = attrs.field(factory=lambda: dict(os.environ))
    policy: EnvPolicy = EnvPolicy()
    script_timeout: float = SCRIPT_TIMEOUT


def build_prompt(base: str | None, context: str | None, script_output: str | None) -> str:
    prompt = base or ""
    if script_output is not None:
        prompt += f"\n\n## Script Output\n\n{script_output}"
    if context:
        prompt += f"\n\n## Run Context\n\n{context}"
    return prompt.strip()


async def execute(claim: Claim, ctx: FireContext, now: float) -> FireResult:
    job = claim.job
    script_output = None
    try:
        if job.script:
            path = script_path(ctx.scripts, job.script)
            result = await run_command(
                script_argv(path),
                cwd=Path(job.workdir) if job.workdir else ctx.scripts,
                env=ctx.policy.child_env(ctx.environ),
                options=RunOptions(timeout=ctx.script_timeout, spill_dir=ctx.spill_dir),
                redactor=Redactor(ctx.policy.secret_values(ctx.environ)),
            )
            if result.exit_code != 0:
                raise FireError(
                    f"script {job.script} exited with status {result.exit_code}:\n"
                    f"{result.output[-2000:]}"
                )
            script_output = result.output
            if job.no_agent:
                return FireResult("ok", script_output, claim.run_context)
        prompt = build_prompt(job.prompt, claim.run_context, script_output)
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S")
        response = await ctx.runner.run(job, prompt, f"cron_{job.id}_{stamp}")
        return FireResult("ok", response, prompt)
    except FireError as exc:
        return FireResult("error", str(exc), job.prompt, str(exc))
    except Exception as exc:  # the agent or the provider failed: a failed run, not a crash
        return FireResult("error", f"{type(exc).__name__}: {exc}", job.prompt, str(exc))
