"""Find data folders shipped with the package (``prompts/``, ``rules/``, ``formats/``).

A wheel maps the top-level ``prompts/`` and ``rules/`` into ``judge/``; an editable install
does not, so the repository folder next to the package is the fallback.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def package_dir(name: str) -> Path:
    """Directory ``name`` inside the installed package, or beside it in a source checkout."""
    inside = Path(str(resources.files("judge"))) / name
    if inside.is_dir():
        return inside
    beside = Path(__file__).resolve().parents[1] / name
    if beside.is_dir():
        return beside
    raise FileNotFoundError(f"dst-judge data folder {name!r} is missing from the installation")
