"""Real processes: a writer killed mid-load loses nothing it acknowledged; two
processes writing one file at once lose nothing and never see 'database is locked'."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.state.helpers import count, integrity, plain


def spawn(db, tag, producers, writes) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.state.load_writer",
            str(db),
            tag,
            str(producers),
            str(writes),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_under_load_keeps_every_acknowledged_row(db_path):
    proc = spawn(db_path, "k", 50, 100_000)
    acked = []
    try:
        for line in proc.stdout:
            if line.startswith("ack "):
                acked.append(line.split()[1])
            if len(acked) >= 3000:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert len(acked) >= 3000
    assert integrity(db_path) == "ok"
    conn = plain(db_path)
    try:
        stored = {row[0] for row in conn.execute("SELECT content FROM messages")}
    finally:
        conn.close()
    missing = [key for key in acked if key not in stored]
    assert missing == []


def test_two_processes_write_one_file_without_loss(db_path):
    procs = [spawn(db_path, tag, 20, 100) for tag in ("a", "b")]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err.lower()
        assert out.count("ack ") == 2000
        assert out.rstrip().endswith("done")
    assert count(db_path, "SELECT count(*) FROM messages") == 4000
    assert count(db_path, "SELECT count(DISTINCT content) FROM messages") == 4000
    assert integrity(db_path) == "ok"
