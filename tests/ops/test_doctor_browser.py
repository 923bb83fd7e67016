"""`hermes doctor`'s browser line: Chromium opens a blank page, or the line says what is
missing and the install command."""

from __future__ import annotations

from hermes.agent.browser.settings import BrowserConfig
from hermes.gateway.settings import Config
from hermes.ops.doctor import check_browser


async def test_chromium_opens_a_blank_page(require_system):
    require_system("/usr/bin/chromium", packages=("chromium",))
    result = await check_browser(Config())
    assert result.ok and result.detail.endswith("opens a page (tried: about:blank)")


async def test_a_missing_chromium_is_named_with_its_install_line():
    result = await check_browser(Config(browser=BrowserConfig(executable="no-such-chromium")))
    assert not result.ok
    assert result.detail.startswith("no-such-chromium is not installed")
    assert result.fix == "apt-get install chromium"
