"""What the operator-surface tests share: the surfaces' address and token on a running
serve's home, and a scrape of /metrics as numbers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families


def ops_url(home: Any) -> str:
    return f"http://127.0.0.1:{int(home.ops_port.read_text())}"


def bearer(home: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {home.serve_token.read_text().strip()}"}


async def scrape(http: httpx.AsyncClient, home: Any) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics by (name, labels); parsing fails on a malformed text."""
    reply = await http.get("/metrics", headers=bearer(home))
    assert reply.status_code == 200, reply.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def sample(metrics: dict, name: str, **labels: str) -> float:
    return metrics.get((name, frozenset(labels.items())), 0.0)


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """The first truthy answer of `check`, asked again as each answer comes back (an HTTP
    surface of another process has no event to wait on); fails after `timeout`."""
    with trio.fail_after(timeout):
        while True:
            result = await check()
            if result:
                return result
            await trio.sleep(0.05)
