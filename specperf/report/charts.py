"""Geometry of the page's inline SVG charts; the template draws them (_charts.html.j2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .analyses import study_panel, study_series_name
from .format import distinct, fmt_num
from .view import ScenarioView

# Colours of the methods' lines and bars, assigned in sorted order of method label.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
DASH = {"current": "", "baseline": "6 4", "study": "2 3"}


def method_colors(views: list[ScenarioView]) -> dict[str, str]:
    labels = sorted({v.method for v in views if v.is_sd})
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering lo..hi."""
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    raw = span / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(lo / step + 1e-9) * step
    stop = math.ceil(hi / step - 1e-9) * step
    count = int(round((stop - start) / step))
    return [round(start + i * step, 10) for i in range(max(count, 1) + 1)]


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    style: str                                  # current, baseline or study (see DASH)
    points: list[tuple[float, float, str]]     # (x, y, tooltip)


def line_chart(series: list[Series], *, width: int = 460, height: int = 250, reference: float | None = 1.0,
               x_title: str = "batch size", y_title: str = "speedup (x)") -> dict:
    """Geometry of a line chart with a log2 x axis (batch sizes) and a linear y axis."""
    left, right, top, bottom = 50, 14, 12, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = sorted({p[0] for s in series for p in s.points})
    ys = [p[1] for s in series for p in s.points] + ([reference] if reference is not None else [])
    lo, hi = min(ys), max(ys)
    pad = (hi - lo) * 0.08 or 0.1
    ticks = nice_ticks(lo - pad, hi + pad)
    y_lo, y_hi = ticks[0], ticks[-1]
    inset = 14                      # keeps the first and last points off the axes

    def px(x: float) -> float:
        if len(xs) == 1:
            return left + plot_w / 2
        span = math.log2(xs[-1]) - math.log2(xs[0])
        return left + inset + (math.log2(x) - math.log2(xs[0])) / span * (plot_w - 2 * inset)

    def py(y: float) -> float:
        return top + (y_hi - y) / (y_hi - y_lo) * plot_h

    lines = []
    for s in series:
        points = sorted(s.points)
        lines.append({
            "label": s.label, "color": s.color, "style": s.style, "dash": DASH[s.style],
            "path": " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in points),
            "markers": [{"cx": f"{px(x):.1f}", "cy": f"{py(y):.1f}", "tip": tip} for x, y, tip in points],
        })
    return {
        "width": width, "height": height, "left": left, "right": width - right, "top": top,
        "bottom": top + plot_h, "x_title": x_title, "y_title": y_title,
        "x_ticks": [{"x": f"{px(x):.1f}", "label": fmt_num(x)} for x in xs],
        "y_ticks": [{"y": f"{py(y):.1f}", "label": f"{y:g}"} for y in ticks],
        "reference": f"{py(reference):.1f}" if reference is not None else None,
        "lines": lines,
    }


def bar_chart(rates: list[float], color: str, bar: int = 16, gap: int = 5, height: int = 64) -> dict:
    """Geometry of a small bar chart of per-position acceptance rates (0..1)."""
    plot_h = height - 26
    bars = []
    for i, rate in enumerate(rates):
        h = min(max(rate, 0.0), 1.0) * plot_h
        x = gap + i * (bar + gap)
        bars.append({"x": x, "y": f"{12 + plot_h - h:.1f}", "h": f"{h:.1f}", "w": bar,
                     "label": f"{rate * 100:.0f}", "label_x": x + bar / 2, "label_y": f"{10 + plot_h - h:.1f}",
                     "pos": i + 1, "tip": f"position {i + 1}: {rate:.1%} of drafts accepted"})
    return {"width": gap + len(rates) * (bar + gap), "height": height, "base": 12 + plot_h,
            "color": color, "bars": bars}


def _method_series(method: str, members: list[ScenarioView], color: str, panel, batch_sizes) -> list[Series]:
    """This run's speedups of one method, its baseline medians, and the study's curve where it has one."""
    members = sorted(members, key=lambda v: v.batch_size)
    series = [Series(method, color, "current",
                     [(v.batch_size, v.value("speedup"), f"{method} bs{v.batch_size}: {v.value('speedup'):.3f}x "
                       f"({v.status})") for v in members])]
    baseline = [(v.batch_size, median, f"{method} bs{v.batch_size} baseline: {median:.3f}x") for v in members
                if v.result.baseline and (median := v.result.baseline.metric_medians.get("speedup")) is not None]
    if baseline:
        series.append(Series(f"{method} baseline", color, "baseline", baseline))
    scenario = members[0].result.scenario
    name = study_series_name(scenario.method.name, scenario.method.params) if panel else None
    if name and panel[1].get(name):
        series.append(Series(f"study {name}", color, "study",
                             [(bs, y, f"study {name} bs{bs}: {y:.3f}x") for bs, y in zip(batch_sizes, panel[1][name])]))
    return series


def speedup_charts(views: list[ScenarioView], colors: dict[str, str], reference: dict) -> list[dict]:
    """One chart per (model, dataset): speedup against batch size of every method, with the study's curves."""
    groups: dict[tuple[str, str], dict[str, list[ScenarioView]]] = {}
    for v in views:
        if v.is_sd and v.value("speedup") is not None:
            groups.setdefault((v.model, v.dataset), {}).setdefault(v.method, []).append(v)
    batch_sizes = reference.get("fig1_speedup_vs_batch", {}).get("batch_sizes", [])
    charts = []
    for (model, dataset), by_method in sorted(groups.items()):
        first = next(iter(by_method.values()))[0].result.scenario
        panel = study_panel(model, first.model.path, dataset, reference)
        series = [s for method in sorted(by_method)
                  for s in _method_series(method, by_method[method], colors[method], panel, batch_sizes)]
        charts.append({
            "model": model, "dataset": dataset, "chart": line_chart(series),
            "legend": [{"label": s.label, "color": s.color, "dash": DASH[s.style]} for s in series],
            "study_panel": panel[0] if panel and any(s.style == "study" for s in series) else None,
            "stand_ins": distinct(v.result.workload.stand_in for members in by_method.values() for v in members
                                  if v.result.workload),
        })
    return charts
