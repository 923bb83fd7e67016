"""Migrations: the steps above a file's version run on open; a file this hermes cannot
use (from a newer hermes, from before the baseline, not a state.db) is refused untouched."""

from __future__ import annotations

import apsw
import pytest

from hermes.state import maintenance, schema
from hermes.state.db import Db
from hermes.state.errors import SchemaTooNew, SchemaUnknown, StateError
from tests.processes import hermes
from tests.state import old_steps
from tests.state.helpers import count


def test_a_fresh_file_gets_the_current_version(tmp_path):
    conn = apsw.Connection(str(tmp_path / "x.db"))
    assert schema.migrate(conn) == list(range(1, schema.SCHEMA_VERSION + 1))
    assert schema.schema_version(conn) == schema.SCHEMA_VERSION
    assert schema.migrate(conn) == []  # idempotent


async def test_an_older_version_is_migrated_on_open(registry, db_path):
    # A file as the baseline left it, with a job in it.
    conn = apsw.Connection(str(db_path))
    assert schema.migrate(conn, target=1) == [1]
    conn.execute(
        "INSERT INTO cron_jobs (id, name, schedule, schedule_display, created_at)"
        " VALUES ('kept', 'kept', 'every:3600', 'every 1h', 1)"
    )
    conn.close()

    def set_zone(conn: apsw.Connection) -> None:
        conn.execute("UPDATE cron_jobs SET zone = 'Europe/Paris' WHERE id = 'kept'")

    async with Db(registry, db_path) as gen:
        assert count(db_path, "PRAGMA user_version") == schema.SCHEMA_VERSION
        assert count(db_path, "SELECT count(*) FROM cron_jobs WHERE zone IS NULL") == 1
        await gen.write(set_zone)
    assert count(db_path, "SELECT count(*) FROM cron_jobs WHERE zone = 'Europe/Paris'") == 1


def test_a_file_from_a_newer_hermes_is_refused_untouched(tmp_path):
    path = tmp_path / "x.db"
    conn = apsw.Connection(str(path))
    schema.migrate(conn)
    newer = schema.SCHEMA_VERSION + 1
    conn.execute(f"PRAGMA user_version = {newer}")
    with pytest.raises(SchemaTooNew, match=f"schema version {newer} is newer than this hermes"):
        schema.migrate(conn)
    assert schema.schema_version(conn) == newer
    assert str(path) in str(maintenance.check(path).schema_error)


@pytest.mark.parametrize("version", [1, 14, 15])
def test_a_development_file_from_before_the_baseline_is_refused_untouched(tmp_path, version):
    """Its number means something else now: the old v15 is the baseline without step 2,
    the old v1 has no cron at all. Migrating either would misread it."""
    path = tmp_path / "state.db"
    conn = apsw.Connection(str(path))
    old_steps.build(conn, target=version)
    conn.execute("INSERT INTO sessions (id, started_at) VALUES ('mine', 1)")
    before = list(conn.execute("SELECT type, name, sql FROM sqlite_master"))
    with pytest.raises(SchemaUnknown) as refused:
        schema.migrate(conn)
    assert str(path) in str(refused.value) and "move it aside" in str(refused.value)
    assert f"schema version {version} is from before the schema baseline" in str(refused.value)
    assert schema.schema_version(conn) == version
    assert list(conn.execute("SELECT type, name, sql FROM sqlite_master")) == before
    assert conn.execute("SELECT id FROM sessions").get == "mine"
    conn.close()
    report = maintenance.check(path)
    assert not report.ok and isinstance(report.schema_error, SchemaUnknown)


async def test_serve_s_writer_refuses_a_file_from_before_the_baseline(registry, db_path):
    conn = apsw.Connection(str(db_path))
    old_steps.build(conn)
    conn.close()
    with pytest.raises(StateError, match="from before the schema baseline") as refused:
        async with Db(registry, db_path):
            pass
    assert isinstance(refused.value.__cause__, SchemaUnknown)
    assert count(db_path, "PRAGMA user_version") == 15


def test_a_file_with_tables_but_no_version_is_refused(tmp_path):
    conn = apsw.Connection(str(tmp_path / "other.db"))
    conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(SchemaUnknown, match="it has tables but no schema version"):
        schema.migrate(conn)
    assert [name for (name,) in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]


def test_check_passes_a_file_the_baseline_made(tmp_path):
    path = tmp_path / "x.db"
    conn = apsw.Connection(str(path))
    schema.migrate(conn)
    conn.close()
    report = maintenance.check(path)
    assert report.ok and report.schema_error is None
    assert report.schema_version == schema.SCHEMA_VERSION


def test_db_check_names_a_file_from_before_the_baseline(home):
    conn = apsw.Connection(str(home.state_db))
    old_steps.build(conn)
    conn.close()
    result = hermes("db", "check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "integrity_check: ok" in lines and "schema_version: 15" in lines
    assert f"schema: {home.state_db}: schema version 15 is from before the schema baseline" in (
        result.stdout
    )
    assert "move it aside" in result.stdout
