"""Builds a hostile process tree for the kill tests.

    python -m tests.terminal.tree_maker DIR
level 0: this process (the command's leader) starts level 1 and waits;
level 1: starts level 2 and sleeps;
level 2: ignores SIGTERM, double-forks level 3 into its own session, sleeps;
level 3: a daemon in its own session (setsid), parent gone, sleeps.
Each level prints "ready <level> <pid>"; level 3 prints "ready 3 <pid>" once
it is detached.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def wait_forever() -> None:
    while True:
        signal.pause()  # until a signal that is not ignored ends the process


def level(n: int) -> None:
    print(f"ready {n} {os.getpid()}", flush=True)


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "0"
    if which == "0":
        level(0)
        subprocess.Popen([sys.executable, "-m", "tests.terminal.tree_maker", "1"]).wait()
    elif which == "1":
        level(1)
        subprocess.Popen([sys.executable, "-m", "tests.terminal.tree_maker", "2"])
        wait_forever()
    elif which == "2":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        level(2)
        if os.fork() == 0:  # first fork
            os.setsid()
            if os.fork() == 0:  # second fork: the daemon
                level(3)
                wait_forever()
            os._exit(0)
        wait_forever()


if __name__ == "__main__":
    main()
