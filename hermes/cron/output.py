"""A fire's output file: HERMES_HOME/cron/output/<job_id>/<timestamp>.md, newest 50 kept."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from hermes.cron.jobs import Job

KEEP = 50


def write_output(
    root: Path,
    job: Job,
    fence: int,
    ran_at: float,
    prompt: str | None,
    response: str,
    failed: bool,
) -> Path:
    directory = root / job.id
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp(ran_at, UTC)
    path = directory / f"{stamp.strftime('%Y%m%dT%H%M%S')}-{fence}.md"
    status = "FAILED" if failed else "ok"
    text = "\n".join(
        [
            f"# {job.name}{' (FAILED)' if failed else ''}",
            "",
            f"- job: `{job.id}` (run {fence})",
            f"- ran at: {stamp.strftime('%Y-%m-%d %H:%M:%S UTC')}",
            f"- schedule: {job.schedule_display}",
            f"- status: {status}",
            "",
            "## Prompt",
            "",
            prompt or "(script only)",
            "",
            "## Response" if not failed else "## Error",
            "",
            response,
            "",
        ]
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    for old in sorted(directory.glob("*.md"))[:-KEEP]:
        old.unlink(missing_ok=True)
    return path


SILENT_MARKERS = {"[SILENT]", "SILENT", "NO_REPLY"}


def is_silent(response: str) -> bool:
    """`[SILENT]` (or SILENT / NO_REPLY) as the whole response or its first or last line."""
    lines = [line.strip() for line in response.strip().splitlines() if line.strip()]
    if not lines:
        return True  # an empty response is a silent run
    return lines[0] in SILENT_MARKERS or lines[-1] in SILENT_MARKERS
