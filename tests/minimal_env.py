"""A minimal environment simulated in the all-extras one: the modules that a user who installed
only some extras (``pip install -e '.[docs]'``) would lack, so a subprocess can be run as if
they were not installed.

The modules are computed, not listed by hand: every distribution the project's extras bring
(with what they require in turn, read from the installed metadata) minus those the core and
the chosen extras bring, mapped to the top-level modules they install. A subprocess whose
environment names them in :data:`VARIABLE` (and whose ``PYTHONPATH`` comes from
``subprocess_pythonpath``) cannot import them: ``tests/netguard/sitecustomize.py`` puts a
finder first on ``sys.meta_path`` that raises ``ModuleNotFoundError``, as a missing package
does."""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
VARIABLE = "DST_JUDGE_TEST_UNIMPORTABLE"
"""Comma-separated top-level module names a test subprocess must not import."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def project_requirements() -> dict[str, list[str]]:
    """The project's requirements: ``""`` for the core, then one entry per extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {"": project["dependencies"], **project["optional-dependencies"]}


def _closure(requirements: Iterable[str], extras: Iterable[str] = ("",)) -> set[str]:
    """Every installed distribution ``requirements`` bring, transitively (markers evaluated for
    this interpreter; a requirement on the project itself brings the extras it names)."""
    seen: set[str] = set()
    todo = [(Requirement(r), extra) for r in requirements for extra in extras]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = _normal(requirement.name)
        if name == "dst-judge":
            for wanted in requirement.extras:
                todo += [(Requirement(r), "") for r in project_requirements()[wanted]]
            continue
        try:
            found = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here (an optional platform marker, say): nothing to block
        first = name not in seen
        seen.add(name)
        wanted = ("", *requirement.extras)
        if first or requirement.extras:
            todo += [(Requirement(r), w) for r in (found.requires or []) for w in wanted]
    return seen


@functools.cache
def _modules_of() -> dict[str, set[str]]:
    """Distribution name → the top-level modules it installs."""
    found: dict[str, set[str]] = {}
    for module, distributions in metadata.packages_distributions().items():
        for distribution in distributions:
            found.setdefault(_normal(distribution), set()).add(module)
    return found


def importable(*extras: str) -> set[str]:
    """The top-level modules of the distributions the core and ``extras`` bring."""
    kept = _closure([r for extra in ("", *extras) for r in project_requirements()[extra]])
    return {m for name in kept for m in _modules_of().get(name, ())}


def unimportable(*extras: str) -> list[str]:
    """The top-level modules missing where only the core and ``extras`` are installed."""
    every = _closure([r for needs in project_requirements().values() for r in needs])
    blocked = {m for name in every for m in _modules_of().get(name, ())}
    return sorted(blocked - importable(*extras) - {"judge", "tests"})


def environment(*extras: str) -> dict[str, str]:
    """The variable to add to a subprocess's environment for that minimal installation."""
    return {VARIABLE: ",".join(unimportable(*extras))}
