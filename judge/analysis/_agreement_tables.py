"""Table rows of an agreement report for the CLI and the web: headers and ``format_*``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AGREEMENT_HEADER: tuple[str, ...] = (
    "pair (a vs reference)", "n", "accuracy % [CI]", "kappa [CI]", "F1 incorrect % [CI]")
COEFFICIENT_HEADER: tuple[str, ...] = (
    "pair", "n", "Gwet's AC1 [CI]", "Krippendorff's alpha [CI]", "PABAK [CI]")
REEVALUATION_HEADER: tuple[str, ...] = (
    "judge vs", "turns", "agree", "disagree", "no human label",
    "accuracy after re-evaluation % [CI]")
REVIEWER_HEADER: tuple[str, ...] = (
    "reviewers", "turns", "agreement % [CI]", "AC1 [CI]", "alpha [CI]", "PABAK [CI]")
POPULATION_HEADER: tuple[str, ...] = (
    "pair (population estimate)", "n", "accuracy % [CI]", "kappa [CI]", "AC1 [CI]",
    "alpha [CI]", "PABAK [CI]")


def _cell(figure: Mapping[str, Any], digits: int) -> str:
    value, ci = figure["value"], figure["ci"]
    if value is None:
        return "n/a"
    text = f"{value:.{digits}f}"
    if ci is not None:
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return text


def format_agreement(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One table row per rater pair, in the order of ``AGREEMENT_HEADER``."""
    return [(p["name"], str(p["n"]), _cell(p["accuracy"], 1), _cell(p["kappa"], 3),
             _cell(p["f1"], 1)) for p in report["pairs"]]


def format_coefficients(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One table row per rater pair, in the order of ``COEFFICIENT_HEADER``."""
    return [(p["name"], str(p["n"]), _cell(p["ac1"], 3), _cell(p["alpha"], 3),
             _cell(p["pabak"], 3)) for p in report["pairs"]]


def format_reviewers(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The reviewers' group agreement (none with fewer than two reviewers)."""
    block = ((report.get("human") or {}).get("inter_annotator") or {}).get("group")
    if not block:
        return []
    return [(", ".join(block["reviewers"]), str(block["turns"]), _cell(block["agreement"], 1),
             _cell(block["ac1"], 3), _cell(block["alpha"], 3), _cell(block["pabak"], 3))]


def format_reevaluation(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One table row per RULE version for the paper's re-evaluation figure (none without
    human labels), in the order of ``REEVALUATION_HEADER``."""
    return [(e["rule"], str(e["turns"]), str(e["agreeing"]), str(e["disagreeing"]),
             str(e["disagreeing_unlabelled"]), _cell(e["accuracy"], 1))
            for e in report.get("reevaluation") or []]


def format_population(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Population estimates from a stratified sample, in the order of ``POPULATION_HEADER``;
    the first row is the share of correct turns by human judgment."""
    block = report.get("population")
    if not block:
        return []
    rows: list[tuple[str, ...]] = [("human: correct turns %", str(block["labelled_turns"]),
             _cell(block["human_correct"], 1), "", "", "", "")]
    rows += [(p["name"], str(p["n"]), _cell(p["accuracy"], 1), _cell(p["kappa"], 3),
              _cell(p["ac1"], 3), _cell(p["alpha"], 3), _cell(p["pabak"], 3))
             for p in block["pairs"]]
    return rows


def sample_words(block: Mapping[str, Any]) -> str:
    """How a population block's sample was drawn, in words: ``simple random sample``,
    ``stratified sample (judge-rule design)``; a random sample is not stratified."""
    design = (((block.get("estimation") or {}).get("design") or {}).get("design")
              or block.get("design"))
    if design == "random":
        return "simple random sample"
    return f"stratified sample ({design} design)" if design else "sample"


LABELS_ONLY_NOTE = (
    "'human: correct turns %' above is the labels-only TSA of the Estimates table: report "
    "that table's figure and its t interval (the estimate); the bootstrap interval here only "
    "puts it beside the agreement rows.")


ESTIMATE_HEADER: tuple[str, ...] = (
    "metric", "estimate", "value % [CI]", "labelled", "turns", "note")
METRIC_NAMES = {"tsa": "TSA", "jga": "JGA (every turn so far correct)",
                "success": "dialogue success"}


def format_estimates(block: Mapping[str, Any] | None) -> list[tuple[str, ...]]:
    """The judge, labels-only and PPI estimates of each metric (from ``population`` of an
    agreement report, or a ``sample_estimates`` result), in the order of ``ESTIMATE_HEADER``."""
    if not block or not block.get("estimates"):
        return []
    rows: list[tuple[str, ...]] = []
    for metric, figures in block["estimates"].items():
        for name in ("judge", "labels", "ppi"):
            figure = figures[name]
            note = "no interval can cover the judge's bias" if name == "judge" else ""
            if name == "ppi" and figure.get("lambda") is not None:
                note = f"λ = {figure['lambda']:.2f} ({figure.get('tuning')})"
            if name != "judge" and figure.get("note"):
                note = figure["note"]
            rows.append((METRIC_NAMES.get(metric, metric), name, _cell(figure, 1),
                         str(figure["n_labelled"]), str(figure["n_turns"]), note))
    return rows
