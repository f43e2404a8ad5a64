"""What a run needs from the place its log is kept, as an interface: a run directory
(:class:`~judge.pipeline.RunDirectory`) is one such place, the service's database another.

The run itself (:mod:`._evaluate`) only opens the log under a manifest, appends each finished
call, writes its results and closes it; where and how those land is the store's business.
Analyses read a finished run back through the same store (:meth:`RunStore.read_run`), so a run
kept in a database needs no folder to be read.

The rule for reopening a log is the same for every store (:func:`same_run`): a log holding the
same run (kind, inputs, options, templates) continues; one holding another run is refused
unless the run starts afresh on purpose (``force``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._errors import RunConflict

_COMPARED = ("kind", "inputs", "config", "templates")
"""The manifest's sections that must match for a log to hold the same run."""


@dataclass
class Run:
    """One finished judge run, as written by ``evaluate`` or ``batch collect``: its summary
    and one row per judged turn. ``path`` names where it is kept (its run directory, or a
    service job's id)."""

    path: Path
    summary: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def label(self) -> str:
        """A short name: method, prompt variant when not zero-shot, semantics when paper."""
        s = self.summary
        name = s.get("method", "?")
        if s.get("prompt_variant", "zero-shot") != "zero-shot":
            name += f" ({s['prompt_variant']})"
        if s.get("semantics") == "paper":
            name += " [paper]"
        return name

    @property
    def turn_keys(self) -> list[tuple[str, int]]:
        return [(r["dialogue_id"], r["turn_index"]) for r in self.rows]


@runtime_checkable
class RunStore(Protocol):
    """Where one run's log, manifest and results are kept.

    The writing side is called by the run in this order: :meth:`start` once, :meth:`append`
    for every finished call, :meth:`write_results` at the end, :meth:`close` always. The
    reading side (:meth:`read_manifest`, :meth:`read_log`, :meth:`read_run`) may be used on
    its own, by whoever reads a run back.
    """

    run_id: str | None
    """The run's id, kept across resumes (set by :meth:`start`)."""
    dropped: int
    """Logged calls that ended in an error and were dropped by ``retry_failed``."""

    @property
    def name(self) -> str:
        """Where the run is kept, for messages."""
        ...

    def start(self, manifest: dict[str, Any], *, resume: bool, force: bool = False,
              retry_failed: bool = False) -> list[dict[str, Any]]:
        """Open the log under ``manifest`` (the same run continues; another run is refused
        with :class:`RunConflict` unless ``force``) and return the calls logged so far."""
        ...

    def append(self, result: Any) -> None:
        """Log one finished call (a :class:`CallResult`); it must survive a kill of the
        process once this returns, or be answered from the ledger on resume."""
        ...

    def write_results(self, rows: Sequence[dict[str, Any]], summary: dict[str, Any]) -> None:
        """Keep the run's results: one row per turn, and its summary."""
        ...

    def close(self) -> None:
        """End the run's hold on the store (locks, open files)."""
        ...

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest the log was started under, or None."""
        ...

    def read_log(self) -> list[dict[str, Any]]:
        """The logged calls, as :meth:`append` recorded them."""
        ...

    def read_run(self) -> Run:
        """The finished run's summary and rows; :class:`InputError` when there are none."""
        ...


def identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """What must match for a log to hold the same run (old manifests: evaluate runs)."""
    return {"kind": manifest.get("kind", "evaluate"),
            **{key: manifest.get(key) for key in _COMPARED if key != "kind"}}


def differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The sections and keys in which two manifests differ (the first six), for a refusal."""
    old, new = identity(old), identity(new)
    if old["kind"] != new["kind"]:
        return f"kind ({old['kind']} run, this is a {new['kind']} run)"
    out = []
    for section in _COMPARED[1:]:
        a, b = old.get(section) or {}, new.get(section) or {}
        if not isinstance(a, dict) or not isinstance(b, dict):
            out.append(section)
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{section}.{key}")
    return ", ".join(out[:6])


def same_run(previous: dict[str, Any] | None, manifest: dict[str, Any], *, force: bool,
             holder: str, advice: str) -> bool:
    """Whether a log holding ``previous`` continues as the run of ``manifest``: True when it
    does, False when the run starts afresh (there is no previous run, or ``force`` replaces
    another). Another run without ``force`` is a :class:`RunConflict` naming what differs,
    ``holder`` and what to do (``advice``)."""
    if previous is None:
        return False
    if identity(previous) == identity(manifest):
        return True
    if not force:
        raise RunConflict(f"{holder} holds another run (these differ from this one: "
                          f"{differences(previous, manifest)}); nothing was changed. {advice}")
    return False
