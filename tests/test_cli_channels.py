"""`hermes channels` as a user runs it: config's home channel, then one set by /sethome."""

from __future__ import annotations

import time

from hermes.adapters.contract import Target
from hermes.delivery.channels import set_home
from tests.processes import hermes
from tests.seed import writing


def test_channels_lists_config_then_sethome(home):
    empty = hermes("channels")
    assert empty.returncode == 0 and "no home channels" in empty.stdout
    assert not home.state_db.exists()  # a read creates nothing

    home.config_path.write_text(
        "platforms:\n  telegram:\n    token_env: TG\n    home_channel: '-100:7'\n"
    )
    listed = hermes("channels")
    assert listed.returncode == 0, listed.stderr
    [row] = listed.stdout.splitlines()[1:]
    assert row.split()[:4] == ["telegram", "-100", "7", "config"]

    with writing(home.state_db) as conn:
        set_home(conn, Target("telegram", "-200"), "u42", time.time())
    [row] = hermes("channels").stdout.splitlines()[1:]
    assert row.split()[:4] == ["telegram", "-200", "-", "u42"]
