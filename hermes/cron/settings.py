"""The scheduler's section of config.yaml (`cron`).

The docstring under each field of this class is its line in docs/configuration.md.
"""

from __future__ import annotations

import attrs

from hermes.config import at_least, positive


@attrs.frozen
class CronConfig:
    """Scheduled jobs: what they do around a fire, and the lease every fire holds."""

    failure_nudge_threshold: int = attrs.field(default=3, validator=at_least(0))
    """Failures in a row after which a recurring job's failure notice asks you to review
    it (0: never)."""
    mirror_delivery: bool = False
    """Write a brief delivered to its job's origin chat into that chat's conversation too,
    so a reply continues from it."""
    catch_up: bool = True
    """A run missed beyond its grace window fires once when serve is back (a job's own
    `--no-catch-up` turns it off for that job)."""
    lease_seconds: float = attrs.field(default=60.0, validator=positive)
    """How long a fire's claim on its job holds without renewal; a fire that loses it is
    cancelled."""
    heartbeat_seconds: float = attrs.field(default=20.0, validator=positive)
    """How often a running fire renews its lease (keep it near a third of
    `lease_seconds`)."""
