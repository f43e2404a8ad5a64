"""The package's import order is enforced: stages import downward only, root helpers import no
stage (contracts in ``pyproject.toml`` under ``[tool.importlinter]``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

importlinter = pytest.importorskip("importlinter", reason="import-linter is in the test extra")

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(capsys):
    from importlinter.cli import lint_imports

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = lint_imports(no_cache=True)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert result == 0, out
    assert "0 broken" in out
