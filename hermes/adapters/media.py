"""Media a chat sends (photos, documents, voice notes), saved under HERMES_HOME/cache
for the agent to open by path, by every adapter that fetches media: one file at most
MAX_FILE bytes (Telegram's Bot API's own download limit), a platform's cache at most
CACHE_CAP, oldest evicted first."""

from __future__ import annotations

import os
from pathlib import Path

MAX_FILE = 20 * 1024 * 1024
CACHE_CAP = 500 * 1024 * 1024


def save(directory: Path, name: str, data: bytes, cap: int = CACHE_CAP) -> Path:
    """Write `data` as `directory/name` (0600), then evict the oldest files past `cap`."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / Path(name).name  # a name, never a path out of the cache
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    evict(directory, cap, keep=path)
    return path


def evict(directory: Path, cap: int, keep: Path | None = None) -> list[Path]:
    """Remove the least recently written files until the directory fits in `cap`."""
    files = sorted((p for p in directory.iterdir() if p.is_file()),
                   key=lambda p: p.stat().st_mtime)  # fmt: skip
    total = sum(p.stat().st_size for p in files)
    removed = []
    for path in files:
        if total <= cap:
            break
        if path == keep:
            continue
        total -= path.stat().st_size
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
