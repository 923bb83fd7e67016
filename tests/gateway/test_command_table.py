"""The command table is the one list of chat commands: /help says each, the router answers
exactly its `router` ones and the session actor its `session` ones, and commands reach the
router only through their narrow surface (no import of the router)."""

from __future__ import annotations

import ast
from pathlib import Path

from hermes.gateway import commands
from hermes.gateway.command_table import HELP, ROUTER_COMMANDS, SESSION_COMMANDS, TABLE, word_of


def test_help_says_every_command_and_each_runs_in_one_place():
    for command in TABLE:
        assert f"\n{command.word} " in f"\n{HELP}", command.word
    with_text = {c.word for c in TABLE if c.takes_text}  # a turn's way: intake's to place
    assert ROUTER_COMMANDS | SESSION_COMMANDS | with_text == {c.word for c in TABLE}
    assert with_text == {"/queue", "/steer"}
    assert not ROUTER_COMMANDS & SESSION_COMMANDS


def test_the_commands_module_never_imports_the_router():
    tree = ast.parse(Path(commands.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "hermes.gateway.router" not in imported


def test_a_command_word_is_read_as_the_platforms_write_it():
    assert word_of("  /Stop@hermes_bot now") == "/stop"
    assert word_of("") == "" and word_of("hello /stop") == "hello"
