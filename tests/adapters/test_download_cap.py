"""A file an adapter fetches is held to `media.max_file` by what it streams, not only by the
size a platform states: a file host that states a small size (here a gzip-encoded body of
a few dozen bytes) and streams 5,000 bytes in one piece is refused under a 100-byte cap,
and nothing of it is left in the cache, neither the file nor a part of it. Through
`fetch_urls` (Discord's and Slack's attachments) against a real local HTTP server."""

from __future__ import annotations

import gzip

import pytest

from hermes.adapters.media import MediaLimits
from hermes.adapters.url_media import UrlRef, fetch_urls
from tests.fakes.pages import FakePages

SIZE = 5000  # bytes the host streams once the body is decoded: one piece (media.PIECE)


async def fetched_under(cap: int, directory, site: FakePages):
    url = site.page("/files/report.bin", gzip.compress(bytes(SIZE)), "application/octet-stream",
                    headers={"content-encoding": "gzip"})  # fmt: skip
    ref = UrlRef(url, "report.bin", None, None).to_text()  # the platform stated no size
    return await fetch_urls((ref,), directory, MediaLimits(max_file=cap), (site.url,))


@pytest.mark.timeout(30)
async def test_one_piece_past_the_cap_is_refused_and_nothing_is_left(tmp_path):
    cache = tmp_path / "cache" / "discord"
    with FakePages() as site:
        refused = await fetched_under(100, cache, site)
        assert site.requests == ["/files/report.bin"]  # it was fetched, and then refused
    assert refused.files == ()
    [problem] = refused.problems
    assert "report.bin is over the 100 byte limit" in problem
    assert list(cache.iterdir()) == []  # no file, no partial file


@pytest.mark.timeout(30)
async def test_the_same_file_under_a_cap_it_fits_is_saved_whole(tmp_path):
    cache = tmp_path / "cache" / "discord"
    with FakePages() as site:
        taken = await fetched_under(SIZE, cache, site)
    [saved] = taken.files
    assert taken.problems == () and saved.size == SIZE
    assert [p.name for p in cache.iterdir()] == [saved.name]
