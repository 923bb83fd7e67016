"""How a cron fire reaches the agent: the AgentRunner interface.

The agent package implements it (hermes.agent.cron_runner) with real agent
turns; cron itself never imports the agent (it sits below it).
"""

from __future__ import annotations

from typing import Protocol

from hermes.cron.jobs import Job


class AgentRunner(Protocol):
    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        """Run one agent turn for `job` in session `session_id`; its final text.

        Raise to fail the fire. Cancelling the caller's scope interrupts the turn.
        """
