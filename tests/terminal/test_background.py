"""Background processes: start, poll, log, wait, kill, write, owner cleanup."""

from __future__ import annotations

import os

import pytest
import trio

from hermes.actors.errors import ActorStopped
from hermes.terminal.background import (
    BackgroundProcesses,
    Kill,
    ListProcs,
    Log,
    OwnerEnded,
    Poll,
    ProcessError,
    Start,
    WriteStdin,
    wait_for,
)
from hermes.terminal.tree import ProcessId, _stat

ENV = dict(os.environ)


@pytest.fixture
async def procs():
    actor = BackgroundProcesses(grace=0.5)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(actor.run)
        yield address
        actor.stop()


def dead(pid: int) -> bool:
    stat = _stat(pid)
    return stat is None or stat[0] in "ZX"


async def test_start_poll_log_wait(procs, tmp_path):
    started = await procs.call(
        Start("for i in 1 2 3; do echo line $i; done; exit 4", tmp_path, ENV, owner="s1")
    )
    assert started["id"].startswith("proc_") and len(started["id"]) == 17
    final = await wait_for(procs, started["id"], timeout=10)
    assert final["status"] == "exited" and final["exit_code"] == 4
    assert "line 3" in final["output_tail"]
    log = await procs.call(Log(started["id"][:9], offset=7, limit=6))  # a 4-char hex prefix
    assert log["text"] == "line 2"
    listed = await procs.call(ListProcs(owner="s1"))
    assert [p["id"] for p in listed] == [started["id"]]


async def test_write_to_stdin_and_kill(procs, tmp_path):
    started = await procs.call(Start("cat; echo never", tmp_path, ENV))
    assert await procs.call(WriteStdin(started["id"], "hello there\n")) == 12
    polled = await procs.call(Poll(started["id"]))
    assert polled["status"] == "running"
    pid = polled["pid"]
    done = await procs.call(Kill(started["id"]))
    with trio.fail_after(5):
        await done.wait()
    after = await procs.call(Poll(started["id"]))
    assert after["status"] == "killed"
    assert dead(pid)


async def test_output_written_while_running_is_readable(procs, tmp_path):
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    started = await procs.call(Start(f"echo first; read x < {fifo}; echo second", tmp_path, ENV))
    # the write to the fifo only returns once the process reads it
    await trio.to_thread.run_sync(fifo.write_text, "go\n")
    final = await wait_for(procs, started["id"], timeout=10)
    assert final["output_tail"] == "first\nsecond\n"


async def test_owner_ending_kills_its_processes_unless_persistent(procs, tmp_path):
    a = await procs.call(Start("sleep 300", tmp_path, ENV, owner="chat"))
    b = await procs.call(Start("sleep 300 & sleep 300", tmp_path, ENV, owner="chat"))
    keep = await procs.call(Start("sleep 300", tmp_path, ENV, owner="chat", persist=True))
    other = await procs.call(Start("sleep 300", tmp_path, ENV, owner="elsewhere"))
    ended = await procs.call(OwnerEnded("chat"))
    with trio.fail_after(5):
        for event in ended:
            await event.wait()
    status = {p["id"]: p["status"] for p in await procs.call(ListProcs())}
    assert status[a["id"]] == status[b["id"]] == "killed"
    assert status[keep["id"]] == status[other["id"]] == "running"
    assert dead(a["pid"]) and dead(b["pid"])


async def test_stopping_the_actor_kills_everything(tmp_path):
    actor = BackgroundProcesses(grace=0.5)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(actor.run)
        started = await address.call(Start("sleep 300", tmp_path, ENV, persist=True))
        leader = ProcessId.of(started["pid"])
        actor.request_drain(trio.current_time() + 1)
    assert not leader.alive()
    with pytest.raises(ActorStopped):
        await address.call(ListProcs())


async def test_bad_requests_are_typed_errors(procs, tmp_path):
    with pytest.raises(ProcessError, match="no background process"):
        await procs.call(Poll("proc_ffffffffffff"))
    with pytest.raises(ProcessError, match="too short"):
        await procs.call(Poll("ab"))
    with pytest.raises(ProcessError, match="blocked"):
        await procs.call(Start("rm -rf /", tmp_path, ENV))
    # background=true is what long-running commands are for
    started = await procs.call(Start("sleep 300 & wait", tmp_path, ENV))
    await procs.call(Kill(started["id"]))
