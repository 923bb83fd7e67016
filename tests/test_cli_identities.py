"""`hermes identities list | unlink` against a real state.db."""

from __future__ import annotations

import time

from hermes.cli import exit_codes
from hermes.cli.main import main
from hermes.state.identities import issue_code, redeem
from tests.seed import rows, writing


def run_cli(*argv: str) -> int:
    return main(["identities", *argv])


def link_now(home, issuer: tuple[str, str], redeemer: tuple[str, str]) -> str:
    with writing(home.state_db) as conn:
        code = issue_code(conn, *issuer, "user", time.time())
        return redeem(conn, code, *redeemer, "user", time.time()).person


def test_list_on_a_fresh_home_creates_nothing(home, capsys):
    assert run_cli("list") == exit_codes.OK
    assert capsys.readouterr().out.startswith("no linked accounts")
    assert not home.state_db.exists()


def test_list_and_unlink(home, capsys):
    person = link_now(home, ("telegram", "12345"), ("discord", "678"))
    assert run_cli("list") == exit_codes.OK
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["PERSON", "PLATFORM", "USER", "ID", "LINKED", "AT"]
    assert [line.split()[:3] for line in lines] == [
        [person, "discord", "678"],
        [person, "telegram", "12345"],
    ]

    assert run_cli("unlink", "discord", "678") == exit_codes.OK
    assert capsys.readouterr().out == (
        "unlinked discord user 678; it is an account of its own again\n"
    )
    assert rows(home.state_db, "SELECT * FROM identities") == []  # telegram is alone now
    assert run_cli("list") == exit_codes.OK
    assert capsys.readouterr().out.startswith("no linked accounts")

    assert run_cli("unlink", "discord", "678") == exit_codes.FAILED
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "hermes: discord user 678 is not linked to another account\n"
