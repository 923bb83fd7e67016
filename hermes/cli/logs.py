"""Logging for the command: stderr for people, logs/hermes.log for the months after."""

from __future__ import annotations

import logging
import logging.handlers

from hermes.home import HermesHome

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(home: HermesHome | None, verbose: bool = False) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # httpx logs every request's URL, and some platforms put the bot token in the path.
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    stderr = logging.StreamHandler()
    stderr.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(stderr)
    if home is not None:
        file = logging.handlers.RotatingFileHandler(
            home.logs / "hermes.log", maxBytes=10 * 1024 * 1024, backupCount=3
        )
        file.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(file)
