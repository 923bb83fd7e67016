"""Fixtures shared by the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.home import HermesHome


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HermesHome:
    """A fresh HERMES_HOME, also exported for subprocesses."""
    root = tmp_path / "hermes-home"
    monkeypatch.setenv("HERMES_HOME", str(root))
    return HermesHome(root).ensure()
