"""The report's views of traced scenarios (analysis.traces): time shares as stacked bars, acceptance by
tenth of the output, the spread of acceptance between requests, and prompt/output overlap against
n-gram's advantage per request.  Each view is plain data for the page (_traces.html.j2) and
summary.json alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis import traces
from ..analysis.headroom import headroom
from ..methods import method_of
from ..records import ScenarioResult
from .svg import bar_chart, nice_ticks

PART_COLORS = {"draft": "#ff7f0e", "forward": "#1f77b4", "sample": "#2ca02c", "rest": "#9a9a9a"}
BAR_W = 320


@dataclass
class TraceViews:
    shares: list[dict] = field(default_factory=list)  # one stacked bar per traced scenario
    tenths: list[dict] = field(default_factory=list)  # acceptance by tenth of the output, SD only
    spreads: list[dict] = field(default_factory=list)  # per-request acceptance length percentiles
    overlap: list[dict] = field(default_factory=list)  # per (model, dataset, batch size): scatter
    headroom: list[dict] = field(default_factory=list)  # per traced SD scenario: analysis.headroom
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.shares or self.tenths or self.spreads or self.overlap or self.headroom)

    def bound_curves(self) -> dict[str, dict[int, dict[str, float]]]:
        """scenario id -> batch size -> simulated speedups (for the speedup chart)."""
        return {h["id"]: h["curve"] for h in self.headroom if h["curve"]}

    def to_json(self) -> dict:
        return {
            "time_shares": [{"id": s["id"], "shares": s["shares"]} for s in self.shares],
            "acceptance_by_tenth": [{"id": t["id"], "rates": t["rates"]} for t in self.tenths],
            "request_acceptance": [{"id": s["id"], "percentiles": s["percentiles"]} for s in self.spreads],
            "overlap_vs_ngram_advantage": [
                {k: o[k] for k in ("model", "dataset", "batch_size", "points")} for o in self.overlap
            ],
            "headroom": [{k: v for k, v in h.items() if k != "label"} for h in self.headroom],
            "notes": self.notes,
        }


def _label(result: ScenarioResult) -> str:
    s = result.scenario
    return f"{s.model.name} · {s.method.label} · bs{s.batch_size} · {s.dataset}"


def _stacked(shares: dict[str, float]) -> list[dict]:
    segments, x = [], 0.0
    for part in traces.PARTS:
        w = shares[part] * BAR_W
        segments.append(
            {
                "part": part,
                "x": f"{x:.1f}",
                "w": f"{w:.1f}",
                "color": PART_COLORS[part],
                "tip": f"{traces.PART_NAMES[part]}: {shares[part]:.1%} of step time",
            }
        )
        x += w
    return segments


def _spread_bar(p: dict[str, float], top: float) -> dict:
    """A box from p25 to p75, whiskers to p5 and p95, a tick at the median; acceptance length 1..top."""

    def px(v: float) -> str:
        return f"{(v - 1) / (top - 1) * BAR_W if top > 1 else 0:.1f}"

    return {k: px(v) for k, v in p.items()}


def _per_request(result: ScenarioResult) -> dict[str, float]:
    """request id -> mean acceptance length (replicas of one prompt are one request)."""
    lengths: dict[str, float] = {}
    for r in result.trace.requests:
        if r.accepted and r.request_id not in lengths:
            lengths[r.request_id] = 1 + sum(r.accepted) / len(r.accepted)
    return lengths


def _overlap_points(ngram: ScenarioResult, learned: list[ScenarioResult]) -> list[dict]:
    """Per request: its prompt/output overlap (BLEU-4) and n-gram's acceptance length over the best
    learned method's."""
    overlap = dict(zip(ngram.workload.request_ids, ngram.workload.overlap_bleu4)) if ngram.workload else {}
    mine, theirs = _per_request(ngram), [_per_request(r) for r in learned]
    points = []
    for request_id, length in mine.items():
        best = max((t[request_id] for t in theirs if request_id in t), default=None)
        if best is not None and request_id in overlap:
            points.append({"request_id": request_id, "overlap": overlap[request_id], "advantage": length - best})
    return points


def scatter(points: list[dict], width: int = 360, height: int = 220) -> dict:
    """Geometry of overlap (x, BLEU-4 on 0..1) against advantage (y) with a zero line."""
    left, right, top, bottom = 46, 10, 10, 36
    ys = [p["advantage"] for p in points] + [0.0]
    y_ticks = nice_ticks(min(ys), max(ys))
    x_ticks = [0, 0.25, 0.5, 0.75, 1]

    def px(x: float) -> float:
        return left + x * (width - left - right)

    def py(y: float) -> float:
        return top + (y_ticks[-1] - y) / ((y_ticks[-1] - y_ticks[0]) or 1) * (height - top - bottom)

    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": height - bottom,
        "zero": f"{py(0):.1f}",
        "x_ticks": [{"x": f"{px(x):.1f}", "label": f"{x:g}"} for x in x_ticks],
        "y_ticks": [{"y": f"{py(y):.1f}", "label": f"{y:g}"} for y in y_ticks],
        "dots": [
            {
                "cx": f"{px(p['overlap']):.1f}",
                "cy": f"{py(p['advantage']):.1f}",
                "tip": f"{p['request_id']}: overlap {p['overlap']:.2f}, n-gram {p['advantage']:+.2f} tokens per step",
            }
            for p in points
        ],
    }


def trace_views(results: list[ScenarioResult]) -> TraceViews:
    traced = sorted((r for r in results if r.trace is not None), key=lambda r: r.id)
    views = TraceViews(notes=sorted({f"{r.id}: {n}" for r in traced for n in r.trace.notes}))
    for r in traced:
        if (shares := traces.time_shares(r.trace)) is not None:
            views.shares.append({"id": r.id, "label": _label(r), "shares": shares, "segments": _stacked(shares)})
        if r.trace.requests:
            rates = traces.acceptance_by_tenth(r.trace, ngram=method_of(r.scenario.method.name).ngram_drafts)
            views.tenths.append(
                {
                    "id": r.id,
                    "label": _label(r),
                    "rates": rates,
                    "bars": bar_chart([x or 0.0 for x in rates], PART_COLORS["draft"], what="tenth of the output"),
                }
            )
            if (p := traces.percentiles(traces.request_acceptance_lengths(r.trace))) is not None:
                top = 1 + max(1, int(r.scenario.method.params.get("num_speculative_tokens", 1)))
                views.spreads.append(
                    {"id": r.id, "label": _label(r), "percentiles": p, "top": top, "box": _spread_bar(p, top)}
                )
    labels = {r.id: _label(r) for r in traced}
    for row in headroom(traced):
        views.headroom.append(
            {
                "id": row.scenario_id,
                "label": labels[row.scenario_id],
                "measured": row.measured,
                "simulated": row.simulated,
                "speedup_error": row.speedup_error,
                "held_out": row.held_out,
                "within_error": row.within_error,
                "oracle": row.oracle,
                "combined": row.combined,
                "adaptive": row.adaptive,
                "k": row.k,
                "best_k": {"k": row.best_k.k, "speedup": row.best_k.speedup} if row.best_k else None,
                "curve": row.curve,
                "note": row.note,
            }
        )
    groups: dict[tuple, list[ScenarioResult]] = {}
    for r in traced:
        groups.setdefault((r.scenario.model.name, r.scenario.dataset, r.scenario.batch_size), []).append(r)
    for (model, dataset, batch_size), members in sorted(groups.items()):
        ngram = next((r for r in members if method_of(r.scenario.method.name).ngram_drafts), None)
        learned = [r for r in members if method_of(r.scenario.method.name).learned]
        if ngram and learned and (points := _overlap_points(ngram, learned)):
            views.overlap.append(
                {
                    "model": model,
                    "dataset": dataset,
                    "batch_size": batch_size,
                    "points": points,
                    "chart": scatter(points),
                }
            )
    return views
