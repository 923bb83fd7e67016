"""The file tools: read_file, write_file, patch, search_files.

Each reaches only what its caller's commands may see (a user: their session's own
directory; an owner on this machine: all of it but HERMES_HOME's secrets; an owner over
ssh: nothing here), no link leads out, each is bounded, and a write is whole or not at
all. Real files in tmp_path; what is on disk after each call is what is asserted."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from hermes.agent.permissions import Caller
from hermes.agent.tools import files as file_tools
from hermes.agent.tools.base import SessionFiles, ToolContext, ToolError
from hermes.agent.tools.file_view import FileRefused, FileView, view_for
from hermes.agent.tools.files import (
    PatchTool,
    ReadFileTool,
    SearchFilesTool,
    WriteFileTool,
    read_lines,
    write_atomic,
)
from hermes.terminal.backends.host import Host
from hermes.terminal.backends.sandbox import Sandbox
from hermes.terminal.backends.ssh import Ssh
from hermes.terminal.placement import Backends, backends_for
from hermes.terminal.session import TerminalSession
from hermes.terminal.settings import SandboxConfig, SshConfig, TerminalConfig

read, write, patch, search = ReadFileTool(), WriteFileTool(), PatchTool(), SearchFilesTool()


def context(
    tmp_path,
    monkeypatch,
    role: str = "user",
    *,
    sandbox: bool = True,
    ssh: bool = False,
    untrusted: str | None = None,
    workdir=None,
    backends: Backends | None = None,
) -> ToolContext:
    """A turn of `role` in session s1 of the HERMES_HOME at tmp_path/home (holding a .env
    and a state.db), its own directory home/workspace/s1. The sandbox is a real Sandbox
    object: the file tools only ask where commands would run, never run bubblewrap."""
    home = tmp_path / "home"
    monkeypatch.setenv("HERMES_HOME", str(home))
    own = home / "workspace" / "s1"
    own.mkdir(parents=True, exist_ok=True)
    (home / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (home / "state.db").write_bytes(b"SQLite format 3\x00rows")
    if backends is None:
        if ssh:
            unconfined = Ssh(SshConfig(host="203.0.113.9", user="me", key=str(tmp_path / "key")))
        else:
            unconfined = Host()
        box = Sandbox(SandboxConfig(), home.resolve()) if sandbox else None
        backends = Backends(TerminalConfig(), unconfined, box, None if sandbox else "no bwrap")
    terminal = TerminalSession(workdir or own, own=own, state_dir=home / ".terminal",
                               backends=backends)  # fmt: skip
    files = SessionFiles(home, workdir or own, workdir is None, home / "cache",
                         home / ".terminal" / "output", home / "outgoing")  # fmt: skip
    ctx = ToolContext("s1", None, terminal, None, Caller("telegram", "1", role), files=files)
    if untrusted is not None:
        ctx.took_in(untrusted)
    return ctx


def own(ctx: ToolContext):
    return ctx.terminal.own


@pytest.fixture
def user(tmp_path, monkeypatch) -> ToolContext:
    return context(tmp_path, monkeypatch)


@pytest.fixture
def outside(tmp_path):
    """A directory outside HERMES_HOME, with a file."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "notes.txt").write_text("the owner's notes\n")
    return directory


# --- read_file ---------------------------------------------------------------------------


async def test_read_numbers_lines_from_an_offset_and_says_how_to_read_on(user):
    (own(user) / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    shown = await read({"path": "a.txt", "offset": 10, "limit": 3}, user)
    lines = shown.split("\n")
    assert lines[:3] == ["   10\tline 10", "   11\tline 11", "   12\tline 12"]
    assert "[lines 10-12 of 1,000; read on with offset=13]" in lines
    whole = await read({"path": "a.txt"}, user)
    assert whole.count("\n") == 500 and "   500\tline 500" not in whole  # the default limit
    assert "  500\tline 500" in whole and "offset=501" in whole
    past = await read({"path": "a.txt", "offset": 2000}, user)
    assert past == "[a.txt has 1,000 lines: offset 2,000 is past its end]"


async def test_read_shows_at_most_2000_lines_each_cut_at_2000_characters(user):
    (own(user) / "long.txt").write_text("x" * 5000 + "\n" + "y\n" * 2999)
    shown = await read({"path": "long.txt", "limit": 5000}, user)
    lines = shown.split("\n")
    assert lines[0] == "    1\t" + "x" * 2000
    assert sum(1 for line in lines if not line.startswith("[")) == 2000
    assert "[line(s) 1 cut at 2000 characters]" in lines
    assert "[lines 1-2,000 of 3,000; read on with offset=2001]" in lines


async def test_read_refuses_a_binary_file_naming_its_size(user):
    (own(user) / "blob.bin").write_bytes(b"ELF\x00\x01" * 100)
    with pytest.raises(ToolError, match=r"blob.bin is a binary file \(500 bytes, it holds NUL"):
        await read({"path": "blob.bin"}, user)
    (own(user) / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ToolError, match=r"latin.txt is a binary file \(5 bytes, not UTF-8"):
        await read({"path": "latin.txt"}, user)
    with pytest.raises(ToolError, match="is a directory"):
        await read({"path": "."}, user)


async def test_a_file_over_the_size_cap_is_read_only_as_far_as_asked(user, monkeypatch):
    monkeypatch.setattr(file_tools, "SIZE_CAP", 1000)
    (own(user) / "big.log").write_text("".join(f"entry {i}\n" for i in range(1, 501)))
    size = (own(user) / "big.log").stat().st_size
    shown = await read({"path": "big.log", "offset": 3, "limit": 2}, user)
    assert shown.split("\n") == [
        "    3\tentry 3",
        "    4\tentry 4",
        f"[lines 3-4 of a {size:,} bytes file (not counted); read on with offset=5]",
    ]


# --- write_file --------------------------------------------------------------------------


async def test_write_creates_the_file_and_its_directory_and_keeps_an_old_files_mode(user):
    done = json.loads(await write({"path": "notes/today.md", "content": "one\ntwo\n"}, user))
    target = own(user) / "notes" / "today.md"
    assert target.read_text() == "one\ntwo\n"
    assert done == {"path": str(target.resolve()), "created": True, "bytes": 8, "lines": 2}
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    target.chmod(0o600)
    done = json.loads(await write({"path": "notes/today.md", "content": "three"}, user))
    assert target.read_text() == "three" and done["created"] is False
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["today.md"]


async def test_write_refuses_content_over_its_cap_and_a_directory(user):
    with pytest.raises(ToolError, match=r"content is 1,048,577 bytes, more than the 1,048,576"):
        await write({"path": "huge.txt", "content": "x" * (1024 * 1024 + 1)}, user)
    assert not (own(user) / "huge.txt").exists()
    (own(user) / "adir").mkdir()
    with pytest.raises(ToolError, match="adir is a directory"):
        await write({"path": "adir", "content": "x"}, user)
    assert (own(user) / "adir").is_dir()
    with pytest.raises(ToolError, match="content is not valid text"):
        await write({"path": "bad.txt", "content": "a\ud800b"}, user)
    assert not (own(user) / "bad.txt").exists()


@pytest.mark.parametrize("fails", ["replace", "fsync"])
async def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(
    user, monkeypatch, fails
):
    target = own(user) / "config.ini"
    target.write_text("old content\n")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fails, boom)
    with pytest.raises(ToolError, match="No space left on device"):
        await write({"path": "config.ini", "content": "new content\n"}, user)
    monkeypatch.undo()
    assert target.read_text() == "old content\n"
    assert [p.name for p in own(user).iterdir()] == ["config.ini"]  # no temporary left


# --- patch -------------------------------------------------------------------------------


async def test_patch_replaces_text_found_once(user):
    target = own(user) / "app.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    done = json.loads(await patch({"path": "app.py", "old": "    return 2", "new": "    return 3"},
                                  user))  # fmt: skip
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert (done["at_line"], done["lines_added"], done["lines_removed"]) == (5, 1, 1)
    assert "-    return 2\n+    return 3" in done["diff"]


async def test_an_ambiguous_patch_is_refused_naming_where_it_matches(user):
    target = own(user) / "app.py"
    text = "a = 1\nx = 0\nb = 2\n\nc = 3\nx = 0\n"
    target.write_text(text)
    with pytest.raises(ToolError, match=r"old appears 2 times in app.py \(at lines 2, 6\)"):
        await patch({"path": "app.py", "old": "x = 0", "new": "x = 9"}, user)
    assert target.read_text() == text


async def test_a_missing_match_is_refused_with_a_hint_at_whitespace(user):
    target = own(user) / "app.py"
    text = "def f():\n\treturn 1\n"
    target.write_text(text)
    with pytest.raises(ToolError, match=r"old is not in app.py.*'return 1' is at line\(s\) 2"
                                        r" of the file with different whitespace"):  # fmt: skip
        await patch({"path": "app.py", "old": "def f():\n    return 1", "new": "x"}, user)
    with pytest.raises(ToolError, match="old is not in app.py; the file is unchanged: read_file"):
        await patch({"path": "app.py", "old": "nowhere", "new": "x"}, user)
    assert target.read_text() == text


DIFF = """--- a/list.txt
+++ b/list.txt
@@ -2,3 +2,3 @@
 two
-three
+THREE
 four
@@ -8,3 +8,4 @@
 eight
 nine
+nine and a half
 ten
"""


async def test_a_unified_diff_applies_every_hunk_even_a_few_lines_off(user):
    target = own(user) / "list.txt"
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    target.write_text("zero\n" + "\n".join(words) + "\n")  # one line more than the diff says
    done = json.loads(await patch({"path": "list.txt", "diff": DIFF}, user))
    assert target.read_text().split("\n") == [
        "zero", "one", "two", "THREE", "four", "five", "six", "seven", "eight", "nine",
        "nine and a half", "ten", "",
    ]  # fmt: skip
    assert (done["hunks"], done["lines_added"], done["lines_removed"]) == (2, 2, 1)
    assert done["notes"][0] == "hunk 1 applied at line 3 of the old file, not 2"


async def test_a_diff_with_a_hunk_that_does_not_apply_changes_nothing(user):
    target = own(user) / "list.txt"
    text = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nNINE\nten\n"
    target.write_text(text)
    with pytest.raises(ToolError, match=r"hunk 2 \(@@ -8,3 \+8,4 @@\) does not apply.*No hunk"
                                        " was applied"):  # fmt: skip
        await patch({"path": "list.txt", "diff": DIFF}, user)
    assert target.read_text() == text  # hunk 1 matched, and was not applied either
    with pytest.raises(ToolError, match="the diff has no hunk"):
        await patch({"path": "list.txt", "diff": "just words"}, user)
    two_files = DIFF + "--- a/other.txt\n+++ b/other.txt\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(ToolError, match="more than one file"):
        await patch({"path": "list.txt", "diff": two_files}, user)
    assert target.read_text() == text


# --- search_files ------------------------------------------------------------------------


async def test_search_finds_lines_and_names_under_a_path_filtered_by_a_glob(user):
    src = own(user) / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "main.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (src / "pkg" / "util.py").write_text("def helper():\n    pass\n")
    (src / "README.md").write_text("def in prose\n")
    (src / ".git").mkdir()
    (src / ".git" / "config.py").write_text("def hidden():\n")
    found = await search({"pattern": r"^def \w+", "path": "src", "glob": "*.py"}, user)
    assert found.split("\n") == ["main.py:3: def main():", "pkg/util.py:1: def helper():"]
    names = await search({"pattern": r"util|READ", "path": "src", "names": True}, user)
    assert names.split("\n") == ["README.md", "pkg/util.py"]
    nothing = await search({"pattern": "absent", "path": "src"}, user)
    assert nothing == "[no matches in 3 file(s) searched]"
    with pytest.raises(ToolError, match="not a valid regular expression: missing \\)"):
        await search({"pattern": "(unclosed"}, user)


async def test_search_stops_at_its_caps_and_says_so(user, monkeypatch):
    many = own(user) / "many"
    many.mkdir()
    (many / "a.txt").write_text("hit\n" * 250)
    found = (await search({"pattern": "hit", "path": "many"}, user)).split("\n")
    assert found[:2] == ["a.txt:1: hit", "a.txt:2: hit"]
    assert len([f for f in found if f.startswith("a.txt:")]) == 200
    assert found[-1].startswith("[the cap on matches (200) cut the search short")
    (many / "long.txt").write_text("x" * 300 + "\n" + "long " + "y" * 400 + "\n")
    (many / "blob.bin").write_bytes(b"long\x00")
    (many / "big.txt").write_text("long\n" * 300_000)  # over 1 MB: skipped
    long = await search({"pattern": "long", "path": "many"}, user)
    assert long.split("\n") == ["long.txt:2: long " + "y" * 295,
                                "[files skipped: 1 binary, 1 over 1 MB]"]  # fmt: skip
    monkeypatch.setattr(file_tools, "SEARCH_FILES", 3)
    for i in range(6):
        (many / f"f{i}.log").write_text("nothing\n")
    capped = await search({"pattern": "hit", "path": "many", "glob": "*.log"}, user)
    assert capped.split("\n") == [
        "[no matches in 3 file(s) searched]",
        "[the cap on files searched (3) cut the search short after 3 file(s): narrow the"
        " pattern, path or glob]",
    ]


async def test_a_runaway_pattern_is_stopped_by_the_time_cap(user, monkeypatch):
    monkeypatch.setattr(file_tools, "SEARCH_SECONDS", 0.5)
    (own(user) / "a.txt").write_text("a" * 40 + "b\n")
    started = time.monotonic()
    said = await search({"pattern": "(a|aa)+$"}, user)
    assert time.monotonic() - started < 5
    assert "[the time cap (0.5 s) cut the search short" in said


async def test_search_never_follows_a_link_out_of_the_view(user, outside):
    (outside / "secret.txt").write_text("needle outside\n")
    (own(user) / "mine.txt").write_text("needle inside\n")
    (own(user) / "linked-dir").symlink_to(outside, target_is_directory=True)
    (own(user) / "linked-file.txt").symlink_to(outside / "secret.txt")
    (own(user) / "inner-link.txt").symlink_to(own(user) / "mine.txt")
    found = await search({"pattern": "needle"}, user)
    assert found.split("\n") == [
        "inner-link.txt:1: needle inside",
        "mine.txt:1: needle inside",
        "[files skipped: 1 outside what you may reach]",
    ]


# --- what a user reaches: their session's own directory ----------------------------------


async def test_a_user_reaches_only_their_sessions_directory(user, tmp_path):
    (own(user) / "mine.txt").write_text("mine\n")
    assert await read({"path": "mine.txt"}, user) == "    1\tmine"
    assert await read({"path": str(own(user) / "mine.txt")}, user) == "    1\tmine"
    for path in ("/etc/passwd", "../../.env", "../../state.db", "../s2/theirs.txt", "/"):
        with pytest.raises(FileRefused, match=f"only files under {own(user).resolve()}"):
            await read({"path": path}, user)
    with pytest.raises(FileRefused):
        await write({"path": "../../.env", "content": "OPENAI_API_KEY=mine"}, user)
    with pytest.raises(FileRefused):
        await search({"pattern": "root", "path": "/etc"}, user)
    with pytest.raises(FileRefused):
        await patch({"path": "../../.env", "old": "sk-secret", "new": "x"}, user)
    assert (tmp_path / "home" / ".env").read_text() == "OPENAI_API_KEY=sk-secret\n"


async def test_a_link_out_of_a_users_directory_leads_nowhere(user, outside):
    (own(user) / "notes-link.txt").symlink_to(outside / "notes.txt")
    (own(user) / "env-link").symlink_to(own(user).parent.parent / ".env")
    (own(user) / "new-link.txt").symlink_to(outside / "created.txt")  # dangling
    (own(user) / "dir-link").symlink_to(outside, target_is_directory=True)
    for path in ("notes-link.txt", "env-link", "dir-link/notes.txt"):
        with pytest.raises(FileRefused, match="not a path your file tools may reach"):
            await read({"path": path}, user)
    for path in ("notes-link.txt", "new-link.txt", "dir-link/planted.txt"):
        with pytest.raises(FileRefused):
            await write({"path": path, "content": "planted"}, user)
    with pytest.raises(FileRefused):
        await patch({"path": "notes-link.txt", "old": "notes", "new": "planted"}, user)
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt"]
    assert (outside / "notes.txt").read_text() == "the owner's notes\n"


async def test_a_link_inside_a_users_directory_works(user):
    (own(user) / "real.txt").write_text("real\n")
    (own(user) / "alias.txt").symlink_to("real.txt")
    assert await read({"path": "alias.txt"}, user) == "    1\treal"
    await write({"path": "alias.txt", "content": "rewritten\n"}, user)
    assert (own(user) / "real.txt").read_text() == "rewritten\n"
    assert (own(user) / "alias.txt").is_symlink()


async def test_a_link_swapped_in_after_the_check_leads_nowhere(user):
    """A user's background loop may swap a checked file, or its directory, for a link
    between resolve and open: what was opened is checked again."""
    view = view_for(user)
    (own(user) / "f.txt").write_text("mine\n")
    checked = view.resolve("f.txt")
    checked.unlink()
    checked.symlink_to(own(user).parent.parent / ".env")
    with pytest.raises(FileRefused, match="leads outside"):
        read_lines(view, checked, "f.txt", 1, 10)
    (own(user) / "sub").mkdir()
    target = view.resolve("sub/new.txt")
    (own(user) / "sub").rmdir()
    (own(user) / "sub").symlink_to(own(user).parent.parent, target_is_directory=True)
    with pytest.raises(FileRefused, match="leads outside"):
        write_atomic(view, target, b"planted", "sub/new.txt")
    assert not (own(user).parent.parent / "new.txt").exists()


async def test_a_user_without_a_sandbox_reaches_no_files(tmp_path, monkeypatch):
    ctx = context(tmp_path, monkeypatch, sandbox=False)
    with pytest.raises(FileRefused, match="files cannot be reached here: no sandbox: no bwrap"):
        await read({"path": "x.txt"}, ctx)


# --- what an owner reaches ---------------------------------------------------------------


async def test_an_owner_on_this_machine_reaches_it_all_but_hermes_homes_secrets(
    tmp_path, monkeypatch, outside
):
    owner = context(tmp_path, monkeypatch, "owner")
    home = tmp_path / "home"
    assert await read({"path": str(outside / "notes.txt")}, owner) == "    1\tthe owner's notes"
    await write({"path": str(outside / "todo.txt"), "content": "call\n"}, owner)
    assert (outside / "todo.txt").read_text() == "call\n"
    other = home / "workspace" / "s2" / "theirs.txt"  # the workspace is open to an owner
    other.parent.mkdir()
    other.write_text("another session's\n")
    assert await read({"path": "../s2/theirs.txt"}, owner) == "    1\tanother session's"
    (own(owner) / "env-link").symlink_to(home / ".env")
    for path in (str(home / ".env"), str(home / "state.db"), "../../.env", "env-link",
                 "/proc/self/environ"):  # fmt: skip
        with pytest.raises(FileRefused, match=f"none under {home.resolve()}, /proc/"):
            await read({"path": path}, owner)
    for path in (str(home / ".env"), str(home / "state.db"), str(home / "config.yaml")):
        with pytest.raises(FileRefused):
            await write({"path": path, "content": "x"}, owner)
    assert (home / ".env").read_text() == "OPENAI_API_KEY=sk-secret\n"
    assert (home / "state.db").read_bytes() == b"SQLite format 3\x00rows"
    assert not (home / "config.yaml").exists()
    found = await search({"pattern": "sk-secret|owner", "path": str(tmp_path)}, owner)
    assert found.split("\n") == [
        "outside/notes.txt:1: the owner's notes",
        "[files skipped: 3 outside what you may reach]",  # .env, state.db, env-link
    ]


async def test_an_owners_relative_paths_follow_where_their_shell_was_left(
    tmp_path, monkeypatch, outside
):
    owner = context(tmp_path, monkeypatch, "owner")
    placement = owner.terminal.backends.place("owner")
    result = await owner.terminal.run(f"cd {outside}", placement=placement)
    assert result.exit_code == 0
    assert await read({"path": "notes.txt"}, owner) == "    1\tthe owner's notes"


async def test_an_owner_whose_commands_run_over_ssh_is_sent_to_the_terminal(
    tmp_path, monkeypatch, outside
):
    owner = context(tmp_path, monkeypatch, "owner", ssh=True)
    with pytest.raises(FileRefused, match="run on another one over ssh: use the terminal tool"):
        await read({"path": str(outside / "notes.txt")}, owner)
    with pytest.raises(FileRefused, match="over ssh"):
        await write({"path": str(outside / "x.txt"), "content": "x"}, owner)
    assert not (outside / "x.txt").exists()


@pytest.mark.parametrize("sandbox", [True, False])
async def test_an_owners_turn_that_read_untrusted_text_reaches_only_its_directory(
    tmp_path, monkeypatch, outside, sandbox
):
    """Sandboxed (after_untrusted: sandbox), or asked about where there is no sandbox:
    either way its commands would not reach the machine unasked, nor do its files."""
    owner = context(tmp_path, monkeypatch, "owner", sandbox=sandbox, untrusted="web_fetch")
    assert owner.terminal.backends.place("owner", owner.untrusted).ask is not sandbox
    with pytest.raises(FileRefused, match=f"only files under {own(owner).resolve()}"):
        await read({"path": str(outside / "notes.txt")}, owner)
    await write({"path": "ok.txt", "content": "fine\n"}, owner)
    assert (own(owner) / "ok.txt").read_text() == "fine\n"


def test_a_view_holds_its_roots_less_what_is_hidden_but_unhidden_again(tmp_path):
    home = tmp_path / "home"
    view = FileView(None, (home,), tmp_path, (home / "workspace",))
    assert view.holds(tmp_path / "x") and view.holds(home / "workspace" / "s1" / "f")
    assert not view.holds(home / ".env") and not view.holds(home)
    assert view.reaches_into(home) and not view.reaches_into(home / "cache")
    confined = FileView((tmp_path / "own",), (), tmp_path / "own")
    assert confined.holds(tmp_path / "own" / "a") and not confined.holds(tmp_path / "owner")
    assert confined.reaches_into(tmp_path) and not confined.reaches_into(tmp_path / "other")


# --- with the real sandbox: what a user's files are is what their commands see ----------


async def test_a_users_files_are_what_their_sandboxed_commands_see(
    tmp_path, monkeypatch, require_system
):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    backends = backends_for(TerminalConfig(), tmp_path / "home")
    assert backends.sandbox is not None, backends.sandbox_problem
    user = context(tmp_path, monkeypatch, backends=backends)
    placement = backends.place("user")
    made = await user.terminal.run("mkdir -p sub && cd sub && echo made > made.txt",
                                   placement=placement, timeout=30)  # fmt: skip
    assert made.exit_code == 0, made.output
    assert await read({"path": "made.txt"}, user) == "    1\tmade"  # where its shell is
    await write({"path": "from-tool.txt", "content": "written\n"}, user)
    seen = await user.terminal.run("cat from-tool.txt", placement=placement, timeout=30)
    assert seen.output.strip() == "written"
    left = await user.terminal.run("cd /tmp", placement=placement, timeout=30)
    assert left.exit_code == 0
    # the sandbox's /tmp is its own: the files fall back to the session's directory
    assert view_for(user).base == own(user).resolve()
