"""The shapes of the analysis reports that are JSON objects (what ``dst-judge agreement
--json`` and the service's analysis jobs write), as TypedDicts: a caller's ``report["turns"]``
is checked by mypy, while the report stays the plain dict the JSON outputs are dumped from
(nothing here changes a byte of them).

The top level of each report is typed; the blocks inside keep ``dict[str, Any]`` and are
described in the docstrings (their keys vary with the options: which raters, which
statistics, whether labels or a sample were given)."""

from __future__ import annotations

from typing import Any, TypedDict


class _Corrected(TypedDict, total=False):
    corrections: list[dict[str, Any]]
    """When the run's rows were corrected (the service's agreement job with corrections):
    what each corrected version applied (``NotRequired`` is Python 3.11's)."""


class AgreementReport(_Corrected):
    """What :func:`judge.analysis.agreement_report` returns.

    A *figure* is ``{"value": float | None, "ci": [low, high] | None}`` (percentages in
    points, coefficients as fractions)."""

    raters: list[str]
    """The raters compared: ``judge``, ``RULE-<version>`` for each version, ``human``."""
    labels: list[str]
    """The label order of every confusion table: ``incorrect``, ``correct``."""
    coefficients: list[str]
    """The chance-corrected coefficients each pair reports, in display order."""
    dialogues: int
    turns: int
    judged_turns: int
    error_turns: int
    """Turns without a judge verdict (a failed call)."""
    pairs: list[dict[str, Any]]
    """One entry per pair of raters: ``name``, ``a``, ``b``, ``n`` and a figure per statistic
    (``accuracy``, ``kappa``, ``ac1``, ``alpha``, ``pabak``, precision, recall and F1 of the
    incorrect class)."""
    human: dict[str, Any] | None
    """With human labels: what the file holds, how it fits the run, the reviewers'
    agreement (``inter_annotator``) and the undecided turns."""
    reevaluation: list[dict[str, Any]] | None
    """With human labels: the judge's accuracy after human re-evaluation, per RULE version."""
    population: dict[str, Any] | None
    """With a sample and labels: the population estimates (``estimates`` holds the block of
    :class:`SampleEstimates`' ``estimates``)."""
    labels_tie: dict[str, Any] | None
    """Whether the labels are tied to the run's predictions."""
    population_note: str | None
    alt_test: dict[str, Any] | None
    """With two or more reviewers: the alternative-annotator test of the judge."""
    bootstrap: dict[str, Any]
    """How the intervals were resampled (``n_boot``, ``seed``, ``confidence``, ``unit``)."""


class SampleEstimates(TypedDict):
    """What :func:`judge.analysis.sample_estimates` returns: a run's metrics (or the
    difference of two runs) estimated from a sample file and its human labels."""

    design: dict[str, Any]
    """The sample's design in a few fields (:meth:`judge.analysis.Sample.describe`)."""
    confidence: float
    tuning: str | float
    difference: str | None
    """``"run 1 - run 2"`` for a difference of two runs, else ``None``."""
    estimates: dict[str, dict[str, Any]]
    """Per metric (``tsa``; ``jga`` and ``success`` for a whole-dialogue sample), three
    figures: ``judge`` (the judge's own, no interval), ``labels`` (labels alone) and ``ppi``
    (prediction-powered), each ``{"value", "ci", "n_labelled", "n_turns", ...}`` in points."""
    left_out: dict[str, Any]
    """Labels of turns the sample does not list: ``count``, ``reason``, ``examples``."""
    unlabelled_sampled_turns: dict[str, Any]
    undecided_sampled_turns: dict[str, Any]
    assumptions: str
