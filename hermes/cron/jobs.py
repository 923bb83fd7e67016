"""Cron job rows and the values they hold (what a state or status means, and what
changes it: hermes.cron.lifecycle)."""

from __future__ import annotations

from typing import Any

import attrs

from hermes.delivery.targets import Origin


@attrs.frozen
class Job:
    id: str
    name: str
    prompt: str | None
    script: str | None
    no_agent: bool
    schedule: str
    schedule_display: str
    repeat_times: int | None
    repeat_completed: int
    state: str
    deliver: str
    origin: Origin | None
    attach_to_session: bool | None
    catch_up: bool | None
    workdir: str | None
    model: str | None
    provider: str | None
    created_at: float
    next_run_at: float | None
    last_run_at: float | None
    last_status: str | None
    last_error: str | None
    last_delivery_error: str | None
    failure_streak: int
    retired_reason: str | None
    lease_owner: str | None
    lease_expires_at: float | None
    fence: int
    running_fence: int | None
    role: str  # its maker's role (owner or user): what its agent turns may do
    zone: str | None  # the time zone next_run_at was computed in (wall-clock schedules)
    skills: tuple[str, ...] = ()  # loaded into each fire's prompt

    def made_by(self, platform: str, user_id: str) -> bool:
        """Whether this user made the job (from a chat: its origin names them)."""
        return (
            self.origin is not None
            and self.origin.platform == platform
            and self.origin.user_id == user_id
        )

    def fire_running(self, now: float) -> bool:
        """Whether a fire of it holds a lease that has not run out by `now`."""
        return self.running_fence is not None and (self.lease_expires_at or 0) > now

    @property
    def recurring(self) -> bool:
        return not self.schedule.startswith("at:")

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["origin"] = attrs.asdict(self.origin) if self.origin else None
        return data


JOB_COLUMNS = [f.name for f in attrs.fields(Job)]
JOB_SELECT = f"SELECT {', '.join(JOB_COLUMNS)} FROM cron_jobs"


def job_from_row(row: tuple) -> Job:
    values = dict(zip(JOB_COLUMNS, row, strict=True))
    values["no_agent"] = bool(values["no_agent"])
    values["origin"] = Origin.from_json(values["origin"])
    values["skills"] = tuple((values["skills"] or "").split())
    for flag in ("attach_to_session", "catch_up"):
        if values[flag] is not None:
            values[flag] = bool(values[flag])
    return Job(**values)


@attrs.frozen
class Run:
    id: int
    job_id: str
    fence: int | None
    owner: str
    due_at: float | None
    started_at: float
    finished_at: float | None
    status: str
    output_path: str | None
    error: str | None
    delivery_error: str | None
    run_context: str | None


RUN_SELECT = f"SELECT {', '.join(f.name for f in attrs.fields(Run))} FROM cron_runs"
