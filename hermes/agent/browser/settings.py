"""The browser's section of config.yaml (`browser`).

The docstring under each field of these classes is its line in docs/configuration.md.
"""

from __future__ import annotations

import attrs

from hermes.config import at_least, not_blank, positive


@attrs.frozen
class BrowserConfig:
    """The agent's browser (the browser_* tools): one headless Chromium per session that
    uses it, reaching only what web_fetch may (public addresses, and `web.allow_private`)."""

    idle_seconds: float = attrs.field(default=300.0, validator=positive)
    """A session's browser unused this long is closed (its profile directory removed)."""
    max: int = attrs.field(default=2, validator=at_least(1))
    """Browsers running at once; one more is refused with the reason until one closes."""
    executable: str | None = attrs.field(default=None, validator=not_blank)
    """The Chromium to run; unset: `chromium` (or `chromium-browser`, `google-chrome`) on
    PATH."""
