"""Bar charts as inline SVG, laid out here and drawn by a template macro.

The layout is plain numbers (so tests can check it) and every label is text the template
escapes; colours come from CSS classes (``series-N``), never inline styles, so the strict
Content-Security-Policy holds. Bars carry a ``<title>`` (a tooltip, read by screen readers)
and may link somewhere (the run's turns behind a figure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERIES = 8


@dataclass
class Bar:
    x: float
    y: float
    w: float
    h: float
    series: int
    title: str
    value: str
    href: str | None = None


@dataclass
class Chart:
    title: str
    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    ticks: list[dict[str, Any]] = field(default_factory=list)
    legend: list[dict[str, Any]] = field(default_factory=list)
    plot: dict[str, float] = field(default_factory=dict)
    description: str = ""


def _short(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def grouped_bars(title: str, groups: list[str], series: list[str],
                 values: list[list[float | None]], *, top: float = 100.0, unit: str = "%",
                 links: list[list[str | None]] | None = None, width: int = 640,
                 height: int = 280, description: str = "") -> Chart:
    """``values[g][s]``: the value of series ``s`` in group ``g`` (None: no bar)."""
    left, right, upper, lower = 44.0, 12.0, 12.0, 46.0
    plot_w, plot_h = width - left - right, height - upper - lower
    chart = Chart(title, width, height, description=description,
                  plot={"x": left, "y": upper, "w": plot_w, "h": plot_h,
                        "bottom": upper + plot_h})
    for step in range(0, 5):
        tick = top * step / 4
        chart.ticks.append({"y": upper + plot_h - plot_h * step / 4,
                            "label": f"{tick:g}{unit if step == 4 else ''}"})
    n_groups, n_series = max(1, len(groups)), max(1, len(series))
    slot = plot_w / n_groups
    bar_w = min(36.0, slot * 0.8 / n_series)
    for g, name in enumerate(groups):
        start = left + g * slot + (slot - bar_w * n_series) / 2
        chart.groups.append({"x": left + g * slot + slot / 2, "y": upper + plot_h + 16,
                             "label": _short(name, max(6, int(slot / 7))), "full": name})
        for s, series_name in enumerate(series):
            value = values[g][s] if g < len(values) and s < len(values[g]) else None
            if value is None:
                continue
            clipped = max(0.0, min(float(value), top))
            h = plot_h * clipped / top if top else 0.0
            chart.bars.append(Bar(
                x=round(start + s * bar_w, 2), y=round(upper + plot_h - h, 2),
                w=round(bar_w - 2, 2), h=round(h, 2), series=s % SERIES,
                title=f"{name} — {series_name}: {float(value):.1f}{unit}",
                value=f"{float(value):.1f}",
                href=links[g][s] if links and g < len(links) and s < len(links[g]) else None))
    chart.legend = [{"series": s % SERIES, "label": name} for s, name in enumerate(series)]
    return chart
