"""The HTML page: one self-contained file rendered from the view model by Jinja (templates/).

Inline CSS, inline SVG charts, no external resource of any kind, and a Content-Security-Policy
that lets only the page's own filter script run (by its hash).  Prompts, outputs, error lines and
ids are untrusted text: Jinja's autoescaping escapes them and nothing marks them safe.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ..analysis.traces import PART_NAMES
from ..run.hardware.ownership import BY_COUNT, BY_PID
from ..run.hardware.telemetry import BAD_THROTTLE_REASONS, SLOWDOWN_VIOLATIONS, foreign_process_text
from .analyses.acceptance import AcceptanceTable
from .analyses.drift import config_drift
from .analyses.study_figure import load_reference
from .charts import latency_charts, method_colors, speedup_charts
from .format import (
    TEXT_LIMIT,
    clip,
    fmt_change,
    fmt_duration,
    fmt_estimate,
    fmt_mib,
    fmt_num,
    fmt_p,
    fmt_pct,
    fmt_ratio,
    fmt_spread,
    pretty_json,
)
from .svg import bar_chart
from .traces import BAR_W, PART_COLORS
from .trends import TREND_METRICS
from .view import ReportView, ScenarioView, severity_rank, status_class

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
OUTPUTS_SHOWN = 3  # distinct sample requests shown per scenario
# The one-row-per-scenario table: metric, column title, formatter.
TABLE_METRICS = (
    ("throughput_tok_s", "throughput (tok/s)", fmt_num),
    ("speedup", "speedup", fmt_num),
    ("mean_acceptance_length", "acceptance length", fmt_num),
    ("lossless_fraction", "lossless", fmt_pct),
    ("distribution_match_p", "sampled: draws match no-SD's (p)", fmt_p),
)
TELEMETRY_ROWS = (
    ("sm_clock_mhz", "SM clock (MHz)"),
    ("mem_clock_mhz", "memory clock (MHz)"),
    ("temperature_c", "temperature (°C)"),
    ("power_w", "power (W)"),
)


def template_environment() -> Environment:
    """Jinja over templates/, autoescaping, with the report's formatters as filters."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=fmt_num,
        mib=fmt_mib,
        ratio=fmt_ratio,
        pct=fmt_pct,
        change=fmt_change,
        p=fmt_p,
        duration=fmt_duration,
        css=status_class,
        json=pretty_json,
        estimate=fmt_estimate,
    )
    env.globals["spread"] = fmt_spread
    return env


def filter_script() -> tuple[Markup, str]:
    """The page's only script (progressive filtering) and its CSP source; the page reads fine without it."""
    source = (TEMPLATE_DIR / "filter.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return Markup(source), f"'sha256-{digest}'"  # our own file, not untrusted text


OWNERSHIP_WAYS = {
    BY_PID: "foreign processes told by pid",
    BY_COUNT: "foreign processes counted: NVML's pids are another PID namespace's (a container's host pids), "
    "so each GPU's processes were counted against the suite's own",
}


def _telemetry(telemetry: dict | None, preflight_pids: set[int]) -> dict | None:
    """The GPU telemetry sampled during a scenario's measurement (run.hardware.telemetry summary()), None on CPU.

    A result from before foreign_processes has its foreign processes' pids alone."""
    if not telemetry:
        return None
    memory = telemetry.get("memory_used_mib") or {}
    processes = telemetry.get("foreign_processes") or []
    foreign = [foreign_process_text(p, p["pid"] in preflight_pids) for p in processes]
    return {
        "rows": [
            {"label": label, **{k: (telemetry.get(key) or {}).get(k) for k in ("min", "median", "max")}}
            for key, label in TELEMETRY_ROWS
        ],
        "reasons": [{"name": x, "bad": x in BAD_THROTTLE_REASONS} for x in telemetry.get("throttle_reasons", [])],
        "memory_start": memory.get("start"),
        "memory_peak": memory.get("peak"),
        "samples": telemetry.get("samples"),
        "interval_s": telemetry.get("interval_s"),
        "foreign": foreign or [str(pid) for pid in telemetry.get("foreign_pids", [])],
        "ownership": OWNERSHIP_WAYS.get(telemetry.get("ownership") or ""),
        "violations": [
            {"name": name, "ms": ms, "bad": name in SLOWDOWN_VIOLATIONS and ms > 0}
            for name, ms in (telemetry.get("violation_ms") or {}).items()
        ],
    }


def _samples(view: ScenarioView) -> list[dict]:
    """Distinct (prompt, output) pairs: a replicated batch repeats one request."""
    distinct: dict[tuple[str, str], dict] = {}
    for o in view.result.outputs:
        key = (o.prompt, o.output)
        if key in distinct:
            distinct[key]["repeats"] += 1
        else:
            distinct[key] = {
                "request_id": o.request_id,
                "prompt": clip(o.prompt),
                "output": clip(o.output),
                "repeats": 1,
            }
    return list(distinct.values())


class _Shared:
    """Texts that many scenarios repeat (device, provenance): each distinct one is shown once, by anchor."""

    def __init__(self, kind: str):
        self.kind = kind
        self.anchors: dict[str, str] = {}

    def anchor(self, text: str) -> str:
        return self.anchors.setdefault(text, f"{self.kind}-{len(self.anchors) + 1}")

    def blocks(self) -> list[dict]:
        return [{"anchor": anchor, "text": text} for text, anchor in self.anchors.items()]


def _detail(view: ScenarioView, devices: _Shared, provenances: _Shared) -> dict:
    """What a scenario's collapsed details show beyond the typed result itself."""
    result = view.result
    samples = _samples(view)
    return {
        "view": view,
        "spreads": sorted(view.spreads, key=lambda s: severity_rank(s.verdict.status)),
        "medians": result.baseline.metric_medians if result.baseline else {},
        "drift": config_drift(result.effective_config, result.baseline.effective_config) if result.baseline else [],
        "telemetry": _telemetry(result.gpu_telemetry, {p.pid for p in result.device.foreign_processes()}),
        "samples": samples[:OUTPUTS_SHOWN],
        "more_outputs": max(len(samples) - OUTPUTS_SHOWN, 0),
        "scenario_json": pretty_json(result.scenario.to_json()),
        "effective_config": pretty_json(result.effective_config or {}),
        "provenance": provenances.anchor(pretty_json(result.provenance)),
        "device": devices.anchor(pretty_json(result.device.to_json())),
        "counters": json.dumps(result.counters.to_json(), sort_keys=True) if result.counters else None,
    }


def _acceptance(table: AcceptanceTable, colors: dict[str, str]) -> list[dict]:
    rows = []
    for row in table.rows:
        color = colors[row.method]
        rows.append(
            {
                "row": row,
                "color": color,
                "bars": [
                    bar_chart(c.pooled.per_position, color) if c and c.pooled.per_position else None for c in row.cells
                ],
            }
        )
    return rows


def render_html(view: ReportView) -> str:
    """One self-contained HTML page for the run."""
    scenarios = view.scenarios
    colors = method_colors(scenarios)
    reference = load_reference()
    script, script_hash = filter_script()
    devices, provenances = _Shared("device"), _Shared("provenance")
    details = [_detail(v, devices, provenances) for v in scenarios]
    return (
        template_environment()
        .get_template("report.html.j2")
        .render(
            title="specperf report: " + (", ".join(view.header.run_ids) or "run"),
            header=view.header,
            attention=view.attention,
            scenarios=scenarios,
            table_metrics=TABLE_METRICS,
            filters={
                "model": sorted({v.model for v in scenarios}),
                "method": sorted({v.method for v in scenarios}),
                "dataset": sorted({v.dataset for v in scenarios}),
                "status": sorted({v.status for v in scenarios}, key=severity_rank),
            },
            charts=speedup_charts(scenarios, colors, reference, view.traces.bound_curves()),
            latency_charts=latency_charts(scenarios, colors),
            serving=view.serving,
            study={
                "source": reference.get("source", ""),
                "hardware": reference.get("hardware", ""),
                "engine": reference.get("engine", ""),
            },
            acceptance=view.acceptance,
            acceptance_rows=_acceptance(view.acceptance, colors),
            pays=view.pays,
            best_k=view.best_k,
            dynamic=view.dynamic,
            trees=view.trees,
            memory=view.memory,
            gate=view.gate,
            traces=view.traces,
            part_colors=PART_COLORS,
            part_names=PART_NAMES,
            bar_w=BAR_W,
            trends=view.data.trends,
            trend_metrics=TREND_METRICS,
            details=details,
            devices=devices.blocks(),
            provenances=provenances.blocks(),
            script=script,
            script_hash=script_hash,
            text_limit=TEXT_LIMIT,
        )
    )
