"""Reports of a run: one self-contained HTML page, a Markdown summary and a JSON summary.

This is the only module that knows HTML.  It renders from the stored result files of one or more
run directories (reports/<run-id>/results/*.json and run.json), never from live objects, so a
crashed, interrupted or sharded run still gets its report.

The page is a single file: inline CSS, inline SVG charts, no external resource of any kind, and a
Content-Security-Policy that lets only its own small filter script run.  Prompts, outputs and
error lines are untrusted text: they go through Jinja's autoescaping and are never marked safe.

The command line reaches it as `specperf report RUN_DIR [RUN_DIR ...] [--out DIR]`.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ..judge import metrics
from ..run.gpus import BAD_THROTTLE_REASONS
from ..records import SCHEMA_VERSION
from ..storage import ResultFileError, atomic_write_text, load_results, read_json
from ..judge.metrics import metric_samples
from ..status import ERROR, FAILING, IMPROVEMENT, INCOMPATIBLE, NO_BASELINE, SEVERITY

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
REFERENCE_DATA = Path(__file__).resolve().parent / "reference_data.json"

TEXT_LIMIT = 2000        # characters of a prompt or output shown on the page
OUTPUTS_SHOWN = 3        # sample requests shown per scenario
MARKDOWN_ROWS = 200      # scenarios listed in the Markdown summary
NO_SD_METHOD = "none"    # vLLM method name of the no-SD reference scenarios
SKIPPED = "skipped"      # result status of a scenario whose workload was unavailable; never judged

IMPROVEMENT_HINT = "improvement — consider refreshing the baseline (--update-baselines)"
CPU_CLOCKS = "no GPU: clocks and throttling not measured (CPU tier)"

KEY_METRICS = ("throughput_tok_s", "speedup", "mean_acceptance_length", "draft_acceptance_rate",
               "lossless_fraction")

# Colours of the methods' lines and bars, assigned in sorted order of method label.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")

# Matching scenarios to panels of the study's figure 1 (speedup against batch size, H100).
# Substrings of a scenario's model name or path -> the model tag in the panel titles.
STUDY_MODELS = (
    ("llama3.1-8b", "L3.1-8B"), ("llama-3.1-8b", "L3.1-8B"),
    ("llama3-70b", "L3-70B"), ("llama-3-70b", "L3-70B"),
    ("qwen3-8b", "Q3-8B"),
)
STUDY_DATASETS = {"gsm8k": "GSM8K", "cnn_dailymail": "CNN/DM", "sharegpt": "ShareGPT",
                  "instructcoder": "InstructCoder"}
STUDY_K = 3              # num_speculative_tokens of every fig1 series but "ngram-k5"


# --------------------------------------------------------------------------- loading

@dataclass
class RunData:
    """Everything a report shows: the merged results of one or more run directories."""

    run_dirs: list[Path]
    runs: list[dict] = field(default_factory=list)        # run.json of each directory that has one
    results: list[dict] = field(default_factory=list)     # one per scenario id, sorted by id
    sources: dict[str, Path] = field(default_factory=dict)  # scenario id -> directory it came from
    problems: list[str] = field(default_factory=list)     # files that could not be used


def load_run(run_dirs: list[Path]) -> RunData:
    """Merge results/*.json (and run.json) of the given run directories; later ones win on duplicates.

    A corrupt result file is skipped and listed in `problems`; a directory with neither a results/
    folder nor a run.json is not a run directory and raises ResultFileError.
    """
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("no run directory given")
    data = RunData(run_dirs=dirs)
    merged: dict[str, dict] = {}
    for run_dir in dirs:
        run_file = run_dir / "run.json"
        if run_file.exists():
            try:
                data.runs.append(read_json(run_file, "run file"))
            except ResultFileError as err:
                data.problems.append(str(err))
        for record in _dir_results(run_dir, run_file.exists(), data.problems):
            scenario_id = (record.get("scenario") or {}).get("id")
            if not isinstance(scenario_id, str) or not scenario_id:
                data.problems.append(f"{run_dir}: a result without a scenario id was skipped")
                continue
            merged[scenario_id] = record
            data.sources[scenario_id] = run_dir
    data.results = [merged[k] for k in sorted(merged)]
    return data


def _dir_results(run_dir: Path, has_run_file: bool, problems: list[str]) -> list[dict]:
    try:
        return load_results(run_dir)
    except ResultFileError as err:
        folder = run_dir / "results"
        if not folder.is_dir():
            if has_run_file:        # a run that stopped before its first result
                problems.append(f"{run_dir}: no results/ folder (the run stored no result)")
                return []
            raise
        problems.append(str(err))
    records = []                    # read what is readable, file by file
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(read_json(path, "result"))
        except ResultFileError as err:
            if str(err) not in problems:
                problems.append(str(err))
    return records


# --------------------------------------------------------------------------- formatting

def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt_num(value, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_num(v, digits) for v in value) + "]"
    return str(value)


def fmt_change(value) -> str:
    return f"{value:+.1%}" if _finite(value) else ("—" if value is None else str(value))


def fmt_pct(value) -> str:
    return f"{value:.1%}" if _finite(value) else ("—" if value is None else str(value))


def fmt_p(value) -> str:
    return f"{value:.3g}" if _finite(value) else "—"


def fmt_spread(median, stats: dict | None) -> str:
    """A median with the spread of its rounds, e.g. "31.2 ±4.1% (n=4)" (spread: coefficient of variation)."""
    text = fmt_num(median)
    if median is None or not stats:
        return text
    if _finite(stats.get("cv")):
        text += f" ±{stats['cv']:.1%}"
    return text + f" (n={stats['n']})"


def fmt_mib(value) -> str:
    return f"{value:.0f} MiB" if _finite(value) else "—"


def fmt_ratio(value) -> str:
    return f"x{value:.2f}" if _finite(value) else "—"


def fmt_duration(seconds) -> str:
    if not _finite(seconds):
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def _parse_time(text) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _clip(text) -> dict:
    """Untrusted text cut to TEXT_LIMIT characters for display (escaped later by the template)."""
    if text is None:
        text = ""
    elif not isinstance(text, str):
        text = json.dumps(text, default=str, ensure_ascii=False)
    return {"text": text[:TEXT_LIMIT], "truncated": len(text) > TEXT_LIMIT, "length": len(text)}


def _distinct(values) -> list:
    seen = []
    for value in values:
        if value not in (None, "") and value not in seen:
            seen.append(value)
    return seen


# --------------------------------------------------------------------------- one scenario

def severity_rank(status: str) -> float:
    """Position in SEVERITY (worst first), skipped after pass; an unknown status sorts beside incompatible."""
    if status in SEVERITY:
        return SEVERITY.index(status)
    if status == SKIPPED:
        return len(SEVERITY)
    return SEVERITY.index(INCOMPATIBLE) + 0.5


def _status_class(status: str) -> str:
    return status if status in SEVERITY or status == SKIPPED else "unknown"


def _metric_value(record: dict, name: str):
    entry = (record.get("metrics") or {}).get(name)
    if isinstance(entry, dict):
        value = entry.get("value")
        if _finite(value) or isinstance(value, list):
            return value
    return None


def _int_or_none(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _round_samples(by_metric) -> dict[str, list[float]]:
    """Finite round samples per verdict metric name (per-position vectors become acceptance_pos<i>)."""
    if not isinstance(by_metric, dict):
        return {}
    entries = {name: entry for name, entry in by_metric.items()
               if isinstance(entry, dict) and isinstance(entry.get("samples"), list)}
    try:
        flat = metric_samples(entries)
    except TypeError:               # a per-position sample that is not a list: shape unknown, no spread
        return {}
    return {name: [s for s in samples if _finite(s)] for name, samples in flat.items()}


def _with_spreads(record: dict, metric_verdicts: list[dict]) -> list[dict]:
    """Metric verdicts with the round statistics (metrics.summarise) of each side; None where no samples."""
    current = _round_samples(record.get("metrics"))
    baseline = record.get("baseline")
    stored = baseline.get("metric_samples") if isinstance(baseline, dict) else None   # absent in older records
    previous = _round_samples({name: {"samples": samples} for name, samples in stored.items()}
                              if isinstance(stored, dict) else None)

    def stats(samples):
        return metrics.summarise(samples) if samples else None
    return [{**m, "baseline_stats": stats(previous.get(m.get("metric"))),
             "current_stats": stats(current.get(m.get("metric")))} for m in metric_verdicts]


def scenario_view(record: dict, source: Path | None = None) -> dict:
    """The plain facts of one result that every output format needs."""
    scenario = record.get("scenario") or {}
    model = scenario.get("model") or {}
    method = scenario.get("method") or {}
    verdict = record.get("verdict") or {}
    result_status = record.get("status") or "unknown"
    status = verdict.get("status")
    note = verdict.get("note") or ""
    if result_status == SKIPPED:
        status, note = SKIPPED, note or record.get("error") or ""
    elif not isinstance(status, str) or not status:
        status = ERROR if result_status != "ok" else NO_BASELINE
        note = note or "no verdict recorded"
    method_name = method.get("name") or ""
    return {
        "id": scenario.get("id", "?"),
        "model": str(model.get("name") or "?"),
        "method": str(method.get("label") or method_name or "?"),
        "method_name": str(method_name),
        "params": method.get("params") if isinstance(method.get("params"), dict) else {},
        "is_sd": method_name != NO_SD_METHOD,
        "batch_size": _int_or_none(scenario.get("batch_size")),
        "dataset": str(scenario.get("dataset") or "?"),
        "status": status,
        "css": _status_class(status),
        "rank": severity_rank(status),
        "result_status": result_status,
        "error": record.get("error") or "",
        "note": note,
        "hint": IMPROVEMENT_HINT if status == IMPROVEMENT else "",
        "metric_verdicts": _with_spreads(record, [m for m in verdict.get("metrics") or [] if isinstance(m, dict)]),
        "values": {name: _metric_value(record, name) for name in KEY_METRICS},
        "source": str(source) if source is not None else "",
    }


def _sorted_views(data: RunData) -> list[tuple[dict, dict]]:
    pairs = [(scenario_view(r, data.sources.get((r.get("scenario") or {}).get("id"))), r)
             for r in data.results]
    pairs.sort(key=lambda p: _order(p[0]))
    return pairs


def _order(view: dict) -> tuple:
    """Worst verdict first, then model, dataset, method and batch size (numerically)."""
    return (view["rank"], view["model"], view["dataset"], view["method"], view["batch_size"] or 0, view["id"])


def verdict_counts(views: list[dict]) -> dict[str, int]:
    """Scenarios per verdict: every verdict of SEVERITY (zeros included), then any other status seen."""
    counts = {status: 0 for status in SEVERITY}
    for view in views:
        counts[view["status"]] = counts.get(view["status"], 0) + 1
    return counts


def _failing_lines(view: dict) -> list[str]:
    """Short lines naming what made a scenario fail (or look suspicious), for summaries."""
    if view["status"] in (ERROR, SKIPPED) and view["error"]:
        return [view["error"]]
    lines = []
    for m in view["metric_verdicts"]:
        if m.get("status") in ("pass", NO_BASELINE):
            continue
        text = (f"{m.get('metric')} {m.get('status')} {fmt_change(m.get('change'))}: "
                f"{fmt_spread(m.get('baseline'), m['baseline_stats'])} → "
                f"{fmt_spread(m.get('current'), m['current_stats'])}")
        if _finite(m.get("p_value")):
            text += f", p {fmt_p(m['p_value'])}"
        lines.append(text + (f" ({m['note']})" if m.get("note") else ""))
    if view["note"]:
        lines.insert(0, view["note"])
    if view["hint"]:
        lines.append(view["hint"])
    return lines


# --------------------------------------------------------------------------- run header

def _clocks(records: list[dict], devices: list[dict]) -> dict:
    """GPU clock and throttle state over the scenarios: the lowest median SM clock, the union of throttle reasons."""
    sampled = [((r.get("scenario") or {}).get("id"), r["gpu_telemetry"]) for r in records
               if isinstance(r.get("gpu_telemetry"), dict)]
    facts = {"measured": bool(sampled), "sm_clock_mhz": None, "max_sm_clock_mhz": None,
             "throttle_reasons": [], "bad_reasons": [], "bad_scenarios": []}
    if not sampled:
        kinds = {d.get("kind") for d in devices}
        facts["line"] = ("GPU clocks and throttling not recorded" if "gpu" in kinds
                         else CPU_CLOCKS if "cpu" in kinds else "clocks and throttling unknown")
        return facts
    medians = [m for _, t in sampled if _finite(m := (t.get("sm_clock_mhz") or {}).get("median"))]
    maxima = [m for d in devices for g in d.get("gpus") or [] if isinstance(g, dict)
              and _finite(m := g.get("max_sm_clock_mhz"))]
    reasons = sorted(_distinct(str(name) for _, t in sampled for name in t.get("throttle_reasons") or []),
                     key=lambda name: name not in BAD_THROTTLE_REASONS)     # the bad ones first
    facts.update(sm_clock_mhz=min(medians) if medians else None, max_sm_clock_mhz=max(maxima) if maxima else None,
                 throttle_reasons=reasons, bad_reasons=[x for x in reasons if x in BAD_THROTTLE_REASONS],
                 bad_scenarios=[sid for sid, t in sampled
                                if any(x in BAD_THROTTLE_REASONS for x in t.get("throttle_reasons") or [])])
    clock = f"SM clock {facts['sm_clock_mhz']:.0f} MHz" if medians else "SM clock not sampled"
    if maxima:
        clock += f" (max {facts['max_sm_clock_mhz']:.0f})"
    facts["line"] = f"{clock}, throttling: {', '.join(reasons) or 'none seen'}"
    return facts


def _header(data: RunData, views: list[dict]) -> dict:
    records = data.results
    runs = data.runs
    provenances = [r.get("provenance") or {} for r in records] + [r.get("provenance") or {} for r in runs]
    devices = [r.get("device") or {} for r in records] + [r.get("device") or {} for r in runs]
    starts = [_parse_time(x.get("started_at")) for x in runs + records]
    ends = [_parse_time(x.get("finished_at")) for x in runs + records]
    starts = [s for s in starts if s]
    ends = [e for e in ends if e]
    started = min(starts) if starts else None
    finished = max(ends) if ends else None
    stats = [r.get("stats") or {} for r in runs]
    engine_starts = [s.get("engine_starts") for s in stats if _finite(s.get("engine_starts"))]
    wall = [s.get("wall_s") for s in stats if _finite(s.get("wall_s"))]
    interrupted = any(r.get("interrupted") for r in runs) or any(r.get("finished_at") is None for r in runs)
    counts = verdict_counts(views)
    clocks = _clocks(records, devices)
    return {
        "run_ids": _distinct(r.get("run_id") for r in runs) or [d.name for d in data.run_dirs],
        "profiles": _distinct([r.get("profile") for r in runs]
                              + [(r.get("scenario") or {}).get("profile") for r in records]),
        "counts": [{"status": s, "css": _status_class(s), "n": n} for s, n in counts.items()
                   if n or s in SEVERITY],
        "total": len(records),
        "failed": sum(counts.get(s, 0) for s in FAILING),
        "vllm": _distinct(p.get("vllm") for p in provenances),
        "vllm_distribution": _distinct(p.get("vllm_distribution") for p in provenances),
        "torch": _distinct(p.get("torch") for p in provenances),
        "baseline_vllm": _distinct((r.get("baseline") or {}).get("vllm") for r in records),
        "devices": _distinct(f"{d.get('name') or d.get('kind') or '?'}"
                             + (f" x{d['count']}" if d.get("kind") == "gpu" and _finite(d.get("count"))
                                and d["count"] > 1 else "")
                             for d in devices if d),
        "drivers": _distinct(str(d["driver"]) + (f" (CUDA {d['cuda_driver_version']})"
                                                 if d.get("cuda_driver_version") else "")
                             for d in devices if d.get("driver")),
        "clocks": clocks,
        "throttle_warning": (f"GPU throttling that lowers clocks was seen ({', '.join(clocks['bad_reasons'])}) in "
                             f"{len(clocks['bad_scenarios'])} of {len(records)} scenarios: their throughput and "
                             "speedup are suspect." if clocks["bad_reasons"] else ""),
        "hardware_keys": _distinct(d.get("hardware_key") for d in devices),
        "git_commits": _distinct(p.get("git_commit") for p in provenances),
        "suite_versions": _distinct(p.get("suite_version") for p in provenances),
        "started": started.isoformat(timespec="seconds") if started else "—",
        "finished": finished.isoformat(timespec="seconds") if finished else "—",
        "run_time": fmt_duration(sum(wall) if wall else
                                 (finished - started).total_seconds() if started and finished else None),
        "engine_starts": int(sum(engine_starts)) if engine_starts else None,
        "has_run_file": bool(runs),
        "interrupted": interrupted,
        "problems": list(data.problems),
        "stand_ins": _distinct((r.get("workload") or {}).get("stand_in") for r in records),
    }


# --------------------------------------------------------------------------- verdict table

def _verdict_groups(pairs: list[tuple[dict, dict]]) -> list[dict]:
    groups = []
    for view, _record in pairs:
        rows = []
        for m in sorted(view["metric_verdicts"], key=lambda m: severity_rank(m.get("status"))):
            status = str(m.get("status") or "?")
            rows.append({
                "metric": str(m.get("metric") or "?"), "status": status, "css": _status_class(status),
                "baseline": fmt_spread(m.get("baseline"), m["baseline_stats"]),
                "current": fmt_spread(m.get("current"), m["current_stats"]),
                "change": fmt_change(m.get("change")), "tolerance": fmt_pct(m.get("tolerance")),
                "p_value": fmt_p(m.get("p_value")), "note": str(m.get("note") or ""),
            })
        if not rows:
            rows.append({"metric": "—", "status": view["status"], "css": view["css"], "baseline": "—",
                         "current": "—", "change": "—", "tolerance": "—", "p_value": "—", "note": ""})
        groups.append({"view": view, "rows": rows})
    return groups


# --------------------------------------------------------------------------- charts

def _nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    raw = span / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(lo / step + 1e-9) * step
    stop = math.ceil(hi / step - 1e-9) * step
    count = int(round((stop - start) / step))
    return [round(start + i * step, 10) for i in range(max(count, 1) + 1)]


def line_chart(series: list[dict], *, width: int = 460, height: int = 250, reference: float | None = 1.0,
               x_title: str = "batch size", y_title: str = "speedup (x)") -> dict:
    """Geometry of a line chart with a log2 x axis: series are {label, color, style, points: [(x, y, tip)]}."""
    left, right, top, bottom = 50, 14, 12, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = sorted({p[0] for s in series for p in s["points"]})
    ys = [p[1] for s in series for p in s["points"]] + ([reference] if reference is not None else [])
    lo, hi = min(ys), max(ys)
    pad = (hi - lo) * 0.08 or 0.1
    ticks = _nice_ticks(lo - pad, hi + pad)
    y_lo, y_hi = ticks[0], ticks[-1]

    inset = 14                      # keeps the first and last points off the axes

    def px(x: float) -> float:
        if len(xs) == 1:
            return left + plot_w / 2
        span = math.log2(xs[-1]) - math.log2(xs[0])
        return left + inset + (math.log2(x) - math.log2(xs[0])) / span * (plot_w - 2 * inset)

    def py(y: float) -> float:
        return top + (y_hi - y) / (y_hi - y_lo) * plot_h

    dash = {"current": "", "baseline": "6 4", "study": "2 3"}
    lines = []
    for s in series:
        points = sorted(s["points"])
        lines.append({
            "label": s["label"], "color": s["color"], "style": s["style"], "dash": dash[s["style"]],
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


def _method_colors(views: list[dict]) -> dict[str, str]:
    labels = sorted({v["method"] for v in views if v["is_sd"]})
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def load_reference() -> dict:
    """The study's figure data shipped with the suite (arXiv 2601.11580), or {} when unreadable."""
    try:
        return json.loads(REFERENCE_DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def study_panel(model_name: str, model_path: str, dataset: str, reference: dict) -> tuple[str, dict] | None:
    """The fig1 panel (title, series) for a (model, dataset), when the study measured that pair."""
    names = (model_name.lower(), model_path.lower())
    tag = next((t for key, t in STUDY_MODELS if any(key in n for n in names)), None)
    dataset_tag = STUDY_DATASETS.get(dataset)
    if tag is None or dataset_tag is None:
        return None
    panels = (reference.get("fig1_speedup_vs_batch") or {}).get("panels") or {}
    for title, series in panels.items():
        if title.split(") ", 1)[-1] == f"{tag} {dataset_tag}":
            return title, series
    return None


def study_series_name(method_name: str, params: dict) -> str | None:
    """The fig1 series that a method corresponds to (same vLLM method and k)."""
    k = params.get("num_speculative_tokens")
    if method_name == "ngram" and k in (3, 5):
        return f"ngram-k{k}"
    if k != STUDY_K:
        return None
    return {"eagle": "EAGLE", "eagle3": "EAGLE-3", "draft_model": "DraftModel"}.get(method_name)


def _speedup_charts(pairs: list[tuple[dict, dict]], colors: dict[str, str], reference: dict) -> list[dict]:
    groups: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for view, record in pairs:
        if view["is_sd"] and view["batch_size"] and view["batch_size"] > 0 and _finite(view["values"]["speedup"]):
            groups.setdefault((view["model"], view["dataset"]), []).append((view, record))
    fig1 = reference.get("fig1_speedup_vs_batch") or {}
    charts = []
    for (model, dataset), members in sorted(groups.items()):
        by_method: dict[str, list[tuple[dict, dict]]] = {}
        for view, record in members:
            by_method.setdefault(view["method"], []).append((view, record))
        model_path = str((((members[0][1].get("scenario") or {}).get("model")) or {}).get("path") or "")
        panel = study_panel(model, model_path, dataset, reference)
        series, legend = [], []
        for method in sorted(by_method):
            entries = sorted(by_method[method], key=lambda p: p[0]["batch_size"])
            color = colors.get(method, PALETTE[0])
            current = [(v["batch_size"], v["values"]["speedup"],
                        f"{method} bs{v['batch_size']}: {v['values']['speedup']:.3f}x ({v['status']})")
                       for v, _ in entries]
            series.append({"label": method, "color": color, "style": "current", "points": current})
            legend.append({"label": method, "color": color, "style": "current", "dash": ""})
            baseline = []
            for v, r in entries:
                median = ((r.get("baseline") or {}).get("metric_medians") or {}).get("speedup")
                if _finite(median):
                    baseline.append((v["batch_size"], median, f"{method} bs{v['batch_size']} baseline: {median:.3f}x"))
            if baseline:
                series.append({"label": f"{method} baseline", "color": color, "style": "baseline", "points": baseline})
                legend.append({"label": f"{method} baseline", "color": color, "style": "baseline", "dash": "6 4"})
            if panel:
                name = study_series_name(entries[0][0]["method_name"], entries[0][0]["params"])
                values = panel[1].get(name) if name else None
                if values:
                    points = [(bs, y, f"study {name} bs{bs}: {y:.3f}x")
                              for bs, y in zip(fig1.get("batch_sizes") or [], values) if _finite(y)]
                    series.append({"label": f"study {name}", "color": color, "style": "study", "points": points})
                    legend.append({"label": f"study {name}", "color": color, "style": "study", "dash": "2 3"})
        charts.append({
            "model": model, "dataset": dataset, "chart": line_chart(series), "legend": legend,
            "study_panel": panel[0] if panel and any(s["style"] == "study" for s in series) else None,
            "stand_ins": _distinct((r.get("workload") or {}).get("stand_in") for _, r in members),
        })
    return charts


# --------------------------------------------------------------------------- acceptance

def _pooled_acceptance(records: list[dict]) -> dict:
    """Acceptance over several scenarios from their summed counters (the correct pooled rates)."""
    total = metrics.sum_counters([r["counters"] for r in records if r.get("counters")])
    pooled = metrics.acceptance(total)
    return {"length": pooled["mean_acceptance_length"], "rate": pooled["draft_acceptance_rate"],
            "per_pos": pooled["per_position_acceptance"] or [], "drafts": total["drafts"]}


def bar_chart(rates: list[float], color: str, bar: int = 16, gap: int = 5, height: int = 64) -> dict:
    """Geometry of a small bar chart of per-position acceptance rates (0..1)."""
    plot_h = height - 26
    bars = []
    for i, rate in enumerate(rates):
        clamped = min(max(rate, 0.0), 1.0)
        h = clamped * plot_h
        x = gap + i * (bar + gap)
        bars.append({"x": x, "y": f"{12 + plot_h - h:.1f}", "h": f"{h:.1f}", "w": bar,
                     "label": f"{rate * 100:.0f}", "label_x": x + bar / 2, "label_y": f"{10 + plot_h - h:.1f}",
                     "pos": i + 1, "tip": f"position {i + 1}: {rate:.1%} of drafts accepted"})
    return {"width": gap + len(rates) * (bar + gap), "height": height, "base": 12 + plot_h,
            "color": color, "bars": bars}


def _acceptance_table(pairs: list[tuple[dict, dict]], colors: dict[str, str]) -> dict:
    cells: dict[tuple[str, str], dict[str, list[dict]]] = {}
    datasets = set()
    for view, record in pairs:
        if not view["is_sd"] or view["result_status"] != "ok":
            continue
        datasets.add(view["dataset"])
        cells.setdefault((view["model"], view["method"]), {}).setdefault(view["dataset"], []).append(record)
    columns = sorted(datasets)
    rows = []
    for (model, method), by_dataset in sorted(cells.items()):
        row = {"model": model, "method": method, "color": colors.get(method, PALETTE[0]), "cells": []}
        for dataset in columns:
            records = by_dataset.get(dataset)
            if not records:
                row["cells"].append(None)
                continue
            pooled = _pooled_acceptance(records)
            batch_sizes = sorted({b for r in records if (b := _int_or_none((r.get("scenario") or {}).get("batch_size")))})
            row["cells"].append({
                "length": fmt_num(pooled["length"], 3), "rate": fmt_pct(pooled["rate"]),
                "bars": bar_chart(pooled["per_pos"], row["color"]) if pooled["per_pos"] else None,
                "batch_sizes": ", ".join(str(b) for b in batch_sizes),
            })
        rows.append(row)
    return {"columns": columns, "rows": rows}


# --------------------------------------------------------------------------- where SD stops paying

def _where_sd_pays(pairs: list[tuple[dict, dict]]) -> dict:
    curves: dict[tuple[str, str, str], dict[int, float]] = {}
    for view, _ in pairs:
        if view["is_sd"] and view["batch_size"] and _finite(view["values"]["speedup"]):
            curves.setdefault((view["model"], view["dataset"], view["method"]), {})[view["batch_size"]] = \
                view["values"]["speedup"]
    limits = []
    for (model, dataset, method), points in sorted(curves.items()):
        sizes = sorted(points)
        paying = [b for b in sizes if points[b] > 1.0]
        largest = max(paying) if paying else None
        limits.append({
            "model": model, "dataset": dataset, "method": method,
            "points": [{"bs": b, "speedup": f"{points[b]:.2f}", "pays": points[b] > 1.0} for b in sizes],
            "largest": largest,
            "all_pay": bool(paying) and len(paying) == len(sizes),
            "gap": bool(paying) and any(b < largest and points[b] <= 1.0 for b in sizes),
        })
    best_by_cell: dict[tuple[str, str, int], list[tuple[float, str]]] = {}
    for (model, dataset, method), points in curves.items():
        for bs, speedup in points.items():
            best_by_cell.setdefault((model, dataset, bs), []).append((speedup, method))
    best = []
    for (model, dataset, bs), options in sorted(best_by_cell.items()):
        options.sort(key=lambda o: (-o[0], o[1]))
        top_speedup, top_method = options[0]
        best.append({"model": model, "dataset": dataset, "bs": bs, "method": top_method,
                     "speedup": f"{top_speedup:.2f}", "pays": top_speedup > 1.0,
                     "others": ", ".join(f"{m} {s:.2f}x" for s, m in options[1:])})
    return {"limits": limits, "best": best}


# --------------------------------------------------------------------------- peak memory

def _peak(value) -> float | None:
    return value if _finite(value) else None


def _memory_peaks(record: dict) -> tuple[float | None, float | None]:
    """(current, baseline) peak memory in MiB of one scenario, None where not measured."""
    memory = record.get("memory")
    baseline = record.get("baseline")
    return (_peak(memory.get("peak_mib")) if isinstance(memory, dict) else None,
            _peak(baseline.get("memory_peak_mib")) if isinstance(baseline, dict) else None)


def _memory_cell(record: dict, reference: dict | None) -> dict:
    current, baseline = _memory_peaks(record)
    ref_current, ref_baseline = _memory_peaks(reference) if reference else (None, None)
    return {"peak_mib": current, "ratio": current / ref_current if current and ref_current else None,
            "baseline_peak_mib": baseline,
            "baseline_ratio": baseline / ref_baseline if baseline and ref_baseline else None}


def memory_table(pairs: list[tuple[dict, dict]]) -> dict:
    """Peak memory of each method against the no-SD reference, per (model, dataset, batch size)."""
    groups: dict[tuple, dict[str | None, dict]] = {}    # method label (None: the no-SD reference) -> record
    for view, record in pairs:
        if any(x is not None for x in _memory_peaks(record)):
            key = (view["model"], view["dataset"], view["batch_size"])
            groups.setdefault(key, {})[view["method"] if view["is_sd"] else None] = record
    methods = sorted({m for group in groups.values() for m in group if m is not None})
    rows = []
    for (model, dataset, batch_size), group in sorted(groups.items(), key=lambda g: (g[0][:2], g[0][2] or 0)):
        reference = group.get(None)
        rows.append({
            "model": model, "dataset": dataset, "batch_size": batch_size,
            "reference": _memory_cell(reference, None) if reference else None,
            "methods": [{"method": m, **_memory_cell(group[m], reference)} if m in group else None for m in methods],
        })
    sources = _distinct((r.get("memory") or {}).get("source") for _, r in pairs if isinstance(r.get("memory"), dict))
    return {"methods": methods, "rows": rows, "sources": [str(x) for x in sources]}


def memory_text(cell: dict) -> str:
    """One cell of the memory table as plain text: "1770 MiB x1.77 (baseline 1700 MiB x1.70)"."""
    text = fmt_mib(cell["peak_mib"]) + (f" {fmt_ratio(cell['ratio'])}" if cell["ratio"] else "")
    if cell["baseline_peak_mib"] is not None:
        text += f" (baseline {fmt_mib(cell['baseline_peak_mib'])}"
        text += f" {fmt_ratio(cell['baseline_ratio'])})" if cell["baseline_ratio"] else ")"
    return text


# --------------------------------------------------------------------------- per-scenario detail

def _telemetry(record: dict) -> dict | None:
    """The GPU telemetry sampled during a scenario's measurement, formatted; None on CPU."""
    telemetry = record.get("gpu_telemetry")
    if not isinstance(telemetry, dict):
        return None

    def row(key: str, label: str) -> dict:
        stats = telemetry.get(key) if isinstance(telemetry.get(key), dict) else {}
        return {"label": label, **{k: fmt_num(stats.get(k)) for k in ("min", "median", "max")}}
    memory = telemetry.get("memory_used_mib") if isinstance(telemetry.get("memory_used_mib"), dict) else {}
    return {
        "rows": [row("sm_clock_mhz", "SM clock (MHz)"), row("mem_clock_mhz", "memory clock (MHz)"),
                 row("temperature_c", "temperature (°C)"), row("power_w", "power (W)")],
        "reasons": [{"name": str(x), "bad": x in BAD_THROTTLE_REASONS}
                    for x in telemetry.get("throttle_reasons") or []],
        "memory_start": fmt_mib(memory.get("start")), "memory_peak": fmt_mib(memory.get("peak")),
        "samples": fmt_num(telemetry.get("samples")), "interval_s": fmt_num(telemetry.get("interval_s")),
        "foreign_pids": [str(x) for x in telemetry.get("foreign_pids") or []],
    }


def _config_drift(current, baseline) -> list[dict]:
    """Effective-config keys whose value differs from the baseline's (defaults drift across vLLM versions)."""
    if not isinstance(current, dict) or not isinstance(baseline, dict):
        return []
    keys = sorted(set(current) | set(baseline))
    return [{"key": k, "baseline": pretty_json(baseline.get(k)), "current": pretty_json(current.get(k))}
            for k in keys if current.get(k) != baseline.get(k)]


def _detail(view: dict, record: dict) -> dict:
    scenario = record.get("scenario") or {}
    baseline = record.get("baseline")
    medians = (baseline.get("metric_medians") or {}) if isinstance(baseline, dict) else {}
    metrics = []
    for name, entry in (record.get("metrics") or {}).items():
        if isinstance(entry, dict):
            metrics.append({"name": str(name), "value": fmt_num(entry.get("value")),
                            "baseline": fmt_num(medians.get(name)),
                            "samples": fmt_num(entry.get("samples") or [])})
    rounds = []
    for i, r in enumerate(record.get("rounds") or []):
        if not isinstance(r, dict):
            continue
        counters = r.get("counters") or {}
        rounds.append({"n": i + 1, "wall_s": fmt_num(r.get("wall_s")), "output_tokens": fmt_num(r.get("output_tokens")),
                       "throughput": fmt_num(r.get("throughput")), "drafts": fmt_num(counters.get("drafts")),
                       "draft_tokens": fmt_num(counters.get("draft_tokens")),
                       "accepted": fmt_num(counters.get("accepted")),
                       "accepted_per_pos": fmt_num(counters.get("accepted_per_pos"))})
    distinct: dict[tuple[str, str], dict] = {}     # replicated batches repeat one request: show it once
    for o in record.get("outputs") or []:
        if isinstance(o, dict):
            key = (str(o.get("prompt")), str(o.get("output")))
            if key in distinct:
                distinct[key]["repeats"] += 1
            else:
                distinct[key] = {"request_id": str(o.get("request_id") or ""), "prompt": _clip(o.get("prompt")),
                                 "output": _clip(o.get("output")), "repeats": 1}
    samples = list(distinct.values())
    workload = record.get("workload") or {}
    lossless = record.get("lossless")
    validity = record.get("validity") or {}
    timings = record.get("timings") or {}
    memory = record.get("memory")
    return {
        "view": view,
        "open": view["status"] in FAILING,
        "scenario_json": pretty_json(scenario),
        "metrics": metrics,
        "rounds": rounds,
        "counters": json.dumps(record["counters"], sort_keys=True) if record.get("counters") is not None else None,
        "memory": {"peak": fmt_mib(memory.get("peak_mib")), "source": str(memory.get("source") or "—"),
                   "baseline": _memory_peaks(record)[1]} if isinstance(memory, dict) else None,
        "telemetry": _telemetry(record),
        "lossless": {
            "identical": fmt_num(lossless.get("identical")), "total": fmt_num(lossless.get("total")),
            "reference_id": str(lossless.get("reference_id") or scenario.get("reference_id") or "the no-SD reference"),
        } if isinstance(lossless, dict) else None,
        "validity_reasons": [str(x) for x in validity.get("reasons") or []],
        "valid": validity.get("valid"),
        "workload": {
            "source": str(workload.get("source") or "—"), "checksum": str(workload.get("checksum") or "—"),
            "stand_in": str(workload.get("stand_in") or ""),
            "requests": len(workload.get("request_ids") or []),
            "prompt_tokens": fmt_num(workload.get("prompt_tokens")),
            "output_len": fmt_num(workload.get("output_len")),
            "overlap_bleu4": fmt_num(workload.get("overlap_bleu4"), 3),
        } if workload else None,
        "effective_config": pretty_json(record.get("effective_config") or {}),
        "timings": [{"name": str(k), "value": fmt_duration(v) if _finite(v) else fmt_num(v)} for k, v in timings.items()],
        "provenance": pretty_json(record.get("provenance") or {}),
        "device": pretty_json(record.get("device") or {}),
        "baseline": {
            "vllm": str(baseline.get("vllm") or "—"), "recorded_at": str(baseline.get("recorded_at") or "—"),
            "drift": _config_drift(record.get("effective_config"), baseline.get("effective_config")),
        } if isinstance(baseline, dict) else None,
        "samples": samples[:OUTPUTS_SHOWN],
        "more_outputs": max(len(samples) - OUTPUTS_SHOWN, 0),
        "started_at": str(record.get("started_at") or "—"),
        "finished_at": str(record.get("finished_at") or "—"),
    }


# --------------------------------------------------------------------------- HTML

def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = fmt_num
    env.filters["mib"] = fmt_mib
    env.filters["ratio"] = fmt_ratio
    return env


def _filter_script() -> tuple[Markup, str]:
    """The page's only script (progressive filtering) and its CSP hash; the page reads fine without it."""
    source = (TEMPLATE_DIR / "filter.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return Markup(source), f"'sha256-{digest}'"   # our own file, not untrusted text


def render_html(data: RunData) -> str:
    """One self-contained HTML page for the run."""
    pairs = _sorted_views(data)
    views = [v for v, _ in pairs]
    colors = _method_colors(views)
    reference = load_reference()
    script, script_hash = _filter_script()
    header = _header(data, views)
    context = {
        "title": "specperf report: " + (", ".join(header["run_ids"]) or "run"),
        "header": header,
        "groups": _verdict_groups(pairs),
        "filters": {
            "model": sorted({v["model"] for v in views}), "method": sorted({v["method"] for v in views}),
            "dataset": sorted({v["dataset"] for v in views}),
            "status": sorted({v["status"] for v in views}, key=severity_rank),
        },
        "charts": _speedup_charts(pairs, colors, reference),
        "study": {"source": reference.get("source", ""), "hardware": reference.get("hardware", ""),
                  "engine": reference.get("engine", "")},
        "acceptance": _acceptance_table(pairs, colors),
        "pays": _where_sd_pays(pairs),
        "memory": memory_table(pairs),
        "details": [_detail(v, r) for v, r in pairs],
        "script": script,
        "script_hash": script_hash,
        "text_limit": TEXT_LIMIT,
    }
    return _environment().get_template("report.html.j2").render(**context)


# --------------------------------------------------------------------------- Markdown and JSON

def md_escape(text, limit: int = 300) -> str:
    """Untrusted text for a Markdown table cell: one line, no HTML, no table breaks, no code spans or links."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    text = text.replace("\\", "\\\\")
    for char in "|*_[]!#~":
        text = text.replace(char, "\\" + char)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "&#96;")


def render_markdown(data: RunData) -> str:
    """A short summary for a CI job page or a pull-request comment."""
    pairs = _sorted_views(data)
    views = [v for v, _ in pairs]
    header = _header(data, views)
    counts = ", ".join(f"{c['n']} {c['status']}" for c in header["counts"] if c["n"])
    outcome = "FAILED" if header["failed"] else "passed"
    lines = [f"## specperf: {outcome} ({counts or 'no results'}; {header['total']} scenarios)", ""]
    facts = []
    if header["profiles"]:
        facts.append("profile " + md_escape(", ".join(header["profiles"])))
    if header["run_ids"]:
        facts.append("run " + md_escape(", ".join(header["run_ids"])))
    vllm = ", ".join(header["vllm"]) or "unknown"
    if header["baseline_vllm"]:
        vllm += " (baseline " + ", ".join(header["baseline_vllm"]) + ")"
    facts.append("vLLM " + md_escape(vllm))
    if header["hardware_keys"]:
        facts.append("hardware " + md_escape(", ".join(header["hardware_keys"])))
    facts.append(md_escape(header["clocks"]["line"]))
    facts.append(f"run time {header['run_time']}")
    if header["engine_starts"] is not None:
        facts.append(f"{header['engine_starts']} engine starts")
    lines.append(" · ".join(facts))
    if header["interrupted"]:
        lines += ["", "**The run was interrupted or has not finished: results may be missing.**"]
    if header["throttle_warning"]:
        lines += ["", "**" + md_escape(header["throttle_warning"]) + "**"]
    for problem in header["problems"]:
        lines += ["", "Problem: " + md_escape(problem)]
    if not views:
        return "\n".join(lines + ["", "No scenario results."]) + "\n"
    attention = [v for v in views if v["status"] != "pass"]
    passing = [v for v in views if v["status"] == "pass"]
    shown = 0
    if attention:
        lines += [""] + _markdown_table(attention[:MARKDOWN_ROWS])
        shown += min(len(attention), MARKDOWN_ROWS)
    if passing and shown < MARKDOWN_ROWS:
        rows = passing[:MARKDOWN_ROWS - shown]
        shown += len(rows)
        lines += ["", f"<details><summary>{len(passing)} passing scenarios</summary>", ""]
        lines += _markdown_table(rows) + ["", "</details>"]
    if len(views) > shown:
        lines += ["", f"… and {len(views) - shown} more scenarios in the HTML report."]
    memory = memory_table(pairs)
    if memory["rows"]:
        lines += ["", "### Peak memory against no-SD", ""] + _markdown_memory(memory)
    return "\n".join(lines) + "\n"


def _markdown_memory(memory: dict) -> list[str]:
    lines = ["| Model | Dataset | Batch | no-SD | " + " | ".join(md_escape(m) for m in memory["methods"]) + " |",
             "|---|---|---:|---:|" + "---:|" * len(memory["methods"])]
    for row in memory["rows"][:MARKDOWN_ROWS]:
        cells = [row["reference"]] + row["methods"]
        lines.append("| " + " | ".join([md_escape(row["model"]), md_escape(row["dataset"]), fmt_num(row["batch_size"])]
                                       + [memory_text(c) if c else "—" for c in cells]) + " |")
    return lines


def _markdown_table(views: list[dict]) -> list[str]:
    lines = ["| Scenario | Verdict | Throughput (tok/s) | Speedup | Acceptance length | Why |",
             "|---|---|---:|---:|---:|---|"]
    for view in views:
        values = view["values"]
        status = md_escape(view["status"])
        lines.append("| " + " | ".join([
            md_escape(view["id"]), f"**{status}**" if view["status"] in FAILING else status,
            fmt_num(values["throughput_tok_s"]), fmt_num(values["speedup"]),
            fmt_num(values["mean_acceptance_length"]), md_escape("; ".join(_failing_lines(view))),
        ]) + " |")
    return lines


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value


def summary_json(data: RunData) -> dict:
    """Machine-readable summary: verdict counts and, per scenario, key metrics and verdicts."""
    pairs = _sorted_views(data)
    views = [v for v, _ in pairs]
    header = _header(data, views)
    scenarios = []
    for view, record in pairs:
        scenarios.append({
            "id": view["id"], "model": view["model"], "method": view["method"],
            "batch_size": view["batch_size"], "dataset": view["dataset"],
            "verdict": view["status"], "note": view["note"],
            "result_status": view["result_status"], "error": view["error"] or None,
            "metrics": dict(view["values"]),
            "metric_verdicts": view["metric_verdicts"],
            "hint": view["hint"] or None,
            "lossless": record.get("lossless"),
            "memory": record.get("memory"),
            "gpu_telemetry": record.get("gpu_telemetry"),
            "stand_in": (record.get("workload") or {}).get("stand_in"),
            "source": view["source"],
        })
    return _json_safe({
        "schema_version": SCHEMA_VERSION,
        "run_ids": header["run_ids"],
        "run_dirs": [str(d) for d in data.run_dirs],
        "profiles": header["profiles"],
        "counts": {c["status"]: c["n"] for c in header["counts"]},
        "total": header["total"],
        "failed": header["failed"],
        "passed": header["failed"] == 0,
        "vllm": header["vllm"],
        "baseline_vllm": header["baseline_vllm"],
        "hardware_keys": header["hardware_keys"],
        "drivers": header["drivers"],
        "clocks": header["clocks"],
        "memory": [{**row, "methods": [c for c in row["methods"] if c]} for row in memory_table(pairs)["rows"]],
        "started_at": header["started"] if header["started"] != "—" else None,
        "finished_at": header["finished"] if header["finished"] != "—" else None,
        "engine_starts": header["engine_starts"],
        "interrupted": header["interrupted"],
        "problems": header["problems"],
        "scenarios": scenarios,
    })


# --------------------------------------------------------------------------- files

def write_report(run_dirs: list[Path], out_dir: Path | None = None) -> Path:
    """Write index.html, summary.md and summary.json into out_dir (default: the first run directory)."""
    dirs = [Path(d) for d in run_dirs]
    return write_run_report(load_run(dirs), Path(out_dir) if out_dir is not None else dirs[0])


def write_run_report(data: RunData, out: Path) -> Path:
    """The three report files of runs already loaded (load_run)."""
    atomic_write_text(out / "summary.json", json.dumps(summary_json(data), indent=2, sort_keys=True) + "\n")
    atomic_write_text(out / "summary.md", render_markdown(data))
    index = out / "index.html"
    atomic_write_text(index, render_html(data))
    return index

