"""A page per leaderboard job: the systems with every figure and its interval (a sortable
table), the intervals of one metric drawn as a forest plot in inline SVG, the pairwise matrix
of that metric (the corrected verdict of every pair) and the breakdowns; a judge run links to
its run page. The metric is a query parameter, so the page is a plain GET that writes nothing.

The figures are the job's result as it stands (:meth:`judge.analysis.Leaderboard.to_json`):
nothing is computed here but positions on the drawing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from .._errors import ServiceError
from ..service import JobStatus, ServiceDep
from ._common import WebRoute, render
from ._session import CurrentViewer

router = APIRouter(route_class=WebRoute)

KIND = "leaderboard"
_NAMES = {"jga": "JGA", "sa": "slot accuracy", "fga": "FGA", "gca": "GCA", "tsa": "judge TSA",
          "judge_jga": "judge JGA"}
PLOT_WIDTH = 420
"""Width of the drawing's axis, in SVG units (the figure scales with the page)."""
PLOT_LEFT = 10
ROW = 26


def metric_label(key: str) -> str:
    """``jga@2.4`` → ``JGA 2.4`` (the names the CLI's tables use)."""
    metric, _, version = key.partition("@")
    return _NAMES.get(metric, metric) + (f" {version}" if version else "")


def _figure(system: dict[str, Any], key: str) -> dict[str, Any] | None:
    found = (system.get("metrics") or {}).get(key)
    return found if isinstance(found, dict) and found.get("value") is not None else None


def _bounds(figures: list[dict[str, Any]]) -> tuple[float, float]:
    points = [v for f in figures for v in (f["value"], *(f.get("ci") or ())) if v is not None]
    low, high = min(points), max(points)
    pad = max((high - low) * 0.05, 0.5)
    return max(0.0, low - pad), min(100.0, high + pad)


def forest(systems: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """Each system's value and interval of ``key`` as positions on one axis."""
    shown = [(s, f) for s in systems if (f := _figure(s, key)) is not None]
    if not shown:
        return None
    low, high = _bounds([f for _, f in shown])
    span = (high - low) or 1.0

    def x(value: float) -> float:
        return round(PLOT_LEFT + (value - low) / span * PLOT_WIDTH, 2)

    rows = []
    for place, (system, figure) in enumerate(shown):
        ci = figure.get("ci") or [None, None]
        rows.append({"name": system["name"], "y": place * ROW + ROW // 2,
                     "x": x(figure["value"]), "value": figure["value"],
                     "low": ci[0], "high": ci[1],
                     "x_low": x(ci[0]) if ci[0] is not None else None,
                     "x_high": x(ci[1]) if ci[1] is not None else None})
    ticks = [{"x": x(v), "label": f"{v:g}"} for v in _ticks(low, high)]
    return {"rows": rows, "ticks": ticks, "width": PLOT_WIDTH + 2 * PLOT_LEFT,
            "height": len(rows) * ROW + 24, "axis_y": len(rows) * ROW + 4,
            "low": low, "high": high}


def _ticks(low: float, high: float) -> list[float]:
    for step in (0.5, 1, 2, 5, 10, 20, 25):
        if (high - low) / step <= 6:
            break
    first = -(-low // step) * step
    out = []
    value = first
    while value <= high + 1e-9:
        out.append(round(value, 2))
        value += step
    return out


def matrix(systems: list[dict[str, Any]], pairs: list[dict[str, Any]], key: str
           ) -> list[dict[str, Any]]:
    """Row i, column j: ``i − j`` on ``key``, its interval and adjusted p, and whether the
    corrected test says i is better (``win``), worse (``loss``) or cannot tell (``tie``)."""
    found = {(p["a"], p["b"]): p for p in pairs if p.get("metric") == key}
    names = [s["name"] for s in systems]
    rows = []
    for mine in names:
        cells: list[dict[str, Any] | None] = []
        for theirs in names:
            pair = found.get((mine, theirs))
            sign = 1.0
            if pair is None:
                pair, sign = found.get((theirs, mine)), -1.0
            if mine == theirs or pair is None or pair.get("difference") is None:
                cells.append(None)
                continue
            ci = [c for c in (pair.get("ci") or []) if c is not None]
            if len(ci) == 2 and sign < 0:
                ci = [-ci[1], -ci[0]]
            verdict = ("tie" if not pair.get("significant") else
                       "win" if sign > 0 else "loss")
            cells.append({"difference": sign * pair["difference"], "ci": ci if len(ci) == 2
                          else None, "p": pair.get("p_adjusted"), "verdict": verdict})
        rows.append({"name": mine, "cells": cells})
    return rows


@router.get("/leaderboards")
def leaderboards_page(request: Request, viewer: CurrentViewer, service: ServiceDep) -> Response:
    boards = service.jobs.list(viewer.project_id, kind=KIND, limit=200)
    return render(request, "leaderboards.html", boards=boards)


@router.get("/leaderboards/{job_id}")
def leaderboard_page(request: Request, viewer: CurrentViewer, service: ServiceDep, job_id: str,
                     metric: Annotated[str, Query(max_length=100)] = "") -> Response:
    row = service.jobs.row(viewer.project_id, job_id)  # another project's job: 404
    if row.kind != KIND:
        raise ServiceError(f"job {job_id!r} is a {row.kind} job, not a leaderboard",
                           status=404)
    job = service.jobs.get(viewer.project_id, job_id)
    board = row.summary if row.status == JobStatus.SUCCEEDED else None
    context: dict[str, Any] = {"job": job, "board": board}
    if isinstance(board, dict) and board.get("systems"):
        method = board.get("method") or {}
        keys = [k for k in (method.get("metrics") or {})]
        chosen = metric if metric in keys else str(method.get("rank_metric") or keys[0])
        systems = board["systems"]
        context.update(
            keys=keys, labels={k: metric_label(k) for k in keys}, chosen=chosen,
            systems=systems, method=method, forest=forest(systems, chosen),
            matrix=matrix(systems, board.get("pairs") or [], chosen),
            breakdowns=[b for b in board.get("breakdowns") or [] if b.get("metric") == chosen],
            figure=_figure)
    return render(request, "leaderboard.html", **context)
