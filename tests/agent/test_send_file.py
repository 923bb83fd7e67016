"""Where send_file may send from: a user only from their session's own directory, an
owner also from the media cache and tools' output, nobody from the rest of HERMES_HOME
(its secrets), and no link leads out."""

from __future__ import annotations

import pytest

from hermes.agent.permissions import Caller
from hermes.agent.tools.base import SessionFiles, ToolContext, ToolError
from hermes.agent.tools.send_file import SendFileTool, permitted
from hermes.delivery.files import stage


def context(tmp_path, role: str, own: bool = True, workspace=None) -> ToolContext:
    home = tmp_path / "home"
    workspace = workspace or home / "workspace" / "s1"
    for directory in (workspace, home / "cache" / "telegram", home / ".terminal" / "output"):
        directory.mkdir(parents=True, exist_ok=True)
    (workspace / "chart.txt").write_text("the chart")
    (home / "cache" / "telegram" / "photo.jpg").write_bytes(b"jpg")
    (home / ".env").write_text("TOKEN=secret")
    files = SessionFiles(home, workspace, own, home / "cache", home / ".terminal" / "output",
                         home / "outgoing")  # fmt: skip
    return ToolContext("s1", None, None, None, Caller("telegram", "1", role), files=files)


def allowed(ctx: ToolContext, path: str):
    return SendFileTool()._allowed(path, ctx)


def test_a_user_sends_from_their_sessions_directory_only(tmp_path):
    ctx = context(tmp_path, "user")
    assert allowed(ctx, "chart.txt").read_text() == "the chart"
    for path in ("../../cache/telegram/photo.jpg", "../../.env", "/etc/hostname"):
        with pytest.raises(ToolError, match="not a file you may send"):
            allowed(ctx, path)


def test_an_owner_sends_from_the_cache_too_but_never_hermes_homes_secrets(tmp_path):
    ctx = context(tmp_path, "owner")
    assert allowed(ctx, "../../cache/telegram/photo.jpg").read_bytes() == b"jpg"
    with pytest.raises(ToolError, match="not a file you may send"):
        allowed(ctx, "../../.env")


def test_a_link_out_of_the_directory_is_followed_and_refused(tmp_path):
    ctx = context(tmp_path, "user")
    (ctx.files.workspace / "innocent.txt").symlink_to(ctx.files.home / ".env")
    with pytest.raises(ToolError, match="not a file you may send"):
        allowed(ctx, "innocent.txt")


def test_a_shared_workdir_is_no_users_to_send_from(tmp_path):
    shared = tmp_path / "projects"
    ctx = context(tmp_path, "user", own=False, workspace=shared)
    with pytest.raises(ToolError, match="this session's own directory"):
        allowed(ctx, "chart.txt")
    owner = context(tmp_path, "owner", own=False, workspace=shared)
    assert allowed(owner, "chart.txt").name == "chart.txt"
    home_as_workdir = context(tmp_path, "owner", own=False, workspace=tmp_path / "home")
    with pytest.raises(ToolError, match="not a file you may send"):
        allowed(home_as_workdir, ".env")  # HERMES_HOME's secrets even as the workdir


def test_a_link_swapped_in_after_the_check_leads_nowhere(tmp_path):
    """The check and the copy are two steps: a user's background loop may swap the file
    for a link to .env between them. The copy checks the file it opened."""
    ctx = context(tmp_path, "user")
    checked = allowed(ctx, "chart.txt")  # the check passes: a plain file
    checked.unlink()
    checked.symlink_to(ctx.files.home / ".env")  # swapped before the copy
    with pytest.raises(PermissionError, match="not a file you may send"):
        stage(ctx.files.outgoing, checked, allowed=lambda real: permitted(real, ctx))
    assert not list(ctx.files.outgoing.glob("*"))  # nothing of .env was copied
