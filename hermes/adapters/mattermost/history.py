"""A channel's posts since a time, as the catch-up reads them.

`GET /channels/{id}/posts?since=` answers the posts created or modified after a time,
but the server caps it (`LIMIT 1000`, in no order): an answer that full may leave out
any of them. Then the channel is read by pages instead, newest first (`page`,
`per_page`), until a post older than the time is reached.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

SINCE_CAP = 1000  # the server's cap of one `posts?since=` answer
PER_PAGE = 200  # the server's largest page
MAX_PAGES = 100  # 20,000 posts: past that, the oldest are left, and said so

Get = Callable[..., Awaitable[Any]]  # a GET of the API (path, params): its JSON body


async def posts_since(
    get: Get, channel: str, since: int, cap: int = SINCE_CAP
) -> list[dict[str, Any]]:
    """The posts of `channel` created at `since` or later, in no order."""
    path = f"channels/{channel}/posts"
    found = _posts(await get(path, since=since))
    if len(found) < cap:
        return [p for p in found if _created(p) >= since]
    kept: dict[str, dict[str, Any]] = {}
    for page in range(MAX_PAGES):
        body = await get(path, page=page, per_page=PER_PAGE)
        batch = _posts(body)
        kept.update((str(p.get("id")), p) for p in batch if _created(p) >= since)
        if len(batch) < PER_PAGE or any(_created(p) < since for p in batch):
            return list(kept.values())
    log.warning("%s: more than %d posts to catch up; the oldest are left", channel, len(kept))
    return list(kept.values())


def _posts(body: Any) -> list[dict[str, Any]]:
    found = body.get("posts") if isinstance(body, dict) else None
    posts = found.values() if isinstance(found, dict) else ()
    return [p for p in posts if isinstance(p, dict) and isinstance(p.get("create_at"), int)]


def _created(post: dict[str, Any]) -> int:
    return int(post["create_at"])
