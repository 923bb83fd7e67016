"""Telling a cancellation from a failure, where both arrive as an exception."""

from __future__ import annotations

import trio


def is_cancel(exc: BaseException) -> bool:
    """Whether `exc` is a cancellation: trio.Cancelled, or a group of nothing else (what
    a nursery raises when the scope around it was cancelled while its tasks ran)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_cancel(e) for e in exc.exceptions)
    return False
