"""Recording a fire's result: the output file, then the write fenced by its token."""

from __future__ import annotations

from pathlib import Path

from hermes.cron.fire import FireResult
from hermes.cron.output import write_output
from hermes.cron.store import Claim, finish_fire
from hermes.state.holder import DbHolder


async def record_result(
    db: DbHolder, output_dir: Path, claim: Claim, result: FireResult, now: float
) -> tuple[Path, int | None]:
    """The output path, and the job's failure streak, or None if the write was
    refused as stale (a newer fire owns the job: deliver nothing)."""
    path = write_output(
        output_dir, claim.job, claim.fence, now, result.prompt, result.response,
        result.status == "error",
    )  # fmt: skip
    streak = await db.write(
        finish_fire, claim.job.id, claim.fence, result.status, now, result.error, str(path)
    )
    return path, streak
