"""Runs side by side: systems scored by the same judge, or judge methods on the same turns.

The headline figures are the runs' summaries (what ``dst-judge compare`` / ``systems`` report:
judge TSA and JGA, RULE TSA and agreement per annotation version, errors, cost); the
breakdowns come from each run's turn index:

* per domain — the share of turns touching the domain that the judge accepts, and that RULE
  accepts under each version;
* per slot — how often the judge flags the slot (incorrect or missed) among turns touching it,
  and how often the prediction differs from each version's gold turn value.

Bars link to the run's turns behind them (filtered by that domain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from ..data import dialogue_key
from ..service import JobStatus, ServiceDep, job_subject
from ._charts import grouped_bars
from ._common import WebRoute, _url, render
from ._index import RunIndex
from ._labelfile import human_labels, label_records
from ._runs import job_label
from ._session import CurrentViewer
from ._state import WebDep

router = APIRouter(route_class=WebRoute)
MAX_RUNS = 8


def _ratio(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


def headline(job: Mapping[str, Any], summary: dict[str, Any], label: str) -> dict[str, Any]:
    rule = summary.get("rule") or {}
    options = summary.get("options") or job.get("options") or {}
    return {"id": job["id"], "label": label, "method": summary.get("method"),
            "model": options.get("model"), "turns": summary.get("turns"),
            "tsa": summary.get("tsa"), "judge_jga": summary.get("judge_jga"),
            "rule_tsa": {v: f.get("tsa") for v, f in rule.items()},
            "agreement": {v: f.get("agreement") for v, f in rule.items()},
            "errors": summary.get("error_turns"), "cost": summary.get("cost_usd"),
            "rule_match": summary.get("rule_match")}


def human_agreement(index: RunIndex, labels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The judge's agreement with the majority human label of each labelled turn (the
    reviewers' labels of this run's predictions); None without labels."""
    human = human_labels(label_records(labels))
    if human is None:
        return None
    majority = human.per_turn()
    pairs = [(e.verdict, majority[key]) for e in index.entries if e.verdict is not None
             and (key := (dialogue_key(e.dialogue_id), e.turn_index)) in majority]
    if not pairs:
        return None
    return {"agreement": 100.0 * sum(int(v) == h for v, h in pairs) / len(pairs),
            "turns": len(pairs)}


def build(runs: list[dict[str, Any]], indexes: list[RunIndex]) -> dict[str, Any]:
    """Tables and charts of the chosen runs."""
    versions = list(dict.fromkeys(v for r in runs for v in r["rule_tsa"]))
    names = [r["label"] for r in runs]
    charts = []
    series = ["judge TSA", *(f"RULE-{v} TSA" for v in versions)]
    charts.append(grouped_bars(
        "Turn-level accuracy: the judge and exact match", names, series,
        [[r["tsa"], *(r["rule_tsa"].get(v) for v in versions)] for r in runs],
        description="Share of turns scored correct (%), per run: by the judge, and by exact "
        "match (RULE) against each annotation version."))
    charts.append(grouped_bars(
        "Agreement of the judge with RULE", names, [f"RULE-{v}" for v in versions],
        [[r["agreement"].get(v) for v in versions] for r in runs],
        description="Share of turns (%) on which the judge's verdict equals the exact-match "
        "verdict of each annotation version."))
    domains = sorted({d for index in indexes for d in index.domains})
    measures = [("judge", "the judge accepts")] + [(v, f"RULE-{v} accepts") for v in versions]
    domain_charts = []
    for key, what in measures:
        values: list[list[float | None]] = []
        links: list[list[str | None]] = []
        for domain in domains:
            row: list[float | None] = []
            link: list[str | None] = []
            for run, index in zip(runs, indexes, strict=True):
                figures = index.domains.get(domain)
                if figures is None:
                    row.append(None)
                    link.append(None)
                    continue
                if key == "judge":
                    row.append(_ratio(figures.judge_ok, figures.judged))
                    link.append(_url(f"/runs/{run['id']}", domain=domain, verdict="incorrect"))
                else:
                    row.append(_ratio(figures.rule_ok.get(key, 0),
                                      figures.rule_turns.get(key, 0)))
                    link.append(_url(f"/runs/{run['id']}", domain=domain,
                                     disagree="any", version=key))
            values.append(row)
            links.append(link)
        domain_charts.append({"key": key, "chart": grouped_bars(
            f"Per domain: share of turns {what}", domains, names, values, links=links,
            description=f"For each domain, the share of turns touching it (%) that {what}; "
            "one bar per run. A bar opens the run's turns of that domain.")})
    slots = sorted({s for index in indexes for s in index.slots})
    slot_rows = []
    for slot in slots:
        cells: list[dict[str, Any] | None] = []
        for index in indexes:
            found = index.slots.get(slot)
            if found is None:
                cells.append(None)
                continue
            cells.append({"involved": found.involved,
                          "flagged": _ratio(found.flagged, found.involved),
                          "mismatch": {v: _ratio(found.mismatch.get(v, 0), found.involved)
                                       for v in versions}})
        slot_rows.append({"slot": slot, "cells": cells})
    same_turns = len({len(index.entries) for index in indexes}) <= 1 and len(
        {frozenset(index.positions) for index in indexes}) <= 1
    return {"versions": versions, "charts": charts, "domain_charts": domain_charts,
            "slot_rows": slot_rows, "same_turns": same_turns}


@router.get("/compare")
def compare_page(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                 run: Annotated[list[str] | None, Query()] = None) -> Response:
    available = [j for j in service.jobs.list(viewer.project_id, status=JobStatus.SUCCEEDED,
                                              limit=200)
                 if j["kind"] in ("evaluate", "retry-errors")]
    labels = {j["id"]: job_label(web, viewer, j) for j in available}
    chosen = [r for r in dict.fromkeys(run or []) if r in labels][:MAX_RUNS]
    if not run:
        chosen = [j["id"] for j in available[:4]]
    rows = [service.jobs.row(viewer.project_id, job_id) for job_id in chosen]
    indexes = web.index.ready_all(rows)
    runs = []
    for job_id, row, index in zip(chosen, rows, indexes, strict=True):
        job = next(j for j in available if j["id"] == job_id)
        figures = headline(job, row.summary or {}, labels[job_id])
        figures["human"] = human_agreement(
            index, service.labels.list(viewer.project_id, subject=job_subject(row)))
        runs.append(figures)
    tables = build(runs, indexes) if runs else None
    return render(request, "compare.html", available=available, labels=labels, chosen=chosen,
                  runs=runs, figures=tables, max_runs=MAX_RUNS)
