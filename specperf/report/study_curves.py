"""`specperf simulate --html FILE`: the simulated speedup curves as one page, a chart per dataset
(the study's Figs 10 and 12 from its released traces): fixed k and the oracle per proposer, and the
combined oracle, against batch size."""

from __future__ import annotations

from ..analysis.simulate import COMBINED, EAGLE, NGRAM
from .svg import Series, legend_entries, line_chart

COLORS = {EAGLE: "#0969da", NGRAM: "#cf222e", COMBINED: "#8250df"}
STYLE = {"k1": "study", "k3": "baseline", "k5": "current", "oracle": "bound"}  # dotted, dashed, solid, dash-dot


def study_charts(rows: list[dict]) -> list[dict]:
    """rows: {"dataset", "proposer", "mode", "speedup": {batch size: value}} as `specperf simulate` makes them."""
    charts: dict[str, list[Series]] = {}
    for row in rows:
        label = f"{row['proposer']} {row['mode']}"
        points = [(float(b), v, f"{label}, batch {b}: {v:.2f}x") for b, v in sorted(row["speedup"].items())]
        charts.setdefault(row["dataset"], []).append(
            Series(label, COLORS.get(row["proposer"], "#57606a"), STYLE.get(row["mode"], "current"), points)
        )
    return [
        {"dataset": dataset, "chart": line_chart(series, width=520, height=300), "legend": legend_entries(series)}
        for dataset, series in charts.items()
    ]


def render_study_curves(rows: list[dict], source: str) -> str:
    from .html import template_environment

    return template_environment().get_template("study_curves.html.j2").render(charts=study_charts(rows), source=source)
