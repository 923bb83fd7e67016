"""The layer table is kept by import-linter's contracts in pyproject.toml: the tree as it
is passes, and a copy with one import going up the table fails with the contract named.
The two rules no import graph shows are checked here: no `noqa: F401` re-export, and no
package `__init__` that only re-imports names."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
        "--no-cache", "--no-logo"]  # fmt: skip


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(LINT, cwd=root, capture_output=True, text=True, timeout=60)


def test_the_tree_keeps_every_contract():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_import_up_the_table_breaks_the_layers_contract(tmp_path):
    shutil.copytree(ROOT / "hermes", tmp_path / "hermes",
                    ignore=shutil.ignore_patterns("__pycache__", "static"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    kernel = tmp_path / "hermes" / "actors" / "clock.py"
    kernel.write_text(kernel.read_text() + "\nfrom hermes.gateway import router  # up\n")
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Imports go down the layer table BROKEN" in done.stdout
    assert "hermes.actors.clock -> hermes.gateway.router" in done.stdout


def test_no_reexports():
    for path in (ROOT / "hermes").rglob("*.py"):
        text = path.read_text()
        assert "noqa: F401" not in text, path
        if path.name == "__init__.py":
            body = [n for n in ast.parse(text).body if not isinstance(n, ast.Expr)]
            assert not any(isinstance(n, ast.ImportFrom) for n in body), path
