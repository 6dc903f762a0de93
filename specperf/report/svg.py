"""Geometry of inline SVG charts (line, bar); the templates draw them (_charts.html.j2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .format import fmt_num

DASH = {"current": "", "baseline": "6 4", "study": "2 3", "bound": "8 3 2 3"}


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
    style: str  # current, baseline, study or bound (see DASH)
    points: list[tuple[float, float, str]]  # (x, y, tooltip)


def legend_entries(series: list[Series]) -> list[dict]:
    """A line chart's legend: label, colour and dash of each series (the `legend` macro draws it)."""
    return [{"label": s.label, "color": s.color, "dash": DASH[s.style]} for s in series]


def line_chart(
    series: list[Series],
    *,
    width: int = 460,
    height: int = 250,
    reference: float | None = 1.0,
    x_title: str = "batch size",
    y_title: str = "speedup (x)",
) -> dict:
    """Geometry of a line chart with a log2 x axis (batch sizes) and a linear y axis."""
    left, right, top, bottom = 50, 14, 12, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = sorted({p[0] for s in series for p in s.points})
    ys = [p[1] for s in series for p in s.points] + ([reference] if reference is not None else [])
    lo, hi = min(ys), max(ys)
    pad = (hi - lo) * 0.08 or 0.1
    ticks = nice_ticks(lo - pad, hi + pad)
    y_lo, y_hi = ticks[0], ticks[-1]
    inset = 14  # keeps the first and last points off the axes

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
        lines.append(
            {
                "label": s.label,
                "color": s.color,
                "style": s.style,
                "dash": DASH[s.style],
                "path": " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in points),
                "markers": [{"cx": f"{px(x):.1f}", "cy": f"{py(y):.1f}", "tip": tip} for x, y, tip in points],
            }
        )
    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": top + plot_h,
        "x_title": x_title,
        "y_title": y_title,
        "x_ticks": [{"x": f"{px(x):.1f}", "label": fmt_num(x)} for x in xs],
        "y_ticks": [{"y": f"{py(y):.1f}", "label": f"{y:g}"} for y in ticks],
        "reference": f"{py(reference):.1f}" if reference is not None else None,
        "lines": lines,
    }


def bar_chart(
    rates: list[float], color: str, bar: int = 16, gap: int = 5, height: int = 64, what: str = "position"
) -> dict:
    """Geometry of a small bar chart of acceptance rates (0..1) by draft position, or `what` else."""
    plot_h = height - 26
    bars = []
    for i, rate in enumerate(rates):
        h = min(max(rate, 0.0), 1.0) * plot_h
        x = gap + i * (bar + gap)
        bars.append(
            {
                "x": x,
                "y": f"{12 + plot_h - h:.1f}",
                "h": f"{h:.1f}",
                "w": bar,
                "label": f"{rate * 100:.0f}",
                "label_x": x + bar / 2,
                "label_y": f"{10 + plot_h - h:.1f}",
                "pos": i + 1,
                "tip": f"{what} {i + 1}: {rate:.1%} of drafts accepted",
            }
        )
    return {
        "width": gap + len(rates) * (bar + gap),
        "height": height,
        "base": 12 + plot_h,
        "color": color,
        "bars": bars,
    }


def sparkline(values: list[float], tips: list[str], marks: list[int], *, width: int = 150, height: int = 34) -> dict:
    """Geometry of a small trend line: values evenly spaced, oldest left, y from their min to max;
    `marks` are indexes drawn as a dashed vertical line (a vLLM version change before that point)."""
    pad = 4
    lo, hi = min(values), max(values)
    span = (hi - lo) or abs(hi) or 1.0

    def px(i: int) -> float:
        return pad + (i / (len(values) - 1) if len(values) > 1 else 0.5) * (width - 2 * pad)

    def py(v: float) -> float:
        return pad + (hi - v) / span * (height - 2 * pad) if hi > lo else height / 2

    return {
        "width": width,
        "height": height,
        "path": " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(values)),
        "points": [
            {"cx": f"{px(i):.1f}", "cy": f"{py(v):.1f}", "tip": tip, "last": i == len(values) - 1}
            for i, (v, tip) in enumerate(zip(values, tips))
        ],
        "marks": [{"x": f"{(px(i - 1) + px(i)) / 2:.1f}", "tip": tips[i]} for i in marks if 0 < i < len(values)],
        "low": fmt_num(lo),
        "high": fmt_num(hi),
    }
