"""Where serve's busy time goes, by area: a py-spy raw profile grouped the way
bench/profile.md reports it.

Run: python bench/profile_areas.py PROFILE.raw
PROFILE.raw is what `py-spy record --gil -f raw` wrote (one line per stack: frames
separated by `;`, then the sample count). Each sample goes to the area of its
innermost hermes frame (so the library code a hermes function calls counts as that
function's area); a sample with no hermes frame, or only serve's entry point below
Trio, is Trio's own loop. Prints one table row per area, largest first, and the
sample count (with --gil and -r 250, 250 samples are one second of the GIL held).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

AREAS = (
    ("the model client (httpx streaming)", ("hermes/agent/openai_compat.py",)),
    ("state.db: the writer, its thread, reads", ("hermes/state/",)),
    ("the local endpoint (WebSocket, JSON-RPC)", ("hermes/adapters/local/",)),
    ("chat adapters and their HTTP", ("hermes/adapters/",)),
    (
        "router, admission, sessions",
        (
            "hermes/gateway/router.py",
            "hermes/gateway/admission.py",
            "hermes/gateway/session_actor.py",
            "hermes/gateway/journal.py",
            "hermes/gateway/roles.py",
            "hermes/gateway/authorization.py",
        ),
    ),  # fmt: skip
    ("the agent loop, prompt, context, memory", ("hermes/agent/",)),
    ("the actor kernel (mailboxes, calls)", ("hermes/actors/",)),
    ("delivery (replies, outbox)", ("hermes/delivery/",)),
)
LOOP = "Trio's run loop and I/O outside any hermes frame"
ENTRY = ("hermes/gateway/serve.py", "hermes/cli/")


def area_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        if "hermes/" not in frame:
            continue
        if any(entry in frame for entry in ENTRY):
            return LOOP
        for name, prefixes in AREAS:
            if any(prefix in frame for prefix in prefixes):
                return name
        return "other hermes"
    return LOOP


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    args = parser.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    for line in args.profile.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[area_of(stack.split(";"))] += int(n)
    total = sum(counts.values())
    if not total:
        raise SystemExit(f"{args.profile}: no samples")
    print("| area | share |\n|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {100 * n / total:.0f}% |")
    print(f"{total} samples")


if __name__ == "__main__":
    main()
