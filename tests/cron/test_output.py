"""Cron's files on disk: the newest 50 outputs per job are kept, and scripts stay in scripts/."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from hermes.cron.fire import FireError, script_path
from hermes.cron.output import write_output
from hermes.cron.schedule import parse_schedule
from hermes.cron.store import NewJob, create_job
from tests.seed import writing

UTC = ZoneInfo("UTC")
T0 = 1_800_000_000.0


def new_job(home, name: str):
    """A job row made the way `hermes cron add` makes one."""
    with writing(home.state_db) as conn:
        every = parse_schedule("every 1h", UTC, T0)
        return create_job(conn, NewJob(name, every, prompt="brief me"), T0, UTC)


@pytest.fixture
def job(home):
    return new_job(home, "brief")


def test_the_newest_50_outputs_of_a_job_are_kept(home, job):
    """55 fires a minute apart leave the files of the last 50, each with its own text."""
    written = [
        write_output(home.cron_output, job, n, T0 + 60 * n, "brief me", f"reply {n}", False)
        for n in range(1, 56)
    ]
    assert len(set(written)) == 55  # each fire had a file of its own
    kept = sorted((home.cron_output / job.id).iterdir())
    assert kept == sorted(written[5:])
    assert not any(path.exists() for path in written[:5])
    assert "reply 6\n" in kept[0].read_text() and "reply 55\n" in kept[-1].read_text()


def test_another_jobs_outputs_do_not_count(home, job):
    """The 50 are per job: one job's fires never remove another's outputs."""
    other = write_output(home.cron_output, job, 1, T0, "brief me", "other", False)
    busy = new_job(home, "busy")
    for n in range(1, 56):
        write_output(home.cron_output, busy, n, T0 + 60 * n, "brief me", "r", False)
    assert other.exists()
    assert len(list((home.cron_output / busy.id).iterdir())) == 50


@pytest.fixture
def outside(home):
    """A script beside scripts/, not in it (it exists: a refusal is not for its absence)."""
    path = home.root / "x.sh"
    path.write_text("echo out\n")
    return path


@pytest.fixture
def scripts(home, outside):
    """HERMES_HOME/scripts with scripts in it, and a symlink in it to one outside."""
    (home.scripts / "inside.sh").write_text("echo in\n")
    (home.scripts / "sub").mkdir()
    (home.scripts / "sub" / "nested.py").write_text("print('in')\n")
    (home.scripts / "link.sh").symlink_to(outside)
    return home.scripts


def test_a_script_inside_scripts_is_accepted(scripts):
    """Names inside scripts/ resolve to the file there."""
    assert script_path(scripts, "inside.sh") == (scripts / "inside.sh").resolve()
    assert script_path(scripts, "sub/nested.py") == (scripts / "sub" / "nested.py").resolve()


@pytest.mark.parametrize(
    "name",
    ["../x.sh", "sub/../../x.sh", "link.sh", "ABSOLUTE"],
    ids=["dot-dot", "dot-dot-deeper", "symlink-out", "absolute"],
)
def test_a_script_outside_scripts_is_refused(scripts, outside, name):
    """A name that leads out of scripts/ (by .., a symlink, an absolute path) is refused."""
    if name == "ABSOLUTE":
        name = str(outside)
    assert (scripts / name).resolve() == outside.resolve()  # the name does lead to x.sh
    with pytest.raises(FireError, match=r"script .* is outside .*scripts"):
        script_path(scripts, name)


def test_a_missing_script_is_refused(scripts):
    """A name inside scripts/ that is no file there is refused."""
    with pytest.raises(FireError, match="does not exist"):
        script_path(scripts, "missing.sh")
    with pytest.raises(FireError, match="'sub'"):
        script_path(scripts, "sub")  # a directory is not a script
