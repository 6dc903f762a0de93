"""The page's speedup, latency and acceptance charts (geometry from svg.py; _charts.html.j2 draws them)."""

from __future__ import annotations

from .analyses.study_figure import study_panel, study_series_name
from .format import distinct
from .svg import Series, legend_entries, line_chart
from .view import ScenarioView

# Colours of the methods' lines and bars, assigned in sorted order of method label.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


NO_SD_COLOR = "#444444"  # the no-SD line of a latency chart


def method_colors(views: list[ScenarioView]) -> dict[str, str]:
    labels = sorted({v.method for v in views if v.is_sd})
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


LATENCY_CHARTS = (("tpot_p50_ms", "TPOT p50 (ms)"), ("ttft_p50_ms", "TTFT p50 (ms)"))


def latency_charts(views: list[ScenarioView], colors: dict[str, str]) -> list[dict]:
    """Serve scenarios: per (model, dataset) and latency, the p50 against concurrency of every method
    and of no-SD (where SD stops paying in latency: its line crosses no-SD's)."""
    groups: dict[tuple[str, str], list[ScenarioView]] = {}
    for v in views:
        if v.result.scenario.serves:
            groups.setdefault((v.model, v.dataset), []).append(v)
    charts = []
    for (model, dataset), members in sorted(groups.items()):
        for metric, title in LATENCY_CHARTS:
            series = []
            for method in sorted({v.method for v in members}, key=lambda m: (m in colors, m)):
                points = [
                    (c, value, f"{method} c{c}: {value:.1f} ms")
                    for v in members
                    if v.method == method
                    and (c := v.result.scenario.concurrency) is not None
                    and isinstance(value := v.value(metric), (int, float))
                ]
                if points:
                    series.append(Series(method, colors.get(method, NO_SD_COLOR), "current", sorted(points)))
            if series:
                chart = line_chart(series, reference=None, x_title="concurrency", y_title=title)
                charts.append(
                    {
                        "model": model,
                        "dataset": dataset,
                        "title": title,
                        "chart": chart,
                        "legend": legend_entries(series),
                    }
                )
    return charts


def _bound_series(method: str, members: list[ScenarioView], color: str, bounds: dict) -> list[Series]:
    """The simulated oracle and combined-oracle curves of a traced scenario of this method (analysis.headroom)."""
    curve = next((bounds[v.result.id] for v in members if v.result.id in bounds), {})
    series = []
    for name, label in (("oracle", "oracle"), ("combined", "combined oracle")):
        points = [
            (bs, values[name], f"{method} {label} bs{bs}: {values[name]:.3f}x (simulated)")
            for bs, values in sorted(curve.items())
            if values.get(name) is not None
        ]
        if points:
            series.append(Series(f"{method} {label}", color, "bound", points))
    return series


def _method_series(method: str, members: list[ScenarioView], color: str, panel, batch_sizes) -> list[Series]:
    """This run's speedups of one method, its baseline medians, and the study's curve where it has one."""
    members = sorted(members, key=lambda v: v.batch_size)
    series = [
        Series(
            method,
            color,
            "current",
            [
                (v.batch_size, v.value("speedup"), f"{method} bs{v.batch_size}: {v.value('speedup'):.3f}x ({v.status})")
                for v in members
            ],
        )
    ]
    baseline = [
        (v.batch_size, median, f"{method} bs{v.batch_size} baseline: {median:.3f}x")
        for v in members
        if v.result.baseline and (median := v.result.baseline.metric_medians.get("speedup")) is not None
    ]
    if baseline:
        series.append(Series(f"{method} baseline", color, "baseline", baseline))
    scenario = members[0].result.scenario
    name = study_series_name(scenario.method.name, scenario.method.params) if panel else None
    if name and panel[1].get(name):
        series.append(
            Series(
                f"study {name}",
                color,
                "study",
                [(bs, y, f"study {name} bs{bs}: {y:.3f}x") for bs, y in zip(batch_sizes, panel[1][name])],
            )
        )
    return series


def speedup_charts(
    views: list[ScenarioView], colors: dict[str, str], reference: dict, bounds: dict | None = None
) -> list[dict]:
    """One chart per (model, dataset): speedup against batch size of every method, with the study's
    curves and, where a scenario was traced, its simulated oracle bounds (`bounds`: id -> curve)."""
    groups: dict[tuple[str, str], dict[str, list[ScenarioView]]] = {}
    for v in views:
        if v.is_sd and v.value("speedup") is not None and not v.result.scenario.serves:
            groups.setdefault((v.model, v.dataset), {}).setdefault(v.method, []).append(v)
    batch_sizes = reference.get("fig1_speedup_vs_batch", {}).get("batch_sizes", [])
    charts = []
    for (model, dataset), by_method in sorted(groups.items()):
        first = next(iter(by_method.values()))[0].result.scenario
        panel = study_panel(model, first.model.path, dataset, reference)
        series, drawn = [], set()
        for method in sorted(by_method):
            for s in _method_series(method, by_method[method], colors[method], panel, batch_sizes) + _bound_series(
                method, by_method[method], colors[method], bounds or {}
            ):
                same = (s.style, tuple((x, round(y, 6)) for x, y, _ in s.points))
                if s.style != "bound" or same not in drawn:  # one combined oracle where methods share it
                    series.append(s)
                    drawn.add(same)
        charts.append(
            {
                "model": model,
                "dataset": dataset,
                "chart": line_chart(series),
                "legend": legend_entries(series),
                "study_panel": panel[0] if panel and any(s.style == "study" for s in series) else None,
                "stand_ins": distinct(
                    v.result.workload.stand_in for members in by_method.values() for v in members if v.result.workload
                ),
            }
        )
    return charts
